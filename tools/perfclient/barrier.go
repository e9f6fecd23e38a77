package perfclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Barrier files: a process of a spread run creates ReadyFilePrefix+<pid>
// in the barrier directory once its clients exist, then waits for
// GoFile there; whoever runs the processes creates GoFile once every one
// is ready (benchreport's perfSpread).
const (
	ReadyFilePrefix = "ready-"
	GoFile          = "go"
)

// barrierPoll is how often a waiting process looks for GoFile: well
// under the warm-up, so the processes start within this of each other.
const barrierPoll = 5 * time.Millisecond

// BarrierTimeout bounds the wait for GoFile: a run whose other processes
// never got ready (or whose driver died) ends with an error instead of
// waiting for ever.
const BarrierTimeout = 10 * time.Minute

// FileBarrier is a StartBarrier through files in dir (which must exist),
// waiting at most BarrierTimeout.
func FileBarrier(dir string) func(context.Context) error {
	return fileBarrier(dir, BarrierTimeout)
}

func fileBarrier(dir string, timeout time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ready := filepath.Join(dir, fmt.Sprintf("%s%d", ReadyFilePrefix, os.Getpid()))
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			return fmt.Errorf("say ready: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return WaitForFile(ctx, filepath.Join(dir, GoFile))
	}
}

// WaitForFile returns once path exists, or ctx's error.
func WaitForFile(ctx context.Context, path string) error {
	t := time.NewTicker(barrierPoll)
	defer t.Stop()
	for {
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wait for %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
}

// ReadyCount is how many processes said ready in dir.
func ReadyCount(dir string) (int, error) {
	m, err := filepath.Glob(filepath.Join(dir, ReadyFilePrefix+"*"))
	return len(m), err
}
