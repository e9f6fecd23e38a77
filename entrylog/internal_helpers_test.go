package entrylog

import (
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
)

// testLogger discards logs unless MAGNETAR_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("MAGNETAR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func isNoLedger(err error) bool { return errors.Is(err, ErrNoLedger) }
func isNoEntry(err error) bool  { return errors.Is(err, ErrNoEntry) }
