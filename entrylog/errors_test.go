package entrylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pebbleerrorfs "github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
)

// TestErrorSweep fails operation k (k = 0, 1, 2, ...) of the entry logs'
// file system during one life of a storage that already holds data: open,
// adds across several log rotations, cold reads, state changes, flushes, a
// deletion, a compaction, close. Each time: the injected error surfaces;
// a failed write or sync fails the storage (ErrFailed) and every later
// change fails too; reads keep working; and after a crash, everything a
// completed checkpoint covered is there, and journal replay restores the
// whole model.
func TestErrorSweep(t *testing.T) {
	for k := int64(0); ; k++ {
		done, err := sweepOnce(k)
		if err != nil {
			t.Fatalf("fault at op %d: %v", k, err)
		}
		if done {
			if k < 60 {
				t.Fatalf("the whole life took only %d file-system operations", k)
			}
			t.Logf("swept %d operations", k)
			return
		}
	}
}

// sweep is one life of the sweep with its model.
type sweep struct {
	ops        []op
	completed  int
	surfaced   bool   // an error matching the injected one came back
	failedAt   string // the call that first returned ErrFailed
	injectedOp errorfs.Op
	injected   bool
	opened     bool // Open succeeded: a fault after it must fail the storage
	fs         *errorfs.FS
}

func (w *sweep) StartCheckpoint() Checkpoint { return len(w.ops) }

func (w *sweep) CompleteCheckpoint(cp Checkpoint) error {
	w.completed = max(w.completed, cp.(int))
	return nil
}

func sweepOptions(cp Checkpointer, ifs vfs.FS) Options {
	return Options{LogSizeLimit: 8 << 10, WriteCacheMaxSize: 4 << 20, FlushInterval: -1, GCWaitTime: -1,
		ReadAheadBatchSize: 4, IndexFS: ifs, IndexMemTableSize: 256 << 10, Checkpointer: cp, Logger: testLogger()}
}

func sweepOnce(k int64) (done bool, err error) {
	base, pfs := engine.NewMem(), vfs.NewCrashableMem()
	w := &sweep{}
	if err := w.seed(base, pfs); err != nil {
		return false, fmt.Errorf("seeding: %w", err)
	}
	w.fs = errorfs.Wrap(base, errorfs.InjectorFunc(func(o errorfs.Op, _ string, i int64) (errorfs.Fault, bool) {
		if i == k {
			w.injected, w.injectedOp = true, o
		}
		return errorfs.Fault{}, i == k
	}))
	if err := w.life(pfs); err != nil {
		return false, err
	}
	// A failed free-space query only loses the cap on a preallocation
	// step (issue 30): it need not surface.
	if w.injected && !w.surfaced && w.injectedOp != errorfs.OpFreeSpace {
		return false, fmt.Errorf("the injected failure of a %v never surfaced", w.injectedOp)
	}
	if mustFail(w.injectedOp) && w.injected && w.opened && w.failedAt == "" {
		return false, fmt.Errorf("a failed %v did not fail the storage", w.injectedOp)
	}
	return !w.injected, w.checkAfterCrash(base, pfs)
}

// mustFail reports whether a failure of op kind o must stop the storage:
// every write and sync of entry-log data does (a directory sync may be
// after a log's removal, which is harmless to lose).
func mustFail(o errorfs.Op) bool {
	return o == errorfs.OpWrite || o == errorfs.OpSync || o == errorfs.OpCreate ||
		o == errorfs.OpPreallocate || o == errorfs.OpTruncate
}

// seed writes a first life's data with no faults.
func (w *sweep) seed(base *engine.MemFS, pfs vfs.FS) error {
	db, err := Open(base, []string{"/d0"}, sweepOptions(w, pfs))
	if err != nil {
		return err
	}
	for e := int64(0); e < 10; e++ {
		data := bytes.Repeat([]byte{byte(e)}, 900)
		if err := db.AddEntry(1, e, data); err != nil {
			return err
		}
		w.ops = append(w.ops, op{kind: opAdd, ledger: 1, entry: e, data: data})
	}
	if err := db.SetMasterKey(1, []byte("k1")); err != nil {
		return err
	}
	w.ops = append(w.ops, op{kind: opKey, ledger: 1, data: []byte("k1")})
	return db.Close()
}

// check records a call's error: it must be the injected one, and once the
// storage failed every change must fail.
func (w *sweep) check(call string, mutation bool, err error) error {
	if err == nil {
		if mutation && w.failedAt != "" {
			return fmt.Errorf("%s succeeded after %s failed the storage", call, w.failedAt)
		}
		return nil
	}
	if !errors.Is(err, errorfs.ErrInjected) {
		return fmt.Errorf("%s: error is not the injected one: %w", call, err)
	}
	w.surfaced = true
	if errors.Is(err, ErrFailed) && w.failedAt == "" {
		w.failedAt = call
	}
	if mutation && w.failedAt != "" && !errors.Is(err, ErrFailed) {
		return fmt.Errorf("%s after %s failed the storage: %v, want ErrFailed", call, w.failedAt, err)
	}
	return nil
}

func (w *sweep) do(call string, o op, err error) error {
	if err == nil {
		w.ops = append(w.ops, o)
	}
	return w.check(call, true, err)
}

