package broker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// testLedgers is the topic storage of broker tests: the in-memory managed
// ledgers, or with MAGNETAR_BROKER_STORAGE=bookie (make test runs both)
// managed ledgers over a ledger client and an in-process bookie.
func testLedgers(t *testing.T, maxPerLedger int64) managedledger.Factory {
	t.Helper()
	if os.Getenv("MAGNETAR_BROKER_STORAGE") != "bookie" {
		return managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: maxPerLedger})
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fs := engine.NewMem()
	open := func(entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(nil), nil }
	// Small journal files: the mem engine copies a whole file per datasync.
	core, err := bookie.OpenCore(fs, []string{"/journal"}, journal.Options{Logger: quiet, PreallocSize: 64 << 10, MaxFileSize: 1 << 20}, open,
		bookie.Options{Logger: quiet, LedgerDirs: []string{"/"}, DiskUsage: func(string) (uint64, uint64, error) { return 1 << 30, 1 << 31, nil }})
	if err != nil {
		t.Fatal(err)
	}
	store := metadata.NewMemoryServer().NewSession()
	if _, err := bookie.Register(context.Background(), store, bookie.Registration{BookieID: "b", Address: "b"}, quiet); err != nil {
		t.Fatal(err)
	}
	tr := ledger.NewLocalTransport()
	tr.Add("b", core)
	lc, err := ledger.New(context.Background(), ledger.Config{Store: store, Transport: tr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if maxPerLedger <= 0 {
		maxPerLedger = 50000
	}
	f, err := managedledger.NewBKFactory(managedledger.Config{Store: store, Ledgers: lc, MaxEntriesPerLedger: maxPerLedger,
		MinLedgerRolloverTime: 1, MarkDeleteRate: 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close(); core.Close(); store.Close() })
	return f
}
