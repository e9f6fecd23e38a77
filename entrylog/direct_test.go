package entrylog

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// On a real file system, entry logs written with direct I/O (the default)
// hold every entry after flushes, a rotation and a compaction, read back
// the same before and after a reopen; each log written ends on a block
// (flushes are padded), and the logs' descriptors really are O_DIRECT. The
// same run with BufferedWrites reads back the same; and both again with
// every add kept (AddEntryKept: the write cache holds the caller's bytes,
// not a copy).
func TestDirectWritesOnDisk(t *testing.T) {
	for _, mode := range []struct{ buffered, kept bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		buffered := mode.buffered
		name := "direct"
		if buffered {
			name = "buffered"
		}
		if mode.kept {
			name += "-kept"
		}
		t.Run(name, func(t *testing.T) {
			efs, err := engine.New(engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer efs.Close()
			dir := t.TempDir()
			opts := Options{LogSizeLimit: 256 << 10, WriteCacheMaxSize: 1 << 20, FlushInterval: -1, GCWaitTime: -1,
				BufferedWrites: buffered}
			db := openTest(t, efs, vfs.Default, []string{dir}, opts)
			rng := rand.New(rand.NewPCG(11, 12))
			want := map[[2]int64][]byte{}
			for e := int64(0); e < 600; e++ {
				data := randomBytes(rng, 1+rng.IntN(3000))
				if mode.kept {
					mustDo(t, db.AddEntryKept(1+e%4, e, data, crc32c.Known{}))
				} else {
					mustDo(t, db.AddEntry(1+e%4, e, data))
				}
				want[[2]int64{1 + e%4, e}] = data
				if e%97 == 96 {
					mustDo(t, db.Flush())
					checkDirectFDs(t, dir, !buffered)
				}
			}
			mustDo(t, db.Flush())
			mustDo(t, db.DeleteLedger(4)) // leaves logs to compact
			for k := range want {
				if k[0] == 4 {
					delete(want, k)
				}
			}
			mustDo(t, db.Compact(context.Background(), 0.9))
			readAllEntries(t, db, want)
			if !buffered {
				checkBlockEnds(t, dir)
			}
			mustDo(t, db.Close())
			db = openTest(t, efs, vfs.Default, []string{dir}, opts)
			defer db.Close()
			readAllEntries(t, db, want)
		})
	}
}

func readAllEntries(t *testing.T, db *DB, want map[[2]int64][]byte) {
	t.Helper()
	for k, data := range want {
		got, err := db.ReadEntry(k[0], k[1])
		if err != nil {
			t.Fatalf("read %d:%d: %v", k[0], k[1], err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("entry %d:%d reads back differently", k[0], k[1])
		}
	}
}

// checkBlockEnds requires every entry log's size to be a multiple of a
// block: sealed logs are truncated at their padded end.
func checkBlockEnds(t *testing.T, dir string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.elog"))
	if err != nil || len(names) < 2 {
		t.Fatalf("want several entry logs in %s, got %v (%v)", dir, names, err)
	}
	for _, n := range names[:len(names)-1] { // the current log is preallocated
		st, err := os.Stat(n)
		mustDo(t, err)
		if st.Size()%engine.DirectAlign != 0 {
			t.Errorf("sealed log %s is %d bytes: not block-padded", n, st.Size())
		}
	}
}

// checkDirectFDs requires this process to hold an O_DIRECT descriptor on an
// entry log in dir exactly when want.
func checkDirectFDs(t *testing.T, dir string, want bool) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	mustDo(t, err)
	found := false
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil || !strings.HasPrefix(target, dir) || !strings.HasSuffix(target, ".elog") {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + fd.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if f, ok := strings.CutPrefix(line, "flags:"); ok && octalHas(strings.TrimSpace(f), 0o40000) {
				found = true
			}
		}
	}
	if found != want {
		t.Fatalf("an O_DIRECT descriptor on an entry log: %v, want %v", found, want)
	}
}

func octalHas(s string, bit int64) bool {
	var v int64
	for _, c := range s {
		v = v*8 + int64(c-'0')
	}
	return v&bit != 0
}
