package managedledger

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// maxProbes is the most entries a binary search over n entries reads.
func maxProbes(n int) int { return bits.Len(uint(n)) }

// atLeast matches entries whose data (a number) is at least t, counting
// the entries it is given.
func atLeast(t int, reads *int) func(Entry) (bool, error) {
	return func(e Entry) (bool, error) {
		*reads++
		v, err := strconv.Atoi(string(e.Data))
		return v >= t, err
	}
}

// findImpls opens an empty managed ledger of each implementation with
// per entries per ledger, and reports the ledger-backed one's cache
// lookups (-1 for memory, which has no cache).
func findImpls(t *testing.T, per int64) map[string]func(t *testing.T) (ManagedLedger, func() int64) {
	return map[string]func(t *testing.T) (ManagedLedger, func() int64){
		"memory": func(t *testing.T) (ManagedLedger, func() int64) {
			ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: per}).Open(context.Background(), "public/default/persistent/find")
			ml.SetRetention(keepAll)
			return ml, func() int64 { return -1 }
		},
		"bookie":          func(t *testing.T) (ManagedLedger, func() int64) { return openBKFind(t, per, 0) },
		"bookie-uncached": func(t *testing.T) (ManagedLedger, func() int64) { return openBKFind(t, per, 1) },
	}
}

// keepAll is infinite retention: these tests read streams that have no
// subscription, whose closed ledgers would otherwise be trimmed.
var keepAll = Retention{Time: -1, Size: -1}

// openBKFind opens a ledger-backed managed ledger (cacheSize 1 caches
// nothing: every read goes to the ledgers).
func openBKFind(t *testing.T, per, cacheSize int64) (ManagedLedger, func() int64) {
	f := newBKEnv(t).factory(t, Config{MaxEntriesPerLedger: per, MinLedgerRolloverTime: time.Nanosecond, CacheSize: cacheSize})
	ml, err := f.Open(context.Background(), "public/default/persistent/find")
	if err != nil {
		t.Fatal(err)
	}
	ml.SetRetention(keepAll)
	t.Cleanup(func() { ml.Close(context.Background()) })
	return ml, func() int64 { _, h, m := f.CacheStats(); return h + m }
}

// TestFindFirst on both implementations: entries "0".."n-1", three per
// ledger, searched for the first at least t; every search reads at most
// log2(n)+1 entries (a linear scan reads up to n), through the cache.
func TestFindFirst(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		n     int // entries
		t     int // threshold
		found int // index of the entry found, -1 for none
	}{
		{"empty stream", 0, 0, -1},
		{"first entry", 10, 0, 0},
		{"below the first", 10, -5, 0},
		{"last entry", 10, 9, 9},
		{"across ledgers", 30, 17, 17},
		{"ledger boundary", 30, 21, 21},
		{"none, right after a rollover", 9, 9, -1},
		{"none, mid-ledger", 10, 100, -1},
		{"last of many", 100, 99, 99},
	}
	for kind, open := range findImpls(t, 3) {
		t.Run(kind, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					ml, lookups := open(t)
					var pos []Position
					for i := range tc.n {
						pos = append(pos, addWait(t, ml, strconv.Itoa(i)))
					}
					reads := 0
					before := lookups()
					got, found, err := ml.FindFirst(ctx, atLeast(tc.t, &reads))
					if err != nil {
						t.Fatal(err)
					}
					if reads > maxProbes(tc.n) {
						t.Fatalf("read %d entries of %d, a binary search reads at most %d", reads, tc.n, maxProbes(tc.n))
					}
					if l := lookups() - before; before >= 0 && l != int64(reads) {
						t.Fatalf("%d cache lookups for %d reads: not the normal read path", l, reads)
					}
					if tc.found >= 0 {
						if !found || got != pos[tc.found] {
							t.Fatalf("found %v at %v, want entry %d at %v", found, got, tc.found, pos[tc.found])
						}
						return
					}
					last := ml.LastConfirmed()
					if found || got != (Position{last.LedgerID, last.EntryID + 1}) {
						t.Fatalf("none matching: found %v at %v, want the position after %v", found, got, last)
					}
					checkResetReadsNext(t, ml, got)
				})
			}
		})
	}
}

