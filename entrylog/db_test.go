package entrylog

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

func openTest(t *testing.T, efs engine.FS, ifs vfs.FS, dirs []string, opts Options) *DB {
	t.Helper()
	opts.IndexFS = ifs
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	db, err := Open(efs, dirs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestWriteCacheThrottle: with both halves full, an add waits for the
// flush of the other half, at most maxWait, then fails with
// ErrWriteCacheFull; memory never passes the bound, kept payloads
// (AddEntryKept) counted like copies.
func TestWriteCacheThrottle(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "copied", true: "kept"}[keep], func(t *testing.T) { testWriteCacheThrottle(t, keep) })
	}
}

func keptBytes(keep bool, data []byte) int {
	if keep {
		return len(data)
	}
	return 0
}

func testWriteCacheThrottle(t *testing.T, keep bool) {
	c := newWriteCache(16<<10, 50*time.Millisecond)
	data := make([]byte, 1000)
	e := int64(0)
	for c.pending() == nil { // fill the first half until it is swapped out
		if _, err := c.put(1, e, data, crc32c.Known{}, keep); err != nil {
			t.Fatal(err)
		}
		e++
	}
	for {
		c.mu.Lock()
		full := c.mu.active.alloc+c.mu.active.cost(RecordHeaderSize+len(data), keptBytes(keep, data)) > c.half
		c.mu.Unlock()
		if full {
			break
		}
		if _, err := c.put(1, e, data, crc32c.Known{}, keep); err != nil {
			t.Fatal(err)
		}
		e++
	}
	c.mu.Lock()
	if c.mu.active.alloc > c.half || c.mu.flushing.alloc > c.half {
		t.Fatalf("halves hold %d and %d bytes, bound %d", c.mu.active.alloc, c.mu.flushing.alloc, c.half)
	}
	c.mu.Unlock()
	start := time.Now()
	waited, err := c.put(1, e, data, crc32c.Known{}, keep)
	if !errors.Is(err, ErrWriteCacheFull) || !waited || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("add to a full cache: waited=%v after %v: %v", waited, time.Since(start), err)
	}
	// Now one that waits long enough for the test to free a half however
	// slow the machine is (set before the put starts: no race).
	c.maxWait = time.Minute
	done := make(chan error, 1)
	go func() { _, err := c.put(1, e, data, crc32c.Known{}, keep); done <- err }()
	for c.waiting.Load() == 0 { // the put waits for room (for at most 50 ms)
		time.Sleep(time.Millisecond)
	}
	c.flushed(c.pending())
	if err := <-done; err != nil {
		t.Fatalf("add after the flush freed a half: %v", err)
	}
	if got, ok := c.get(1, e); !ok || !bytes.Equal(got, data) {
		t.Fatal("entry added after the wait not readable")
	}
	if _, err := c.put(1, 0, make([]byte, 9<<10), crc32c.Known{}, keep); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("entry larger than a half: %v", err)
	}
	stopped := errors.New("stopped")
	c.stop(stopped)
	if _, err := c.put(1, e+1, data, crc32c.Known{}, keep); !errors.Is(err, stopped) {
		t.Fatalf("add after stop: %v", err)
	}
}

// TestReadCacheBounded: the read cache stays within its size, keeps the
// recent entries, and refuses inserts from a read older than a flush.
func TestReadCacheBounded(t *testing.T) {
	c := newReadCache(64 << 10)
	p := make([]byte, 1000)
	for e := int64(0); e < 1000; e++ {
		c.put(c.epoch(), []entryKeyID{{1, e}}, [][]byte{p})
		if c.size() > 64<<10 {
			t.Fatalf("cache holds %d bytes, bound %d", c.size(), 64<<10)
		}
	}
	if _, ok := c.get(entryKeyID{1, 999}); !ok {
		t.Fatal("the latest entry was evicted")
	}
	if _, ok := c.get(entryKeyID{1, 0}); ok {
		t.Fatal("the oldest entry is still cached")
	}
	old := c.epoch()
	c.invalidate([]entryKeyID{{1, 999}})
	if _, ok := c.get(entryKeyID{1, 999}); ok {
		t.Fatal("an invalidated entry is still cached")
	}
	c.put(old, []entryKeyID{{1, 999}}, [][]byte{[]byte("stale")})
	if _, ok := c.get(entryKeyID{1, 999}); ok {
		t.Fatal("a read older than the flush inserted its entry")
	}
	if h, m := c.hits.Load(), c.misses.Load(); h == 0 || m == 0 {
		t.Fatalf("hits %d misses %d", h, m)
	}
}

