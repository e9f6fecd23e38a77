package journal

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/engine"
)

// writeLog records every write to journal files with when it started and
// ended (one sequence for all files), whether it was all zeros (a fill:
// no group is, its header has a magic number) and which file it went to,
// by id: a spare keeps its id through its renames until the writer reuses
// it, under the id of the handle it opened.
type writeLog struct {
	mu        sync.Mutex
	seq       int64
	writes    []loggedWrite
	delay     time.Duration // each group write is held this long (a device's write and sync)
	zeroDelay time.Duration // each fill write is held this long
}

type loggedWrite struct {
	file       uint64
	off, end   int64
	zero       bool
	start, fin int64
}

type loggingFS struct {
	engine.FS
	log *writeLog
}

func (l loggingFS) Create(name string) (engine.File, error) {
	f, err := l.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &loggingFile{File: f, log: l.log, id: fileIDOf(name)}, nil
}

func (l loggingFS) OpenReadWrite(name string) (engine.File, error) {
	f, err := l.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &loggingFile{File: f, log: l.log, id: fileIDOf(name)}, nil
}

func fileIDOf(path string) uint64 {
	n := filepath.Base(path)
	if id, ok := parseFileName(n); ok {
		return id
	}
	if id, ok := parseRecycledName(n); ok {
		return id
	}
	var id uint64
	fmt.Sscanf(n, "spare-%016x.journal", &id)
	return id
}

type loggingFile struct {
	engine.File
	log *writeLog
	id  uint64
}

func (f *loggingFile) WriteAt(bufs [][]byte, off int64) (int, error) {
	return f.logged(bufs, off, func() (int, error) { return f.File.WriteAt(bufs, off) })
}

func (f *loggingFile) WriteAtSync(bufs [][]byte, off int64) (int, error) {
	return f.logged(bufs, off, func() (int, error) { return f.File.WriteAtSync(bufs, off) })
}

func (f *loggingFile) logged(bufs [][]byte, off int64, write func() (int, error)) (int, error) {
	zero, n := true, int64(0)
	for _, b := range bufs {
		zero = zero && !bytes.ContainsFunc(b, func(r rune) bool { return r != 0 })
		n += int64(len(b))
	}
	l := f.log
	l.mu.Lock()
	l.seq++
	w := loggedWrite{file: f.id, off: off, end: off + n, zero: zero, start: l.seq}
	l.mu.Unlock()
	if zero {
		time.Sleep(l.zeroDelay)
	} else {
		time.Sleep(l.delay)
	}
	written, err := write()
	l.mu.Lock()
	l.seq++
	w.fin = l.seq
	l.writes = append(l.writes, w)
	l.mu.Unlock()
	return written, err
}

// TestSpareFilesAreWrittenBeforeGroups: with ZeroFill, every file after
// the first (made at Open, before the filler starts) should be a spare
// whose zeros were all written before the writer's first group there, and
// the groups should land on those zeros. With slow fills the writer often
// finds the pool empty, so only the order is checked there: a spare must
// never be reused while it is being filled. Everything replays.
func TestSpareFilesAreWrittenBeforeGroups(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      Options
		zeroDelay time.Duration
		coverage  bool // most group bytes after the first file on a spare's zeros
	}{
		{"serial", Options{MaxFileSize: 256 << 10}, 0, true},
		{"pipeline", Options{MaxFileSize: 256 << 10, Pipeline: true}, 0, true},
		{"slow-fills", Options{MaxFileSize: 512 << 10}, 2 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.ZeroFill, opts.ZeroFillRate, opts.PreallocSize = true, 1<<30, 64<<10
			mem := engine.NewMem()
			wl := &writeLog{delay: 200 * time.Microsecond, zeroDelay: c.zeroDelay}
			j, _ := openT(t, loggingFS{FS: mem, log: wl}, opts)
			const writers, perWriter = 4, 400
			var wg sync.WaitGroup
			for w := int64(1); w <= writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					addMany(t, j, w, perWriter, 3000)
				}()
			}
			wg.Wait()
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			checkSpares(t, wl.writes, c.coverage)
			j2, entries := openT(t, mem, Options{})
			defer j2.Close()
			if len(entries) != writers*perWriter {
				t.Fatalf("replayed %d entries, added %d", len(entries), writers*perWriter)
			}
			for _, e := range entries {
				if !bytes.Equal(e.Payload, payloadFor(e.LedgerID, e.EntryID, sizeFor(e.LedgerID, e.EntryID, 3000))) {
					t.Fatalf("entry %d/%d: wrong bytes after replay", e.LedgerID, e.EntryID)
				}
			}
		})
	}
}

