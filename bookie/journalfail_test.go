package bookie

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// TestJournalFailureMakesBookieReadOnly (issue 16, defect 6b): once its
// journal fails, a bookie can make no add durable, so it turns read-only
// for good and its registration says so: clients stop choosing it for new
// ensembles. Before, it stayed registered writable and failed every add.
func TestJournalFailureMakesBookieReadOnly(t *testing.T) {
	faults := errorfs.NewToggle(errorfs.OnPath("/journal", errorfs.Fault{}, errorfs.OpWrite, errorfs.OpSync))
	faults.Set(false)
	fs := errorfs.Wrap(engine.NewMem(), faults)
	open := func(entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(nil), nil }
	core, err := OpenCore(fs, []string{"/journal"}, journal.Options{Logger: quietLogger()}, open,
		Options{LedgerDirs: []string{"/ledgers"}, Logger: quietLogger(),
			DiskUsage: func(string) (uint64, uint64, error) { return 1 << 30, 1 << 31, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	meta := metadata.NewMemoryServer()
	store := meta.NewSession()
	defer store.Close()
	reg, err := registry.Register(context.Background(), store, registry.Registration{BookieID: "b1", Address: "b1"}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	var told atomic.Bool
	core.OnModeChange(func(ro bool) {
		told.Store(ro)
		_ = reg.SetReadOnly(context.Background(), ro)
	})
	if err := handleAdd(core, 1, 0, "ok"); err != nil {
		t.Fatalf("add before the failure: %v", err)
	}
	faults.Set(true)
	if err := handleAdd(core, 1, 1, "lost"); err == nil {
		t.Fatal("an add was acknowledged by a failed journal")
	}
	faults.Set(false) // the journal stays failed: a failed sync is final
	if ro, why := core.ReadOnly(); !ro {
		t.Fatal("bookie still writable after its journal failed")
	} else if why == "" {
		t.Fatal("read-only without a reason")
	}
	if !told.Load() {
		t.Fatal("the mode listener (registration) was not told")
	}
	regs, err := registry.Bookies(context.Background(), store)
	if err != nil || len(regs) != 1 || !regs[0].ReadOnly {
		t.Fatalf("registration after the journal failed: %+v %v", regs, err)
	}
	if err := handleAdd(core, 2, 0, "new"); !errors.Is(err, client.ErrReadOnly) {
		t.Fatalf("add after the journal failed: %v, want %v", err, client.ErrReadOnly)
	}
}

// handleAdd runs one add through Core.Handle and waits for its answer.
func handleAdd(c *Core, ledgerID, entryID int64, payload string) error {
	done := make(chan error, 1)
	c.Handle(&bkproto.Request{Op: bkproto.OpAdd, LedgerID: ledgerID, EntryID: entryID, MasterKey: testKey,
		Data: entry(ledgerID, entryID, entryID-1, payload)},
		func(r *bkproto.Response) { done <- client.StatusError(r.Status) })
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		return errors.New("add not answered")
	}
}
