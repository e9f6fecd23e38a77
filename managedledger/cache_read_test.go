package managedledger

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestCacheDropsWhatEveryCursorRead: an entry leaves the entry cache once
// every cursor has read it, not before.
func TestCacheDropsWhatEveryCursorRead(t *testing.T) {
	e := newBKEnv(t)
	ctx := context.Background()
	f := e.factory(t, Config{MaxEntriesPerLedger: 8, MinLedgerRolloverTime: 1})
	f.cache = newEntryCache(64<<20, time.Hour, 0.9) // only the read rule drops anything
	m, err := f.Open(ctx, "t/ns/persistent/cache-read")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	a, err := m.OpenCursor(ctx, "a", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.OpenCursor(ctx, "b", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var pos []Position
	for i := range 20 {
		pos = append(pos, addWait(t, m, fmt.Sprintf("m%02d", i)))
	}
	ml := m.(*bkLedger)
	cachedFrom := func(what string, want int) {
		t.Helper()
		for i, p := range pos {
			_, ok := f.cache.peek(cacheKey{ml.id, p})
			if ok != (i >= want) {
				t.Fatalf("%s: entry %d (%v) cached %v; want entries from %d cached", what, i, p, ok, want)
			}
		}
	}
	read := func(c Cursor, n int) {
		t.Helper()
		got, err := c.ReadEntries(ctx, n, 1<<20)
		if err != nil || len(got) != n {
			t.Fatalf("read %d: %d entries, %v", n, len(got), err)
		}
	}
	cachedFrom("after the adds", 0)
	read(a, 10)
	cachedFrom("a read 10, b nothing", 0)
	read(b, 5)
	cachedFrom("a read 10, b 5", 5)
	read(b, 15)
	cachedFrom("a read 10, b 20", 10)
	read(a, 10)
	cachedFrom("both read everything", 20)
}