// TestLogSizeLimit: no entry log passes LogSizeLimit, except one holding a
// single entry larger than the limit.
func TestLogSizeLimit(t *testing.T) {
	efs := engine.NewMem()
	const limit = 16 << 10
	db := openTest(t, efs, vfs.NewMem(), []string{"/d0"}, Options{LogSizeLimit: limit, WriteCacheMaxSize: 1 << 20,
		FlushInterval: -1, GCWaitTime: -1})
	defer db.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	var ops []op
	for e := int64(0); e < 300; e++ {
		data := randomBytes(rng, 700)
		if e == 150 {
			data = randomBytes(rng, 40<<10)
		}
		mustDo(t, db.AddEntry(e%3, e, data))
		ops = append(ops, op{kind: opAdd, ledger: e % 3, entry: e, data: data})
		if e%50 == 49 {
			mustDo(t, db.Flush())
		}
	}
	mustDo(t, db.Flush())
	names, err := efs.List("/d0")
	mustDo(t, err)
	logs, big := 0, 0
	for _, n := range names {
		if _, ok := parseLogFileName(n); !ok {
			continue
		}
		logs++
		st, err := efs.Stat("/d0/" + n)
		mustDo(t, err)
		switch {
		case st.Size == alignBlock(LogHeaderSize+RecordHeaderSize+40<<10): // padded to a block: direct writes
			big++
		case st.Size > limit:
			t.Fatalf("%s is %d bytes, limit %d", n, st.Size, limit)
		}
	}
	if logs < 10 || big != 1 {
		t.Fatalf("%d logs, %d holding the large entry alone", logs, big)
	}
	if err := checkModel(db, newModel(ops)); err != nil {
		t.Fatal(err)
	}
}