// life is the second life, on the faulty file system.
func (w *sweep) life(pfs vfs.FS) error {
	db, err := Open(w.fs, []string{"/d0"}, sweepOptions(w, pfs))
	if err != nil {
		return w.check("Open", false, err)
	}
	w.opened = true
	steps := []func(*DB) error{
		func(db *DB) error { return w.addRange(db, 2, 0, 20) },
		func(db *DB) error { return w.addRange(db, 3, 0, 10) },
		func(db *DB) error { return w.readAll(db, "cold read") },
		func(db *DB) error {
			return w.do("SetMasterKey", op{kind: opKey, ledger: 2, data: []byte("k2")}, db.SetMasterKey(2, []byte("k2")))
		},
		func(db *DB) error {
			_, err := db.SetFenced(1)
			return w.do("SetFenced", op{kind: opFence, ledger: 1}, err)
		},
		func(db *DB) error {
			return w.do("SetExplicitLAC", op{kind: opLAC, ledger: 2, data: []byte("lac")}, db.SetExplicitLAC(2, []byte("lac")))
		},
		func(db *DB) error { return w.check("Flush", true, db.Flush()) },
		func(db *DB) error { return w.addRange(db, 4, 0, 5) },
		func(db *DB) error { return w.do("DeleteLedger", op{kind: opDelete, ledger: 1}, db.DeleteLedger(1)) },
		func(db *DB) error { return w.do("DeleteLedger", op{kind: opDelete, ledger: 3}, db.DeleteLedger(3)) },
		func(db *DB) error { return w.check("Flush", true, db.Flush()) },
		func(db *DB) error { return w.readAll(db, "cold read") },
		func(db *DB) error { return w.check("Compact", true, db.Compact(context.Background(), 1)) },
		func(db *DB) error { return w.addRange(db, 2, 20, 25) },
		func(db *DB) error { return w.check("Flush", true, db.Flush()) },
		func(db *DB) error { return w.readAll(db, "read") },
	}
	for _, step := range steps {
		if err := step(db); err != nil {
			db.Close()
			return err
		}
	}
	return w.check("Close", false, db.Close())
}

func (w *sweep) addRange(db *DB, l, from, to int64) error {
	rng := rand.New(rand.NewPCG(uint64(l), uint64(from)))
	for e := from; e < to; e++ {
		data := randomBytes(rng, 200+rng.IntN(1500))
		if err := w.do("AddEntry", op{kind: opAdd, ledger: l, entry: e, data: data}, db.AddEntry(l, e, data)); err != nil {
			return err
		}
	}
	return nil
}

// readAll reads every entry the model holds. After the fault was injected
// every read must work: a failed storage still serves reads.
func (w *sweep) readAll(db *DB, call string) error {
	m := newModel(w.ops)
	for l, lm := range m.ledgers {
		for e, want := range lm.entries {
			before := w.injected
			got, err := db.ReadEntry(l, e)
			if err == nil && !bytes.Equal(got, want) {
				return fmt.Errorf("%s %d/%d: wrong bytes", call, l, e)
			}
			if err != nil && before {
				return fmt.Errorf("%s %d/%d after the fault: %w", call, l, e, err)
			}
			if err := w.check(call, false, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAfterCrash crashes both file systems and checks the recovered
// storage against the model, then replays the journal.
func (w *sweep) checkAfterCrash(base *engine.MemFS, pfs *vfs.MemFS) error {
	eimg, pimg := base.CrashClone(engine.CrashOptions{}), pfs.CrashClone(vfs.CrashCloneCfg{})
	db, err := Open(eimg, []string{"/d0"}, sweepOptions(nil, pimg))
	if err != nil {
		return fmt.Errorf("open after the fault and a crash: %w", err)
	}
	defer db.Close()
	m := newModel(w.ops)
	if err := checkDurable(db, w.ops, w.completed, m.deleted); err != nil {
		return fmt.Errorf("after crash: %w", err)
	}
	if err := checkIndex(db, w.ops); err != nil {
		return fmt.Errorf("after crash: %w", err)
	}
	if err := replay(db, w.ops[w.completed:]); err != nil {
		return err
	}
	if err := checkModel(db, m); err != nil {
		return fmt.Errorf("after crash and replay: %w", err)
	}
	return nil
}

// TestIndexWriteFailure fails the file system under Pebble: a failed WAL
// write is fatal to Pebble, and the storage must turn that into fail-stop
// (not a crash), keep serving reads, and close without hanging.
func TestIndexWriteFailure(t *testing.T) {
	disk := &pebbleerrorfs.Toggle{Injector: pebbleerrorfs.ErrInjected}
	ifs := pebbleerrorfs.Wrap(vfs.NewMem(), disk)
	db, err := Open(engine.NewMem(), []string{"/d0"}, sweepOptions(nil, ifs))
	if err != nil {
		t.Fatal(err)
	}
	for e := int64(0); e < 5; e++ {
		if err := db.AddEntry(1, e, []byte(fmt.Sprint("entry ", e))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.AddEntry(1, 5, []byte("entry 5")); err != nil {
		t.Fatal(err)
	}
	disk.On()
	err = db.Flush()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, pebbleerrorfs.ErrInjected) {
		t.Fatalf("Flush with a failing index: %v, want ErrFailed wrapping the injected error", err)
	}
	if err := db.AddEntry(1, 6, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("AddEntry after failure: %v", err)
	}
	if err := db.DeleteLedger(1); !errors.Is(err, ErrFailed) {
		t.Fatalf("DeleteLedger after failure: %v", err)
	}
	for e := int64(0); e <= 5; e++ {
		if got, err := db.ReadEntry(1, e); err != nil || !strings.HasSuffix(string(got), fmt.Sprint(e)) {
			t.Fatalf("read %d after failure: %q %v", e, got, err)
		}
	}
	if err := db.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close of a failed storage: %v, want its failure", err)
	}
}
