package entrylog

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
)

// TestMemEngineIndexSurvives: on the mem engine, with no IndexFS given,
// the index must live and crash with the engine FS. It was a new empty
// Pebble mem FS on every Open, so a restart (clean or a crash) kept the
// entry logs and lost the index: every entry a checkpoint had covered was
// gone ("no such ledger"), which a bookie crashed twice in a row showed.
func TestMemEngineIndexSurvives(t *testing.T) {
	open := func(fs *engine.MemFS) *DB {
		t.Helper()
		db, err := Open(fs, []string{"/d0"}, Options{FlushInterval: -1, GCWaitTime: -1, Logger: testLogger()})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return db
	}
	check := func(db *DB, when string, n int) {
		t.Helper()
		for e := range n {
			got, err := db.ReadEntry(7, int64(e))
			if err != nil || string(got) != fmt.Sprint("entry-", e) {
				t.Fatalf("%s: read 7/%d: %q, %v", when, e, got, err)
			}
		}
		if fenced, err := db.IsFenced(7); err != nil || !fenced {
			t.Fatalf("%s: fenced %v, %v", when, fenced, err)
		}
	}
	fs := engine.NewMem()
	db := open(fs)
	mustDo(t, db.SetMasterKey(7, []byte("key")))
	for e := range 5 {
		mustDo(t, db.AddEntry(7, int64(e), []byte(fmt.Sprint("entry-", e))))
	}
	_, err := db.SetFenced(7)
	mustDo(t, err)
	mustDo(t, db.Flush())
	for i, opts := range []engine.CrashOptions{{}, {Rand: rand.New(rand.NewSource(1))}} {
		crashed := fs.CrashClone(opts)
		db2 := open(crashed)
		check(db2, fmt.Sprintf("after crash %d", i), 5)
		// Written after the first crash and flushed: a crash of the
		// crash image keeps it too.
		mustDo(t, db2.AddEntry(7, 5, []byte("entry-5")))
		mustDo(t, db2.Flush())
		db3 := open(crashed.CrashClone(opts))
		check(db3, fmt.Sprintf("after crash %d and another", i), 6)
		mustDo(t, db3.Close())
		mustDo(t, db2.Close())
	}
	mustDo(t, db.Close())
	db = open(fs)
	check(db, "after a clean restart", 5)
	mustDo(t, db.Close())
}
