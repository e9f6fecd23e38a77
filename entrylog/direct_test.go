package entrylog

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
	"github.com/magnetar-io/magnetar/internal/crc32c"
	"golang.org/x/sys/unix"
)

// On a real file system, entry logs written with direct I/O (the default)
// hold every entry after flushes, a rotation and a compaction, read back
// the same before and after a reopen, without a page of them in the page
// cache (compaction and reads go direct too; buffered, they are cached); each log written ends on a block
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
			dropLogPages(t, dir)
			mustDo(t, db.Compact(context.Background(), 0.9))
			readAllEntries(t, db, want)
			if cached := cachedLogPages(t, dir); buffered != (cached > 0) {
				t.Fatalf("%d pages of the entry logs in the page cache after compaction and reads; buffered %v", cached, buffered)
			}
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

// A file system whose direct reads are refused (ErrDirectUnsupported) is
// read through the page cache from the refusal on: the refused read and
// every later one return the entries, and no direct read is tried again.
func TestDirectReadsFallBackWhereUnsupported(t *testing.T) {
	var armed, refused, reads atomic.Int64
	efs := errorfs.Wrap(engine.NewMem(), errorfs.InjectorFunc(func(o errorfs.Op, path string, _ int64) (errorfs.Fault, bool) {
		if o != errorfs.OpRead || !strings.HasSuffix(path, ".elog") || armed.Load() == 0 {
			return errorfs.Fault{}, false
		}
		if reads.Add(1) == 1 {
			refused.Add(1)
			return errorfs.Fault{Err: engine.ErrDirectUnsupported}, true
		}
		return errorfs.Fault{}, false
	}))
	mustDo(t, efs.MkdirAll("/l", 0o755))
	db := openTest(t, efs, vfs.NewMem(), []string{"/l"}, Options{FlushInterval: -1, GCWaitTime: -1, ReadAheadBatchSize: 1})
	defer db.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[[2]int64][]byte{}
	for e := int64(0); e < 20; e++ {
		want[[2]int64{1, e}] = randomBytes(rng, 1+rng.IntN(5000))
		mustDo(t, db.AddEntry(1, e, want[[2]int64{1, e}]))
	}
	mustDo(t, db.Flush())
	if !db.shards[0].logs.directReads.Load() {
		t.Fatal("direct reads off before any was refused")
	}
	armed.Store(1)
	readAllEntries(t, db, want)
	if refused.Load() != 1 || db.shards[0].logs.directReads.Load() {
		t.Fatalf("refused %d direct reads, direct reads still on: %v", refused.Load(), db.shards[0].logs.directReads.Load())
	}
	// One read per entry (the read-ahead is one entry) and the refused one.
	if got := reads.Load(); got != int64(len(want))+1 {
		t.Fatalf("%d reads of the logs for %d entries, want one each and the refused one", got, len(want))
	}
}

// logFiles lists dir's entry logs.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.elog"))
	mustDo(t, err)
	if len(paths) == 0 {
		t.Fatalf("no entry logs in %s", dir)
	}
	return paths
}

// dropLogPages evicts dir's entry logs from the page cache.
func dropLogPages(t *testing.T, dir string) {
	t.Helper()
	for _, p := range logFiles(t, dir) {
		f, err := os.Open(p)
		mustDo(t, err)
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		mustDo(t, err)
	}
}

// cachedLogPages counts the pages of dir's entry logs in the page cache
// (mincore over a read-only mapping, which itself reads nothing).
func cachedLogPages(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, p := range logFiles(t, dir) {
		f, err := os.Open(p)
		mustDo(t, err)
		st, err := f.Stat()
		mustDo(t, err)
		if st.Size() == 0 {
			f.Close()
			continue
		}
		m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		mustDo(t, err)
		vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
		unix.Munmap(m)
		if errno != 0 {
			t.Fatalf("mincore %s: %v", p, errno)
		}
		for _, v := range vec {
			n += int(v & 1)
		}
	}
	return n
}
