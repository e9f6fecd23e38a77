package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/engine"
)

// payloadFor is the deterministic content of (ledger, entry), so replay
// can check bytes without remembering them.
func payloadFor(ledger, entry int64, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(ledger), uint64(entry)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sizeFor picks an entry's size from its ids (so replay knows it too).
func sizeFor(ledger, entry int64, maxSize int) int {
	return int(rand.New(rand.NewPCG(uint64(ledger)+7, uint64(entry))).IntN(maxSize + 1))
}

type replayed struct {
	mu      sync.Mutex
	entries []Entry
}

func (r *replayed) add(e Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Payload = bytes.Clone(e.Payload)
	r.entries = append(r.entries, e)
	return nil
}

func openT(t *testing.T, fs engine.FS, opts Options) (*Journal, []Entry) {
	t.Helper()
	var r replayed
	j, err := Open(fs, "/journal", opts, r.add)
	if err != nil {
		t.Fatal(err)
	}
	return j, r.entries
}

// addSync adds one entry and waits for its callback.
func addSync(t *testing.T, j *Journal, ledger, entry int64, payload []byte) (Mark, error) {
	t.Helper()
	done := make(chan struct{})
	var mark Mark
	var err error
	if aerr := j.Add(ledger, entry, payload, func(m Mark, e error) { mark, err = m, e; close(done) }); aerr != nil {
		return Mark{}, aerr
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("add never completed")
	}
	return mark, err
}

func modes() map[string]Options {
	return map[string]Options{
		"serial":            {},
		"pipeline":          {Pipeline: true},
		"skipsync":          {SkipSync: true, SyncInterval: 5 * time.Millisecond},
		"noreuse":           {NoFileReuse: true},
		"zerofill":          {ZeroFill: true, MaxFileSize: 1 << 20, ZeroFillRate: 1 << 30},
		"zerofill-pipeline": {ZeroFill: true, MaxFileSize: 1 << 20, ZeroFillRate: 1 << 30, Pipeline: true},
	}
}

func TestAddReplayRoundTrip(t *testing.T) {
	for name, opts := range modes() {
		t.Run(name, func(t *testing.T) {
			fs := engine.NewMem()
			opts.MaxFileSize = 64 << 10 // rotate often
			j, _ := openT(t, fs, opts)
			var wg sync.WaitGroup
			for w := int64(1); w <= 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for e := int64(0); e < 100; e++ {
						if _, err := addSync(t, j, w, e, payloadFor(w, e, sizeFor(w, e, 3000))); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, got := openT(t, fs, opts)
			checkComplete(t, got, 4, 100)
		})
	}
}

// checkComplete checks that ledgers 1..ledgers each replayed entries
// 0..n-1 in order with the right bytes.
func checkComplete(t *testing.T, got []Entry, ledgers, n int64) {
	t.Helper()
	next := map[int64]int64{}
	for _, e := range got {
		if e.EntryID != next[e.LedgerID] {
			t.Fatalf("ledger %d: entry %d replayed, expected %d", e.LedgerID, e.EntryID, next[e.LedgerID])
		}
		if !bytes.Equal(e.Payload, payloadFor(e.LedgerID, e.EntryID, sizeFor(e.LedgerID, e.EntryID, 3000))) {
			t.Fatalf("ledger %d entry %d: bytes differ", e.LedgerID, e.EntryID)
		}
		next[e.LedgerID]++
	}
	for l := int64(1); l <= ledgers; l++ {
		if next[l] != n {
			t.Fatalf("ledger %d: %d entries replayed, want %d", l, next[l], n)
		}
	}
}

func TestCheckpointRetiresAndRecycles(t *testing.T) {
	fs := engine.NewMem()
	opts := Options{MaxFileSize: 16 << 10, MaxRecycledFiles: 2}
	j, _ := openT(t, fs, opts)
	var last Mark
	for e := int64(0); e < 40; e++ {
		m, err := addSync(t, j, 1, e, make([]byte, 3000))
		if err != nil {
			t.Fatal(err)
		}
		last = m
	}
	if err := j.Checkpoint(last); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List("/journal")
	var journals, recycled int
	for _, n := range names {
		if _, ok := parseFileName(n); ok {
			journals++
		}
		if _, ok := parseRecycledName(n); ok {
			recycled++
		}
	}
	if journals != 1 || recycled != 2 {
		t.Fatalf("after checkpoint: %d journal files, %d recycled (%v)", journals, recycled, names)
	}
	// Recycled files are reused with their stale groups ignored.
	for e := int64(40); e < 80; e++ {
		if _, err := addSync(t, j, 1, e, make([]byte, 3000)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	_, got := openT(t, fs, opts)
	if len(got) != 40 || got[0].EntryID != 40 || got[39].EntryID != 79 {
		t.Fatalf("replay after checkpoint at entry 39: %d entries, first %d", len(got), got[0].EntryID)
	}
}

func TestReplayFromCheckpointMidFile(t *testing.T) {
	fs := engine.NewMem()
	j, _ := openT(t, fs, Options{})
	var mid Mark
	for e := int64(0); e < 10; e++ {
		m, err := addSync(t, j, 3, e, []byte(fmt.Sprint(e)))
		if err != nil {
			t.Fatal(err)
		}
		if e == 4 {
			mid = m
		}
	}
	if err := j.Checkpoint(mid); err != nil {
		t.Fatal(err)
	}
	j.Close()
	_, got := openT(t, fs, Options{})
	if len(got) != 5 || got[0].EntryID != 5 {
		t.Fatalf("replay from mid-file checkpoint: %d entries, first %+v", len(got), got)
	}
}

func TestAddErrors(t *testing.T) {
	j, _ := openT(t, engine.NewMem(), Options{})
	if err := j.Add(1, 1, make([]byte, MaxEntrySize+1), func(Mark, error) {}); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("oversized entry: %v", err)
	}
	j.Close()
	if err := j.Add(1, 1, nil, func(Mark, error) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("add after close: %v", err)
	}
}

// TestLoneAddDoesNotWaitTheWindow: under no load an add is written at once,
// not after journalMaxGroupWaitMSec.
func TestLoneAddDoesNotWaitTheWindow(t *testing.T) {
	j, _ := openT(t, engine.NewMem(), Options{MaxGroupWait: 500 * time.Millisecond})
	defer j.Close()
	for i := int64(0); i < 5; i++ {
		start := time.Now()
		if _, err := addSync(t, j, 1, i, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 250*time.Millisecond {
			t.Fatalf("lone add took %s with a 500 ms window", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCallbacksInAddOrder(t *testing.T) {
	for name, opts := range modes() {
		t.Run(name, func(t *testing.T) {
			j, _ := openT(t, engine.NewMem(), opts)
			var mu sync.Mutex
			var order []int64
			var wg sync.WaitGroup
			for e := int64(0); e < 2000; e++ {
				wg.Add(1)
				err := j.Add(1, e, []byte("p"), func(m Mark, err error) {
					mu.Lock()
					order = append(order, e)
					mu.Unlock()
					wg.Done()
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			j.Close()
			for i, e := range order {
				if int64(i) != e {
					t.Fatalf("callback %d was for entry %d", i, e)
				}
			}
		})
	}
}

func TestSetSpreadsLedgersAndReplaysAll(t *testing.T) {
	fs := engine.NewMem()
	dirs := []string{"/disk1/journal", "/disk2/journal", "/disk3/journal"}
	s, err := OpenSet(fs, dirs, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for l := int64(1); l <= 6; l++ {
		for e := int64(0); e < 20; e++ {
			wg.Add(1)
			if err := s.Add(l, e, payloadFor(l, e, sizeFor(l, e, 3000)), func(_ Mark, err error) {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	for i, d := range dirs {
		if names, _ := fs.List(d); len(names) == 0 {
			t.Errorf("journal %d (%s) got nothing", i, d)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var r replayed
	s, err = OpenSet(fs, dirs, Options{}, r.add)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkComplete(t, r.entries, 6, 20)
	if err := s.Checkpoint(s.LastMarks()[:2]); err == nil {
		t.Fatal("checkpoint with too few marks accepted")
	}
}
