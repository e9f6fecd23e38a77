// Package ledgertest runs bookies inside a test process for the layers
// above the ledger client (managed ledgers, the broker): a bookie core on
// the mem engine, registered in a metadata store and reached through a
// ledger.LocalTransport.
//
// Bookie faults (failed, refused, dropped, delayed or altered requests)
// come from the sub-package fault: its Transport wraps a LocalTransport.
// It is a package of its own because this one imports ledger, and the
// ledger package's own tests use it too.
package ledgertest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// Quiet is a logger that drops everything.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Storage chooses a bookie's ledger storage.
type Storage int

const (
	// MemoryStorage never checkpoints the journal: after a crash the
	// journal replay restores exactly what was durable. Fast.
	MemoryStorage Storage = iota
	// EntryLogStorage is the real entry-log storage (on the mem engine).
	EntryLogStorage
)

// Bookie is a running in-process bookie.
type Bookie struct {
	ID    string
	Core  *bookie.Core
	store metadata.Store
}

// StartBookie opens a bookie on fs (journal in /journal, ledgers in
// /ledgers), registers it as id in a new session of meta, and adds it to
// tr. Journal files are kept small because the mem engine copies a whole
// file on every datasync.
func StartBookie(t testing.TB, fs engine.FS, meta *metadata.MemoryServer, tr *ledger.LocalTransport, id string, st Storage) *Bookie {
	t.Helper()
	open := func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		if st == MemoryStorage {
			return entrylog.NewMemory(nil), nil
		}
		return entrylog.Open(fs, []string{"/ledgers"}, entrylog.Options{Checkpointer: cp, Logger: Quiet(), LogSizeLimit: 16 << 20})
	}
	core, err := bookie.OpenCore(fs, []string{"/journal"}, journal.Options{Logger: Quiet(), PreallocSize: 64 << 10, MaxFileSize: 1 << 20}, open,
		bookie.Options{Logger: Quiet(), LedgerDirs: []string{"/"}, DiskUsage: func(string) (uint64, uint64, error) { return 1 << 30, 1 << 31, nil }})
	if err != nil {
		t.Fatalf("start bookie %s: %v", id, err)
	}
	store := meta.NewSession()
	if _, err := registry.Register(context.Background(), store, registry.Registration{BookieID: id, Address: id}, Quiet()); err != nil {
		t.Fatalf("register bookie %s: %v", id, err)
	}
	tr.Add(id, core)
	return &Bookie{ID: id, Core: core, store: store}
}

// Stop closes the bookie and its session and removes it from tr.
func (b *Bookie) Stop(tr *ledger.LocalTransport) {
	tr.Add(b.ID, nil)
	b.Core.Close()
	b.store.Close()
}

// Client returns a ledger client on a new session of meta over tr,
// closed with the test.
func Client(t testing.TB, meta *metadata.MemoryServer, tr *ledger.LocalTransport) (*ledger.Client, metadata.Store) {
	t.Helper()
	store := meta.NewSession()
	cl, err := ledger.New(context.Background(), ledger.Config{Store: store, Transport: tr, Logger: Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); store.Close() })
	return cl, store
}