// addMany adds n entries of ledger with up to 16 in flight and waits for
// every answer.
func addMany(t *testing.T, j *Journal, ledger int64, n, maxSize int) {
	window := make(chan struct{}, 16)
	var failed sync.Once
	for e := int64(0); e < int64(n); e++ {
		window <- struct{}{}
		err := j.Add(ledger, e, payloadFor(ledger, e, sizeFor(ledger, e, maxSize)), func(_ Mark, err error) {
			if err != nil {
				failed.Do(func() { t.Errorf("add %d/%d: %v", ledger, e, err) })
			}
			<-window
		})
		if err != nil {
			t.Errorf("add %d/%d: %v", ledger, e, err)
			return
		}
	}
	for range cap(window) {
		window <- struct{}{}
	}
}

func checkSpares(t *testing.T, writes []loggedWrite, coverage bool) {
	t.Helper()
	fills := map[uint64][]loggedWrite{}
	for _, w := range writes {
		if w.zero {
			fills[w.file] = append(fills[w.file], w)
		}
	}
	var groupBytes, onFilled int64
	files := map[uint64]bool{}
	for _, g := range writes {
		if g.zero || g.file == 1 || g.off == 0 { // the first file; a reused file's new header
			continue
		}
		files[g.file] = true
		groupBytes += g.end - g.off
		for _, z := range fills[g.file] {
			if z.fin > g.start {
				t.Fatalf("file %d: a fill [%d, %d) (writes #%d-#%d) had not ended when the group write [%d, %d) began (#%d)",
					g.file, z.off, z.end, z.start, z.fin, g.off, g.end, g.start)
			}
			if z.end > g.off && g.end > z.off {
				onFilled += min(z.end, g.end) - max(z.off, g.off)
			}
		}
	}
	t.Logf("%d files after the first, %.0f%% of their group bytes on filled space", len(files),
		100*float64(onFilled)/float64(max(groupBytes, 1)))
	if len(files) < 2 {
		t.Fatalf("the writer used %d files after the first; the test wants rotations", len(files))
	}
	if onFilled == 0 {
		t.Fatal("no group landed on a spare's zeros")
	}
	if coverage && onFilled*2 < groupBytes {
		t.Fatalf("only %d of %d group bytes after the first file landed on a spare's zeros", onFilled, groupBytes)
	}
}

// TestUnfinishedSpareIsRemovedAtOpen: a spare that was being filled when
// the process stopped is not a journal file and is not kept.
func TestUnfinishedSpareIsRemovedAtOpen(t *testing.T) {
	mem := engine.NewMem()
	if err := mem.MkdirAll("/journal", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := mem.Create("/journal/" + spareName(0xff))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([][]byte{make([]byte, 4096)}, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	j, _ := openT(t, mem, Options{})
	defer j.Close()
	names, err := mem.List("/journal")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if isSpareName(n) {
			t.Fatalf("%s is still there after Open: %v", n, names)
		}
	}
}

// TestCloseStopsASpareFill: a slow fill does not hold Close up, and its
// file is removed.
func TestCloseStopsASpareFill(t *testing.T) {
	mem := engine.NewMem()
	j, _ := openT(t, mem, Options{ZeroFill: true, ZeroFillRate: 1 << 20, MaxFileSize: 64 << 20})
	if _, err := addSync(t, j, 1, 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the fill is under way
	start := time.Now()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with a spare being filled", d)
	}
	names, err := mem.List("/journal")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(names, " "), "spare-") {
		t.Fatalf("a stopped spare was left: %v", names)
	}
}