// TestDeletedLedgerStaysDeleted: after a deletion, across restarts, adds
// and master keys for the ledger (journal replay) are ignored.
func TestDeletedLedgerStaysDeleted(t *testing.T) {
	efs, ifs := engine.NewMem(), vfs.NewMem()
	opts := Options{FlushInterval: -1, GCWaitTime: -1}
	db := openTest(t, efs, ifs, []string{"/d0", "/d1"}, opts)
	for e := int64(0); e < 10; e++ {
		mustDo(t, db.AddEntry(4, e, []byte("x")))
	}
	mustDo(t, db.SetMasterKey(4, []byte("k")))
	mustDo(t, db.Flush())
	mustDo(t, db.DeleteLedger(4))
	for restart := 0; restart < 2; restart++ {
		mustDo(t, db.AddEntry(4, 3, []byte("replayed")))
		mustDo(t, db.SetMasterKey(4, []byte("k")))
		mustDo(t, db.Flush())
		if ok, err := db.LedgerExists(4); ok || err != nil {
			t.Fatalf("restart %d: deleted ledger exists=%v %v", restart, ok, err)
		}
		if _, err := db.ReadEntry(4, 3); !errors.Is(err, ErrNoLedger) {
			t.Fatalf("restart %d: read of a deleted ledger: %v", restart, err)
		}
		mustDo(t, db.Close())
		db = openTest(t, efs, ifs, []string{"/d0", "/d1"}, opts)
	}
	defer db.Close()
	if err := checkIndex(db, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDirectoryRouting: a ledger's state and entries live in directory
// id mod len(dirs), nowhere else.
func TestDirectoryRouting(t *testing.T) {
	db := openTest(t, engine.NewMem(), vfs.NewMem(), []string{"/a", "/b", "/c"}, Options{FlushInterval: -1, GCWaitTime: -1})
	defer db.Close()
	for l := int64(0); l < 9; l++ {
		mustDo(t, db.AddEntry(l, 0, []byte{byte(l)}))
	}
	mustDo(t, db.Flush())
	for i, s := range db.shards {
		for l := int64(0); l < 9; l++ {
			home := int(l%3) == i
			s.indexMu.Lock()
			inLogs := false
			for _, u := range s.logUsage {
				_, ok := u[l]
				inLogs = inLogs || ok
			}
			s.indexMu.Unlock()
			if s.hasLedger(l) != home || inLogs != home {
				t.Fatalf("ledger %d in directory %d: state %v, entries %v", l, i, s.hasLedger(l), inLogs)
			}
		}
	}
}

type countingCheckpointer struct{ started, completed atomic.Int64 }

func (c *countingCheckpointer) StartCheckpoint() Checkpoint { return c.started.Add(1) }
func (c *countingCheckpointer) CompleteCheckpoint(Checkpoint) error {
	c.completed.Add(1)
	return nil
}

// TestBackgroundFlushes: without any Flush call, the periodic flush
// completes checkpoints, and a full half is flushed on its own.
func TestBackgroundFlushes(t *testing.T) {
	cp := &countingCheckpointer{}
	db := openTest(t, engine.NewMem(), vfs.NewMem(), []string{"/d0"}, Options{FlushInterval: 10 * time.Millisecond,
		GCWaitTime: -1, Checkpointer: cp})
	mustDo(t, db.AddEntry(1, 0, []byte("periodic")))
	waitFor(t, "a periodic checkpoint", func() bool { return cp.completed.Load() > 0 && db.Stats().WriteCacheBytes == 0 })
	mustDo(t, db.Close())

	db = openTest(t, engine.NewMem(), vfs.NewMem(), []string{"/d0"}, Options{FlushInterval: -1, GCWaitTime: -1,
		WriteCacheMaxSize: 64 << 10})
	defer db.Close()
	for e := int64(0); e < 100; e++ {
		mustDo(t, db.AddEntry(1, e, make([]byte, 1000)))
	}
	waitFor(t, "a flush of a full half", func() bool { return db.Stats().Flushes > 0 })
	for e := int64(0); e < 100; e++ {
		if _, err := db.ReadEntry(1, e); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestOpenRefuses: bad directory lists and options, and a directory
// already open.
func TestOpenRefuses(t *testing.T) {
	efs, ifs := engine.NewMem(), vfs.NewMem()
	for _, tc := range []struct {
		dirs []string
		opts Options
		want string
	}{
		{nil, Options{}, "no ledger directories"},
		{[]string{"/a", "/a/"}, Options{}, "given twice"},
		{[]string{"/a"}, Options{LogSizeLimit: 100}, "LogSizeLimit"},
	} {
		if _, err := Open(efs, tc.dirs, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("Open(%v): %v, want %q", tc.dirs, err, tc.want)
		}
	}
	db := openTest(t, efs, ifs, []string{"/a"}, Options{FlushInterval: -1, GCWaitTime: -1})
	defer db.Close()
	if _, err := Open(efs, []string{"/a"}, Options{IndexFS: ifs, Logger: testLogger()}); err == nil {
		t.Fatal("opened a directory that is already open")
	}
}

// TestReopen: everything (entries, state) survives Close and Open.
func TestReopen(t *testing.T) {
	efs, ifs := engine.NewMem(), vfs.NewMem()
	opts := Options{LogSizeLimit: 32 << 10, FlushInterval: -1, GCWaitTime: -1}
	db := openTest(t, efs, ifs, []string{"/d0", "/d1"}, opts)
	rng := rand.New(rand.NewPCG(7, 8))
	var ops []op
	for i := 0; i < 300; i++ {
		l, e := int64(rng.IntN(7)), int64(rng.IntN(60))
		switch rng.IntN(10) {
		case 0:
			k := randomBytes(rng, 8)
			mustDo(t, db.SetMasterKey(l, k))
			ops = append(ops, op{kind: opKey, ledger: l, data: k})
		case 1:
			if _, err := db.SetFenced(l); err == nil {
				ops = append(ops, op{kind: opFence, ledger: l})
			}
		default:
			data := randomBytes(rng, rng.IntN(2000))
			mustDo(t, db.AddEntry(l, e, data))
			ops = append(ops, op{kind: opAdd, ledger: l, entry: e, data: data})
		}
	}
	mustDo(t, db.Close())
	db = openTest(t, efs, ifs, []string{"/d0", "/d1"}, opts)
	defer db.Close()
	if err := checkModel(db, newModel(ops)); err != nil {
		t.Fatal(err)
	}
}

// TestStats: the counters move with the work.
func TestStats(t *testing.T) {
	db := openTest(t, engine.NewMem(), vfs.NewMem(), []string{"/d0", "/d1"}, Options{LogSizeLimit: 16 << 10,
		FlushInterval: -1, GCWaitTime: -1})
	defer db.Close()
	for e := int64(0); e < 50; e++ {
		mustDo(t, db.AddEntry(e%4, e, make([]byte, 1000)))
	}
	st := db.Stats()
	if st.Ledgers != 4 || st.WriteCacheBytes < 50*1000 || st.EntryLogs != 2 {
		t.Fatalf("before a flush: %+v", st)
	}
	mustDo(t, db.Flush())
	for e := int64(0); e < 50; e++ {
		_, err := db.ReadEntry(e%4, e)
		mustDo(t, err)
	}
	mustDo(t, db.DeleteLedger(0))
	st = db.Stats()
	if st.WriteCacheBytes != 0 || st.Flushes != 2 || st.FlushedEntries != 50 || st.EntryLogs < 4 ||
		st.EntryLogReads == 0 || st.ReadCacheHits == 0 || st.ReadCacheMisses == 0 || st.LedgersDeleted != 1 ||
		st.FlushTime <= 0 || st.Ledgers != 3 {
		t.Fatalf("after flush, reads and a deletion: %+v", st)
	}
}

// TestKeyOrder: index keys sort as (ledger, entry) do as int64s, negative
// ids and extremes included, so a ledger's entries are contiguous.
func TestKeyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	ids := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64}
	id := func() int64 {
		if rng.IntN(3) == 0 {
			return ids[rng.IntN(len(ids))]
		}
		return int64(rng.Uint64())
	}
	for i := 0; i < 10000; i++ {
		a, b := entryKeyID{id(), id()}, entryKeyID{id(), id()}
		got := bytes.Compare(entryKey(a.ledgerID, a.entryID), entryKey(b.ledgerID, b.entryID))
		if got != compareKeys(a, b) {
			t.Fatalf("keys of %v and %v compare %d", a, b, got)
		}
		l, e, ok := decodeEntryKey(entryKey(a.ledgerID, a.entryID))
		if !ok || l != a.ledgerID || e != a.entryID {
			t.Fatalf("entry key of %v decodes to %d/%d", a, l, e)
		}
		lower, upper := ledgerEntriesBounds(a.ledgerID)
		k := entryKey(a.ledgerID, a.entryID)
		if bytes.Compare(k, lower) < 0 || bytes.Compare(k, upper) >= 0 {
			t.Fatalf("key of %v outside its ledger's bounds", a)
		}
	}
}

// TestRecordRoundTrip: random records decode to what was encoded, and any
// single flipped bit is caught.
func TestRecordRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 2000; i++ {
		l, e, p := int64(rng.Uint64()), int64(rng.Uint64()), randomBytes(rng, rng.IntN(300))
		b := encodeRecord(l, e, p)
		rec, n, reason := decodeRecord(b)
		if reason != "" || n != len(b) || rec.ledgerID != l || rec.entryID != e || !bytes.Equal(rec.payload, p) {
			t.Fatalf("round trip of %d/%d: %v %d %q", l, e, rec, n, reason)
		}
		bit := rng.IntN(len(b) * 8)
		b[bit/8] ^= 1 << (bit % 8)
		if _, _, reason := decodeRecord(b); reason == "" {
			t.Fatalf("bit %d flipped in record %d/%d went unnoticed", bit, l, e)
		}
	}
}

// TestFlushRacesSwaps: writers keep swapping halves of a small write
// cache while Flush runs in a loop; every Flush must still cover what was
// added before it, and nothing may be lost.
func TestFlushRacesSwaps(t *testing.T) {
	efs, ifs := engine.NewMem(), vfs.NewMem()
	db := openTest(t, efs, ifs, []string{"/d0"}, Options{WriteCacheMaxSize: 8 << 10, FlushInterval: -1, GCWaitTime: -1})
	stop := make(chan struct{})
	flushed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				flushed <- nil
				return
			default:
			}
			if err := db.Flush(); err != nil {
				flushed <- err
				return
			}
		}
	}()
	errs := make(chan error, 4)
	for w := int64(0); w < 4; w++ {
		go func() {
			for e := int64(0); e < 300; e++ {
				if err := db.AddEntry(w, e, versioned(w, e, 0)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		mustDo(t, <-errs)
	}
	close(stop)
	mustDo(t, <-flushed)
	// A Flush that starts after the adds returned leaves nothing in the
	// write cache, and a restart (which empties it) loses nothing.
	mustDo(t, db.Flush())
	if n := db.Stats().WriteCacheBytes; n != 0 {
		t.Fatalf("%d bytes still in the write cache after Flush", n)
	}
	var ops []op
	for w := int64(0); w < 4; w++ {
		for e := int64(0); e < 300; e++ {
			ops = append(ops, op{kind: opAdd, ledger: w, entry: e, data: versioned(w, e, 0)})
		}
	}
	mustDo(t, db.Close())
	db = openTest(t, efs, ifs, []string{"/d0"}, Options{FlushInterval: -1, GCWaitTime: -1})
	defer db.Close()
	if err := checkModel(db, newModel(ops)); err != nil {
		t.Fatal(err)
	}
}

// TestBackgroundGC: with short intervals, the GC goroutine removes a log
// whose ledgers are all deleted and compacts one that is mostly garbage
// (minor compaction), with no GC or Compact call.
func TestBackgroundGC(t *testing.T) {
	db := openTest(t, engine.NewMem(), vfs.NewMem(), []string{"/d0"}, Options{LogSizeLimit: 64 << 10,
		FlushInterval: -1, GCWaitTime: 5 * time.Millisecond, MinorCompactionInterval: 5 * time.Millisecond,
		MajorCompactionInterval: time.Hour})
	defer db.Close()
	// Log A: only ledger 1. Log B: ledger 2 (10%) and ledger 3 (90%).
	for e := int64(0); e < 60; e++ {
		mustDo(t, db.AddEntry(1, e, make([]byte, 1000)))
	}
	mustDo(t, db.Flush())
	for e := int64(0); e < 60; e++ {
		l, size := int64(3), 1000
		if e%10 == 0 {
			l, size = 2, 900
		}
		mustDo(t, db.AddEntry(l, e, make([]byte, size)))
	}
	mustDo(t, db.Flush())
	for e := int64(0); e < 70; e++ { // seal both
		mustDo(t, db.AddEntry(4, e, make([]byte, 1000)))
	}
	mustDo(t, db.Flush())
	mustDo(t, db.DeleteLedger(1))
	mustDo(t, db.DeleteLedger(3))
	waitFor(t, "background removal and compaction", func() bool {
		st := db.Stats()
		return st.Compactions > 0 && st.EntryLogsRemoved >= 2
	})
	for e := int64(0); e < 60; e += 10 {
		if got, err := db.ReadEntry(2, e); err != nil || len(got) != 900 {
			t.Fatalf("entry of the compacted ledger: %d bytes, %v", len(got), err)
		}
	}
}

// TestWriteCacheReusesSegments: once a half is flushed its full-size
// segments serve the next halves, so a steady stream of adds allocates no
// new arena memory (fresh memory costs its zeroing and a page fault per
// page, as much CPU as the copy on the durable path); and an entry read
// before its segment is reused keeps its bytes.
func TestWriteCacheReusesSegments(t *testing.T) {
	c := newWriteCache(1<<20, time.Second)
	data := bytes.Repeat([]byte{0xA5}, 1000)
	e := int64(0)
	// cycle adds until a half is swapped out, then flushes it.
	cycle := func() {
		for c.pending() == nil {
			if _, err := c.put(1, e, data, crc32c.Known{}, false); err != nil {
				t.Fatal(err)
			}
			e++
		}
		c.flushed(c.pending())
	}
	cycle()
	cycle() // both halves have been through once: spares are in place
	held, ok := c.get(1, e-1)
	if !ok {
		t.Fatal("the last entry added is not readable")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		cycle()
	}
	runtime.ReadMemStats(&after)
	// 20 halves of 512 KiB went through: new arenas would be 10 MiB; the
	// halves' entry maps take about 2.5 MiB.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 5<<20 {
		t.Fatalf("20 halves of adds allocated %d KiB; the segments of flushed halves are not reused", grew>>10)
	}
	if !bytes.Equal(held, data) {
		t.Fatal("an entry read from the write cache changed when its segment was reused")
	}
}

// The log that was current when the storage stopped gives its preallocated
// tail back at the next start, as a sealed log does: it used to keep it
// until GC removed the log, which for a ledger kept long is never, so every
// restart of a bookie cost a preallocation step of disk (the fault suite's
// bk4, restarted by many scenarios, filled its disk with them: 596 MiB
// allocated for 28 MiB of entry logs).
func TestReopenReleasesTheLastLogsPreallocation(t *testing.T) {
	efs, ifs := engine.NewMem(), vfs.NewMem()
	const step = 8 << 20
	opts := Options{PreallocSize: step, FlushInterval: -1, GCWaitTime: -1}
	used := func() int64 {
		free, err := efs.FreeSpace("/d0")
		if err != nil {
			t.Fatal(err)
		}
		return int64(1<<40) - int64(free)
	}
	data := bytes.Repeat([]byte{3}, 1000)
	for restart := 0; restart < 4; restart++ {
		db := openTest(t, efs, ifs, []string{"/d0"}, opts)
		for e := int64(0); e < 20; e++ {
			mustDo(t, db.AddEntry(int64(restart+1), e, data))
		}
		mustDo(t, db.Flush())
		mustDo(t, db.Close())
	}
	db := openTest(t, efs, ifs, []string{"/d0"}, opts)
	defer db.Close()
	// The entries (80 KB and headers) and one step for the new current log;
	// the old code held a step for every restart (4 more).
	if u := used(); u > step+2<<20 {
		t.Fatalf("%d MiB allocated after 4 restarts, want at most one preallocation step (%d MiB) and the data", u>>20, step>>20)
	}
	for r := int64(1); r <= 4; r++ {
		if got, err := db.ReadEntry(r, 19); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ledger %d entry 19 after the restarts: %v", r, err)
		}
	}
}

