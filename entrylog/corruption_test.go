package entrylog

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// corruptionFixture is a closed storage holding ledger 1's entries 0..19
// (one flush, so adjacent on disk) and the file systems it lives on.
type corruptionFixture struct {
	efs  *engine.MemFS
	ifs  vfs.FS
	opts Options
}

func newCorruptionFixture(t *testing.T) *corruptionFixture {
	t.Helper()
	f := &corruptionFixture{efs: engine.NewMem(), ifs: vfs.NewMem()}
	f.opts = Options{FlushInterval: -1, GCWaitTime: -1, IndexFS: f.ifs, Logger: testLogger(), ReadAheadBatchSize: 10}
	db := f.open(t)
	for e := int64(0); e < 20; e++ {
		mustDo(t, db.AddEntry(1, e, versioned(1, e, 0)))
	}
	mustDo(t, db.Close())
	return f
}

func (f *corruptionFixture) open(t *testing.T) *DB {
	t.Helper()
	db, err := Open(f.efs, []string{"/d0"}, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// location returns where entry e of ledger 1 lies, read from a fresh open.
func (f *corruptionFixture) location(t *testing.T, e int64) location {
	db := f.open(t)
	defer db.Close()
	return locationOf(t, db, 1, e)
}

// flip xors one byte of a file, as a failing disk would.
func flip(t *testing.T, fs engine.FS, path string, off int64) {
	t.Helper()
	file, err := fs.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	b := make([]byte, 1)
	if _, err := file.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := file.WriteAtSync([][]byte{b}, off); err != nil {
		t.Fatal(err)
	}
}

func logPath(id uint64) string { return "/d0/" + logFileName(id) }

// TestCorruptRecord damages one byte of a record (payload, then each
// header field) on disk: reading that entry fails with an error matching
// engine.ErrCorruption that names the file and the offset, never
// ErrNoEntry; its neighbours, read ahead in the same read, still read.
func TestCorruptRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64 // offset inside the record
	}{{"payload", RecordHeaderSize + 50}, {"length", 1}, {"crc", 5}, {"ledger", 9}, {"entry", 17}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCorruptionFixture(t)
			loc := f.location(t, 7)
			flip(t, f.efs, logPath(loc.logID), loc.offset+tc.at)
			db := f.open(t)
			defer db.Close()
			for _, e := range []int64{5, 7, 9} { // 5 reads 7 ahead; 7 is read itself
				got, err := db.ReadEntry(1, e)
				if e != 7 {
					if err != nil || !bytes.Equal(got, versioned(1, e, 0)) {
						t.Fatalf("entry %d next to the damage: %v", e, err)
					}
					continue
				}
				if !errors.Is(err, engine.ErrCorruption) || errors.Is(err, ErrNoEntry) {
					t.Fatalf("read of the damaged entry: %v, want corruption", err)
				}
				for _, want := range []string{logFileName(loc.logID), "offset"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("corruption error %q does not name %q", err, want)
					}
				}
			}
			err := db.Compact(context.Background(), 1.01)
			if !errors.Is(err, engine.ErrCorruption) {
				t.Fatalf("compacting the damaged log: %v, want corruption", err)
			}
			if _, err := f.efs.Stat(logPath(loc.logID)); err != nil {
				t.Fatalf("compaction removed the damaged log: %v", err)
			}
			if got, err := db.ReadEntry(1, 19); err != nil || !bytes.Equal(got, versioned(1, 19, 0)) {
				t.Fatalf("an intact entry after the failed compaction: %v", err)
			}
		})
	}
}

// TestOpenDetectsDamage: a damaged header, a missing or truncated log, or
// an index of another format make Open fail clearly.
func TestOpenDetectsDamage(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, f *corruptionFixture, loc location)
		want   []string
	}{
		{"header", func(t *testing.T, f *corruptionFixture, loc location) {
			flip(t, f.efs, logPath(loc.logID), 20)
		}, []string{"header checksum"}},
		{"missing", func(t *testing.T, f *corruptionFixture, loc location) {
			mustDo(t, f.efs.Remove(logPath(loc.logID)))
		}, []string{"missing"}},
		{"truncated", func(t *testing.T, f *corruptionFixture, loc location) {
			file, err := f.efs.OpenReadWrite(logPath(loc.logID))
			mustDo(t, err)
			mustDo(t, file.Truncate(loc.offset))
			mustDo(t, file.Close())
		}, []string{"bytes of records"}},
		{"index-format", func(t *testing.T, f *corruptionFixture, loc location) {
			x, err := openIndex("/d0/index", indexOptions{fs: f.ifs, cacheSize: 1 << 20, memTableSize: 1 << 20, log: testLogger()})
			mustDo(t, err)
			b := x.db.NewBatch()
			mustDo(t, b.Set([]byte(formatKey), []byte{9}, nil))
			mustDo(t, x.commit(b, true))
			mustDo(t, x.close())
		}, []string{"format"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newCorruptionFixture(t)
			loc := f.location(t, 3)
			tc.damage(t, f, loc)
			db, err := Open(f.efs, []string{"/d0"}, f.opts)
			if err == nil {
				db.Close()
				t.Fatal("Open accepted a damaged storage")
			}
			if !errors.Is(err, engine.ErrCorruption) {
				t.Fatalf("Open: %v, want corruption", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("Open: %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOpenRemovesUnusedLogs: a log no index entry uses (a crash left it
// behind, even with a torn header) is removed at Open, not reported.
func TestOpenRemovesUnusedLogs(t *testing.T) {
	f := newCorruptionFixture(t)
	junk := logPath(0x99)
	file, err := f.efs.Create(junk)
	mustDo(t, err)
	_, err = file.WriteAtSync([][]byte{[]byte("MGENT")}, 0)
	mustDo(t, err)
	mustDo(t, file.Close())
	db := f.open(t)
	defer db.Close()
	if _, err := f.efs.Stat(junk); !engine.IsNotExist(err) {
		t.Fatalf("unused log still there: %v", err)
	}
	if got, err := db.ReadEntry(1, 0); err != nil || !bytes.Equal(got, versioned(1, 0, 0)) {
		t.Fatalf("read after cleanup: %v", err)
	}
	// A new log must not reuse the id of one that was there.
	db.shards[0].writeMu.Lock()
	cur := db.shards[0].logs.currentID()
	db.shards[0].writeMu.Unlock()
	if cur <= 0x99 {
		t.Fatalf("current log %#x reuses an id at or below one seen on disk", cur)
	}
}