// checkResetReadsNext: a cursor reset to p reads the next entry added.
func checkResetReadsNext(t *testing.T, ml ManagedLedger, p Position) {
	t.Helper()
	ctx := context.Background()
	c, err := ml.OpenCursor(ctx, "reset", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Reset(ctx, p); err != nil {
		t.Fatal(err)
	}
	if b := c.Backlog(); b != 0 {
		t.Fatalf("reset to %v leaves a backlog of %d", p, b)
	}
	addWait(t, ml, "next")
	if got := fmt.Sprint(readAll(t, c)); got != "[next]" {
		t.Fatalf("after a reset to %v the cursor reads %v", p, got)
	}
}

func TestFindFirstErrors(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	for kind, open := range findImpls(t, 3) {
		t.Run(kind, func(t *testing.T) {
			ml, _ := open(t)
			for i := range 5 {
				addWait(t, ml, strconv.Itoa(i))
			}
			if _, _, err := ml.FindFirst(ctx, func(Entry) (bool, error) { return false, boom }); !errors.Is(err, boom) {
				t.Fatalf("match error: %v", err)
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, _, err := ml.FindFirst(cctx, func(Entry) (bool, error) { return true, nil }); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled: %v", err)
			}
			if err := ml.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if _, _, err := ml.FindFirst(ctx, func(Entry) (bool, error) { return true, nil }); !errors.Is(err, ErrClosed) {
				t.Fatalf("closed: %v", err)
			}
		})
	}
}

// TestFindFirstTrimmedDuringSearch: entries trimmed while the search
// runs (match runs unlocked: here it acknowledges them) count as before
// the match, and the first stored entry is found.
func TestFindFirstTrimmedDuringSearch(t *testing.T) {
	ctx := context.Background()
	ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: 2}).Open(ctx, "t")
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	var pos []Position
	for i := range 20 {
		pos = append(pos, addWait(t, ml, strconv.Itoa(i)))
	}
	reads := 0
	match := atLeast(3, &reads)
	got, found, err := ml.FindFirst(ctx, func(e Entry) (bool, error) {
		if reads == 0 {
			if err := c.MarkDelete(ctx, pos[9]); err != nil { // trims entries 0..9
				return false, err
			}
		}
		return match(e)
	})
	if err != nil || !found || got != pos[10] {
		t.Fatalf("found %v at %v (err %v), want the first stored entry %v", found, got, err, pos[10])
	}
}

// TestFindFirstModel: on streams of random length and ledger size, some
// ledgers trimmed, FindFirst agrees with a linear scan and reads at most
// log2(n)+1 entries.
func TestFindFirstModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		per := rapid.Int64Range(1, 10).Draw(rt, "perLedger")
		ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: per}).Open(ctx, "t")
		c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
		n := rapid.IntRange(0, 300).Draw(rt, "n")
		var pos []Position
		for i := range n {
			pos = append(pos, addWait(rt, ml, strconv.Itoa(i)))
		}
		first := 0
		if n > 0 {
			k := rapid.IntRange(-1, n-1).Draw(rt, "markDelete")
			if k >= 0 {
				c.MarkDelete(ctx, pos[k])
			}
			first = n - int(ml.Entries()) // trimmed whole ledgers
		}
		threshold := rapid.IntRange(-1, n+1).Draw(rt, "t")
		reads := 0
		got, found, err := ml.FindFirst(ctx, atLeast(threshold, &reads))
		if err != nil {
			rt.Fatal(err)
		}
		if reads > maxProbes(n-first) {
			rt.Fatalf("read %d of %d stored entries", reads, n-first)
		}
		want := max(threshold, first)
		switch {
		case want < n && (!found || got != pos[want]):
			rt.Fatalf("found %v at %v, want %v", found, got, pos[want])
		case want >= n && (found || got != afterLast(ml.LastConfirmed())):
			rt.Fatalf("none matching: found %v at %v, last %v", found, got, ml.LastConfirmed())
		}
	})
}

// TestBKFindFirstAfterTrim: with every stored entry consumed and trimmed
// (only the empty current ledger is left), nothing matches and the
// position returned reads the next entry added.
func TestBKFindFirstAfterTrim(t *testing.T) {
	ctx := context.Background()
	f := newBKEnv(t).factory(t, Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond})
	ml, err := f.Open(ctx, "public/default/persistent/find-trimmed")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	var last Position
	for i := range 4 {
		last = addWait(t, ml, strconv.Itoa(i))
	}
	if err := c.MarkDelete(ctx, last); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ml.Entries() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("consumed ledgers not trimmed: %d entries", ml.Entries())
		}
	}
	reads := 0
	got, found, err := ml.FindFirst(ctx, atLeast(0, &reads))
	if err != nil || found || reads != 0 || got != afterLast(last) {
		t.Fatalf("found %v at %v after %d reads (err %v), want none at %v", found, got, reads, err, afterLast(last))
	}
	checkResetReadsNext(t, ml, got)
}
