package entrylog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
)

func noSpaceOptions() Options {
	return Options{LogSizeLimit: 256 << 10, PreallocSize: 64 << 10, WriteCacheMaxSize: 1 << 20,
		FlushInterval: -1, GCWaitTime: -1, MaxThrottleTime: 50e6, IndexFS: vfs.NewMem(), Logger: testLogger()}
}

func noSpacePayload(l, e int64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("%d/%d;", l, e)), 500)
}

// addAll adds entries [from, to) of ledger 1.
func addAll(t *testing.T, db *DB, from, to int64) {
	t.Helper()
	for e := from; e < to; e++ {
		if err := db.AddEntry(1, e, noSpacePayload(1, e)); err != nil {
			t.Fatalf("add %d: %v", e, err)
		}
	}
}

func readAll(t *testing.T, db *DB, to int64) {
	t.Helper()
	for e := int64(0); e < to; e++ {
		got, err := db.ReadEntry(1, e)
		if err != nil || !bytes.Equal(got, noSpacePayload(1, e)) {
			t.Fatalf("read %d: %v", e, err)
		}
	}
}

// TestFlushOnFullDiskWaitsForSpace (issue 30): a flush that finds the
// disk full fails with ErrNoSpace and does not fail the storage; the
// entries stay readable from the write cache, and once space is freed the
// next flush writes them, without reopening. Before, the first ENOSPC
// failed the storage until restart.
func TestFlushOnFullDiskWaitsForSpace(t *testing.T) {
	mem := engine.NewMemWithOptions(engine.MemOptions{Capacity: 1 << 20})
	opts := noSpaceOptions()
	db, err := Open(mem, []string{"/ledgers"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, db.SetMasterKey(1, []byte("k")))
	addAll(t, db, 0, 20)
	mustDo(t, db.Flush())
	filler := fill(t, mem, "/filler")
	addAll(t, db, 20, 60)
	err = db.Flush()
	if !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrFailed) {
		t.Fatalf("flush on a full disk: %v, want ErrNoSpace", err)
	}
	readAll(t, db, 60)
	if st := db.Stats(); st.NoSpaceFlushes == 0 {
		t.Fatal("NoSpaceFlushes not counted")
	}
	mustDo(t, mem.Remove(filler))
	mustDo(t, db.Flush())
	addAll(t, db, 60, 80)
	mustDo(t, db.Flush())
	readAll(t, db, 80)
	mustDo(t, db.Close())
	db, err = Open(mem, []string{"/ledgers"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	readAll(t, db, 80)
}

// TestNoSpaceFaultsDoNotFailStorage injects ENOSPC into each kind of
// allocating operation of a flush (write, preallocate, create): the flush
// fails with ErrNoSpace, the storage goes on, and the next flush after the
// fault is lifted writes everything. ENOSPC from a sync still fails it.
func TestNoSpaceFaultsDoNotFailStorage(t *testing.T) {
	for _, op := range []errorfs.Op{errorfs.OpWrite, errorfs.OpPreallocate, errorfs.OpCreate, errorfs.OpSync} {
		t.Run(op.String(), func(t *testing.T) {
			toggle := errorfs.NewToggle(errorfs.OnPath("*.elog", errorfs.Fault{Err: unix.ENOSPC, Short: true}, op))
			toggle.Set(false)
			opts := noSpaceOptions()
			opts.LogSizeLimit = 64 << 10 // a rotation (a new log) in each flush
			db, err := Open(errorfs.Wrap(engine.NewMem(), toggle), []string{"/ledgers"}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			mustDo(t, db.SetMasterKey(1, []byte("k")))
			addAll(t, db, 0, 60)
			toggle.Set(true)
			err = db.Flush()
			toggle.Set(false)
			readAll(t, db, 60)
			if op == errorfs.OpSync {
				if !errors.Is(err, ErrFailed) {
					t.Fatalf("flush after ENOSPC on a sync: %v, want ErrFailed", err)
				}
				return
			}
			if !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrFailed) {
				t.Fatalf("flush with ENOSPC on %v: %v, want ErrNoSpace", op, err)
			}
			mustDo(t, db.Flush())
			readAll(t, db, 60)
		})
	}
}

// TestSmallDiskStartsEntryLog: the first preallocation is sized to the
// free space; before, a 1 GiB log on an 8 MiB disk failed with ENOSPC.
func TestSmallDiskStartsEntryLog(t *testing.T) {
	mem := engine.NewMemWithOptions(engine.MemOptions{Capacity: 8 << 20})
	opts := noSpaceOptions()
	opts.LogSizeLimit, opts.PreallocSize = 0, 0 // defaults: 1 GiB logs, 64 MiB steps
	db, err := Open(mem, []string{"/ledgers"}, opts)
	if err != nil {
		t.Fatalf("open on an 8 MiB disk: %v", err)
	}
	defer db.Close()
	if free, _ := mem.FreeSpace("/"); free < 6<<20 {
		t.Fatalf("the entry log took %d of 8 MiB; want at most an eighth of the free space", 8<<20-free)
	}
	mustDo(t, db.SetMasterKey(1, []byte("k")))
	addAll(t, db, 0, 100)
	mustDo(t, db.Flush())
	readAll(t, db, 100)
}

// TestSpaceFuncDecidesGrowth: the SpaceFunc (the bookie's disk check) is
// asked before each preallocation and can refuse it.
func TestSpaceFuncDecidesGrowth(t *testing.T) {
	refuse, asked := false, 0
	opts := noSpaceOptions()
	opts.Space = func(dir string, need, want int64) (int64, error) {
		asked++
		if refuse && need > 0 {
			return 0, fmt.Errorf("%w: over the threshold", ErrNoSpace)
		}
		return want, nil
	}
	db, err := Open(engine.NewMem(), []string{"/ledgers"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustDo(t, db.SetMasterKey(1, []byte("k")))
	refuse = true
	addAll(t, db, 0, 60) // more than one 64 KiB step
	if err := db.Flush(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("flush past a refused preallocation: %v, want ErrNoSpace", err)
	}
	refuse = false
	mustDo(t, db.Flush())
	readAll(t, db, 60)
	if asked < 2 {
		t.Fatalf("SpaceFunc asked %d times", asked)
	}
}

// fill writes a file until the disk is full and returns its name.
func fill(t *testing.T, fs engine.FS, name string) string {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off, chunk := int64(0), 64<<10; chunk >= 512; {
		if _, err := f.WriteAt([][]byte{make([]byte, chunk)}, off); err != nil {
			if !engine.IsNoSpace(err) {
				t.Fatal(err)
			}
			chunk /= 2
			continue
		}
		off += int64(chunk)
	}
	return name
}
