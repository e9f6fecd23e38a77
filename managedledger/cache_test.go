package managedledger

import (
	"testing"
	"time"
)

// Over its size the cache evicts its oldest entries down to the
// watermark, in one step, and keeps the newest.
func TestEntryCacheEvictsToWatermark(t *testing.T) {
	c := newEntryCache(1000, time.Hour, 0.5)
	for i := range 10 {
		c.put(cacheKey{1, Position{1, int64(i)}}, make([]byte, 100))
	}
	if size, _, _ := c.stats(); size != 1000 {
		t.Fatalf("size %d at the limit; want 1000 (nothing evicted yet)", size)
	}
	c.put(cacheKey{1, Position{1, 10}}, make([]byte, 100))
	size, _, _ := c.stats()
	if size > 500 {
		t.Fatalf("size %d after passing the limit; want at most the watermark, 500", size)
	}
	if _, ok := c.get(cacheKey{1, Position{1, 10}}); !ok {
		t.Fatal("the newest entry was evicted")
	}
	if _, ok := c.get(cacheKey{1, Position{1, 0}}); ok {
		t.Fatal("the oldest entry survived")
	}
	// Below the limit again, adds evict nothing.
	c.put(cacheKey{1, Position{1, 11}}, make([]byte, 100))
	if after, _, _ := c.stats(); after != size+100 {
		t.Fatalf("size %d after one more add below the limit; want %d", after, size+100)
	}
}