// TestWriteCacheReusesFlushedHalves: the half a flush released takes the
// next adds, emptied, with the maps and kept list it grew (at 10,000
// ledgers a new half's grew again at every flush: a tenth of the bytes the
// durable path allocated). Nothing of the adds it flushed is left in it.
func TestWriteCacheReusesFlushedHalves(t *testing.T) {
	c := newWriteCache(1<<20, time.Second)
	data := make([]byte, 100)
	ledger := int64(0)
	cycle := func() {
		for c.pending() == nil { // an add per ledger, as from 10,000 topics; kept, as the bookie's
			if _, err := c.put(ledger, 0, data, crc32c.Known{}, true); err != nil {
				t.Fatal(err)
			}
			ledger++
		}
		c.flushed(c.pending())
	}
	cycle()
	cycle()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		cycle()
	}
	runtime.ReadMemStats(&after)
	perHalf := (after.TotalAlloc - before.TotalAlloc) / 20
	t.Logf("%d KiB allocated per half of %d adds", perHalf>>10, ledger/22)
	if perHalf > 256<<10 { // 1,400 KiB when each half was new; the header arena's first segments stay
		t.Fatalf("a half of adds allocated %d KiB: flushed halves' maps are not reused", perHalf>>10)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.mu.active
	if int64(len(a.entries)) != a.bytes/int64(RecordHeaderSize+len(data)) || len(a.kept) != len(a.entries) ||
		len(a.last) != len(a.entries) {
		t.Fatalf("the active half holds %d entries, %d kept payloads, %d ledgers and %d bytes: a flushed half's adds are left in it",
			len(a.entries), len(a.kept), len(a.last), a.bytes)
	}
	for k := range a.entries {
		if k.ledgerID < ledger-int64(len(a.entries)) {
			t.Fatalf("the active half holds ledger %d, flushed before the last %d adds", k.ledgerID, len(a.entries))
		}
	}
}
