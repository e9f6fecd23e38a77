package managedledger

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestReadAheadFillsTheCacheBehindABacklogRead: a cursor reading a
// backlog that is not cached (a fresh factory after a reopen) starts a
// read-ahead; the entries after what it read reach the cache without
// being asked for, and reading on returns every entry once, in order.
func TestReadAheadFillsTheCacheBehindABacklogRead(t *testing.T) {
	e := newBKEnv(t)
	ctx := context.Background()
	f := e.factory(t, Config{MaxEntriesPerLedger: 40, MinLedgerRolloverTime: 1})
	ml, err := f.Open(ctx, "t/ns/persistent/ra")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ml.OpenCursor(ctx, "c", CursorOptions{Initial: Earliest}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 150 {
		want = append(want, fmt.Sprintf("m%03d", i))
		addWait(t, ml, want[i])
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f2 := e.factory(t, Config{MaxEntriesPerLedger: 40, MinLedgerRolloverTime: 1})
	ml2, err := f2.Open(ctx, "t/ns/persistent/ra")
	if err != nil {
		t.Fatal(err)
	}
	defer ml2.Close(ctx)
	c, err := ml2.OpenCursor(ctx, "c", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.ReadEntries(ctx, 10, 1<<20)
	if err != nil || len(first) != 10 {
		t.Fatalf("first read: %d entries, %v", len(first), err)
	}
	bk := ml2.(*bkLedger)
	next := Position{first[9].Position.LedgerID, first[9].Position.EntryID + 1}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := f2.cache.peek(cacheKey{bk.id, next}); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entry %v not read ahead into the cache", next)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := []string{}
	for _, e := range first {
		got = append(got, string(e.Data))
	}
	got = append(got, readAll(t, c)...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// TestReadAheadWindowAdapts: the window halves when the last window's
// entries were evicted before the reader reached them (a slow reader),
// and doubles when the reader got half way through it quickly.
func TestReadAheadWindowAdapts(t *testing.T) {
	e := newBKEnv(t)
	ctx := context.Background()
	f := e.factory(t, Config{MaxEntriesPerLedger: 1000, MinLedgerRolloverTime: 1})
	m, err := f.Open(ctx, "t/ns/persistent/ra-window")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if _, err := m.OpenCursor(ctx, "c", CursorOptions{Initial: Earliest}); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		addWait(t, m, fmt.Sprintf("entry-%03d", i))
	}
	ml := m.(*bkLedger)
	f.cache = newEntryCache(64<<20, time.Hour, 0.9) // empty: as if evicted
	plan := func(next int64) (int64, int64, bool) {
		ml.mu.Lock()
		defer ml.mu.Unlock()
		ml.readAhead.mu.Lock()
		defer ml.readAhead.mu.Unlock()
		return ml.planReadAheadLocked(next)
	}
	ra := &ml.readAhead
	ra.from, ra.to, ra.window, ra.started = 0, 100, 8<<20, time.Now()
	if from, _, ok := plan(10); !ok || from != 10 || ra.window != 4<<20 {
		t.Fatalf("evicted window: plan from %d ok %v, window %d; want a read from the reader's position with the window halved", from, ok, ra.window)
	}
	ml.mu.Lock()
	for i := int64(0); i < 100; i++ {
		f.cache.put(cacheKey{ml.id, ml.positionLocked(i)}, []byte("x"))
	}
	ml.mu.Unlock()
	ra.from, ra.to, ra.started = 0, 100, time.Now()
	if _, _, ok := plan(20); ok {
		t.Fatal("a read-ahead planned while the reader is in the first half of a cached window")
	}
	if from, _, ok := plan(60); !ok || from != 100 || ra.window != 8<<20 {
		t.Fatalf("half way through quickly: plan from %d ok %v, window %d; want the next window, twice as large", from, ok, ra.window)
	}
}

// TestAddsCachedOnlyWithCursors: an added entry goes to the cache only
// while the managed ledger has a cursor (durable, or a reader's) that may
// read it, as Pulsar caches adds only with active cursors. A topic
// written with no subscription (a coordinator's log, a topic nobody reads
// yet) would otherwise fill the cache with entries nobody asks for,
// pushing out those that tailing readers of other topics need.
func TestAddsCachedOnlyWithCursors(t *testing.T) {
	e := newBKEnv(t)
	ctx := context.Background()
	f := e.factory(t, Config{})
	ml, err := f.Open(ctx, "t/ns/persistent/cache-no-cursor")
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close(ctx)
	bk := ml.(*bkLedger)
	cached := func(p Position) bool { _, ok := f.cache.peek(cacheKey{bk.id, p}); return ok }
	if p := addWait(t, ml, "nobody reads"); cached(p) {
		t.Fatalf("entry %v added with no cursor is in the cache", p)
	}
	r, err := ml.NewNonDurableCursor(ml.LastConfirmed())
	if err != nil {
		t.Fatal(err)
	}
	if p := addWait(t, ml, "a reader tails"); !cached(p) {
		t.Fatalf("entry %v added with a reader open is not in the cache", p)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if p := addWait(t, ml, "reader gone"); cached(p) {
		t.Fatalf("entry %v added after the reader closed is in the cache", p)
	}
	if _, err := ml.OpenCursor(ctx, "sub", CursorOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := addWait(t, ml, "a subscription"); !cached(p) {
		t.Fatalf("entry %v added with a durable cursor is not in the cache", p)
	}
}
