package managedledger

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestReadEntriesOrWaitAnswersCachedReadsInline: a read whose entries are
// all in the cache is answered on the caller's goroutine, before
// ReadEntriesOrWait returns, as the in-memory ledger answers; a tailing
// reader is then served on the adding goroutine, with no goroutine of its
// own per entry (TUNING.md, "Wake-ups per entry"). The fetch hook blocks
// any read that goes through the bookie path until the check is done, so
// a read handed to a goroutine cannot be mistaken for an inline one. A
// read that misses the cache (a reopened ledger, an empty cache) still
// completes, through the bookie.
func TestReadEntriesOrWaitAnswersCachedReadsInline(t *testing.T) {
	ctx := context.Background()
	env := newBKEnv(t)
	f := env.factory(t, Config{})
	const name = "public/default/persistent/inline-read"
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	addWait(t, ml, "a")
	addWait(t, ml, "b")
	release := make(chan struct{})
	ml.(*bkLedger).testHookBeforeFetch = func() { <-release }
	got := make(chan []Entry, 1)
	_, hits0, misses0 := f.cache.stats()
	readOrWaitInto(t, c, got)
	select {
	case es := <-got:
		if s := entryStrings(es); !slices.Equal(s, []string{"a", "b"}) {
			t.Fatalf("cached read got %v, want [a b]", s)
		}
		if _, hits, misses := f.cache.stats(); hits-hits0 != 2 || misses != misses0 {
			t.Fatalf("cache counted %d hits and %d misses for a read of 2 cached entries", hits-hits0, misses-misses0)
		}
	default:
		close(release)
		t.Fatal("a read of cached entries was not answered before ReadEntriesOrWait returned")
	}
	if p := c.ReadPosition(); p.EntryID != 2 {
		t.Fatalf("read position after the inline read: %v, want entry 2", p)
	}

	// Caught up: the read waits, and the add that ends the wait answers it
	// from the cache (the bookie path is still held by the hook).
	readOrWaitInto(t, c, got)
	addWait(t, ml, "c")
	wantRead(t, got, []string{"c"}, "a tailing read woken by an add, answered from the cache", func() { close(release) })
	close(release)
	ml.(*bkLedger).testHookBeforeFetch = nil
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A fresh factory: nothing cached, so the read goes to the bookie.
	f2 := env.factory(t, Config{})
	ml2, err := f2.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer ml2.Close(ctx)
	c2, err := ml2.OpenCursor(ctx, "sub2", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	readOrWaitInto(t, c2, got)
	wantRead(t, got, []string{"a", "b", "c"}, "a read that missed the cache", nil)
}

// readOrWaitInto starts a ReadEntriesOrWait of up to 10 entries that
// sends what it read to got (an error fails the test).
func readOrWaitInto(t *testing.T, c Cursor, got chan<- []Entry) {
	c.ReadEntriesOrWait(10, 1<<20, func(es []Entry, err error) {
		if err != nil {
			t.Error(err)
		}
		got <- es
	})
}

// wantRead waits up to 10 s for a read's entries on got and checks them;
// onTimeout, when set, runs before the test fails (to release a hook).
func wantRead(t *testing.T, got <-chan []Entry, want []string, what string, onTimeout func()) {
	t.Helper()
	select {
	case es := <-got:
		if s := entryStrings(es); !slices.Equal(s, want) {
			t.Fatalf("%s got %v, want %v", what, s, want)
		}
	case <-time.After(10 * time.Second):
		if onTimeout != nil {
			onTimeout()
		}
		t.Fatalf("%s never completed", what)
	}
}

func entryStrings(es []Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, string(e.Data))
	}
	return out
}

// TestInlineReadThatFallsBackCountsEachHitOnce: a read whose first entry
// is cached and second is not goes to the bookie path; the cache counts
// the first entry's hit once, there, not also for the inline probe that
// found it before giving up.
func TestInlineReadThatFallsBackCountsEachHitOnce(t *testing.T) {
	ctx := context.Background()
	env := newBKEnv(t)
	f := env.factory(t, Config{})
	ml, err := f.Open(ctx, "public/default/persistent/inline-fallback")
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close(ctx)
	c, err := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	addWait(t, ml, "a")
	second := addWait(t, ml, "b")
	dropCached(f.cache, cacheKey{ml.(*bkLedger).id, second})
	_, hits0, misses0 := f.cache.stats()
	got := make(chan []Entry, 1)
	readOrWaitInto(t, c, got)
	wantRead(t, got, []string{"a", "b"}, "a read that missed the cache", nil)
	if _, hits, misses := f.cache.stats(); hits-hits0 != 1 || misses-misses0 != 1 {
		t.Fatalf("cache counted %d hits and %d misses, want 1 and 1", hits-hits0, misses-misses0)
	}
}

// dropCached removes one entry from the cache, as an eviction would.
func dropCached(c *entryCache, k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if it := c.entries[k]; it != nil {
		it.gone = true
		delete(c.entries, k)
		c.size -= int64(len(it.data))
	}
}
