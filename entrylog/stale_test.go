package entrylog

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// staleSetup opens a storage whose hook calls onHook, and leaves ledger 1's
// entries 0..9 in a sealed log that also held ledger 2 (now deleted), so a
// compaction at threshold 1 moves them.
func staleSetup(t *testing.T, onHook func(string)) (*DB, *engine.MemFS) {
	t.Helper()
	efs := engine.NewMem()
	var mu sync.Mutex
	db, err := Open(efs, []string{"/d0"}, Options{LogSizeLimit: 32 << 10, ReadCacheMaxSize: -1, ReadAheadBatchSize: 1,
		FlushInterval: -1, GCWaitTime: -1, IndexFS: vfs.NewMem(), Logger: testLogger(),
		hook: func(p string) {
			mu.Lock()
			f := onHook
			mu.Unlock()
			if f != nil {
				f(p)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, l := range []int64{1, 2, 4} {
		for e := int64(0); e < 10; e++ {
			mustDo(t, db.AddEntry(l, e, versioned(l, e, 0)))
		}
	}
	mustDo(t, db.Flush())
	for e := int64(0); e < 40; e++ { // fill the log so it is sealed
		mustDo(t, db.AddEntry(3, e, versioned(3, e, 0)))
	}
	mustDo(t, db.Flush())
	mustDo(t, db.DeleteLedger(2))
	if loc := locationOf(t, db, 1, 0); loc.logID >= db.shards[0].logs.currentID() {
		t.Fatalf("ledger 1 is in the current log %d; the test needs it sealed", loc.logID)
	}
	return db, efs
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func locationOf(t *testing.T, db *DB, l, e int64) location {
	t.Helper()
	v, ok, err := db.shardFor(l).ix.get(entryKey(l, e))
	if err != nil || !ok {
		t.Fatalf("entry %d/%d not in the index: %v", l, e, err)
	}
	loc, _ := decodeLocation(v)
	return loc
}

// TestCompactionYieldsToNewerWrites: between compaction reading a log's
// live records and committing their new locations, entry 1/3 is replaced
// (and flushed) and ledger 4 deleted. The compare-and-set must keep the
// new version and must not bring ledger 4's entries back.
func TestCompactionYieldsToNewerWrites(t *testing.T) {
	var db *DB
	fired := false
	db, _ = staleSetup(t, func(p string) {
		if p != "compact:records-read" || fired {
			return
		}
		fired = true
		mustDo(t, db.AddEntry(1, 3, versioned(1, 3, 1)))
		mustDo(t, db.Flush())
		mustDo(t, db.DeleteLedger(4))
	})
	mustDo(t, db.Compact(context.Background(), 1))
	if !fired {
		t.Fatal("compaction moved nothing")
	}
	ops := []op{{kind: opDelete, ledger: 2}, {kind: opDelete, ledger: 4}}
	for _, l := range []int64{1, 3} {
		for e := int64(0); e < 40; e++ {
			if l == 1 && e >= 10 {
				break
			}
			ops = append(ops, op{kind: opAdd, ledger: l, entry: e, data: versioned(l, e, 0)})
		}
	}
	ops = append(ops, op{kind: opAdd, ledger: 1, entry: 3, data: versioned(1, 3, 1)})
	if err := checkModel(db, newModel(ops)); err != nil {
		t.Fatal(err)
	}
	if err := checkIndex(db, ops); err != nil {
		t.Fatal(err)
	}
}

// TestReadRetriesMovedEntry: a reader has the entry's location from the
// index when compaction moves the entry and removes the log. Pinning the
// log fails, the reader looks the entry up again and reads the new copy.
func TestReadRetriesMovedEntry(t *testing.T) {
	var db *DB
	lookups := 0
	db, efs := staleSetup(t, func(p string) {
		if p != "read:looked-up" {
			return
		}
		lookups++
		if lookups == 1 {
			mustDo(t, db.Compact(context.Background(), 1))
		}
	})
	old := locationOf(t, db, 1, 5)
	got, err := db.ReadEntry(1, 5)
	if err != nil || !bytes.Equal(got, versioned(1, 5, 0)) {
		t.Fatalf("read across a compaction: %d bytes, %v", len(got), err)
	}
	if lookups != 2 {
		t.Fatalf("%d index lookups, want 2 (the second after the log went)", lookups)
	}
	if _, err := efs.Stat(db.shards[0].logs.path(old.logID)); !engine.IsNotExist(err) {
		t.Fatalf("the compacted log is still there: %v", err)
	}
	if now := locationOf(t, db, 1, 5); now.logID == old.logID {
		t.Fatalf("entry not moved: %v", now)
	}
}

// TestReadPinsLog: while a reader has pinned a log, compaction retires it
// but must not remove the file until the read is done.
func TestReadPinsLog(t *testing.T) {
	var db *DB
	var efs *engine.MemFS
	var old location
	done := make(chan error, 1)
	pinned := false
	db, efs = staleSetup(t, func(p string) {
		if p != "read:pinned" || pinned {
			return
		}
		pinned = true
		go func() { done <- db.Compact(context.Background(), 1) }()
		path := db.shards[0].logs.path(old.logID)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if !containsID(db.shards[0].logs.ids(), old.logID) {
				break // retired: no new reader can pin it
			}
			if time.Now().After(deadline) {
				t.Error("compaction never retired the log")
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // give a wrong implementation time to remove the file
		if _, err := efs.Stat(path); err != nil {
			t.Errorf("the log was removed while a reader had it pinned: %v", err)
		}
	})
	old = locationOf(t, db, 1, 7)
	got, err := db.ReadEntry(1, 7)
	if err != nil || !bytes.Equal(got, versioned(1, 7, 0)) {
		t.Fatalf("read of a pinned log: %d bytes, %v", len(got), err)
	}
	mustDo(t, <-done)
	if _, err := efs.Stat(db.shards[0].logs.path(old.logID)); !engine.IsNotExist(err) {
		t.Fatalf("the log was not removed once unpinned: %v", err)
	}
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
