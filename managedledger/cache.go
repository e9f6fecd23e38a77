package managedledger

import (
	"sync"
	"time"
)

// entryCache holds recently added entries for every managed ledger of a
// factory (managedLedgerCacheSizeMB), so tailing cursors read them from
// memory. Entries are the slices the producers' frames were copied into
// once; the cache and the readers share them (nothing mutates entry
// bytes), so a hit copies nothing. Eviction is oldest first, when the
// cache is over its size or an entry is older than the time threshold.
//
// Lock rules: mu guards everything; it is a leaf lock.
type entryCache struct {
	max     int64
	low     int64 // evicting goes down to this (the watermark)
	maxAge  time.Duration
	mu      sync.Mutex
	entries map[cacheKey]*cacheItem
	order   []*cacheItem // insertion order; evicted items are nil-ed out lazily
	head    int
	size    int64
	hits    int64
	misses  int64
}

type cacheKey struct {
	ml  uint64
	pos Position
}

type cacheItem struct {
	key   cacheKey
	data  []byte
	added time.Time
	gone  bool
}

func newEntryCache(max int64, maxAge time.Duration, watermark float64) *entryCache {
	return &entryCache{max: max, low: int64(float64(max) * watermark), maxAge: maxAge, entries: map[cacheKey]*cacheItem{}}
}

func (c *entryCache) put(k cacheKey, data []byte) {
	if int64(len(data)) > c.max/4 {
		return // one huge entry would flush everything else
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[k]; old != nil {
		old.gone = true
		c.size -= int64(len(old.data))
	}
	it := &cacheItem{key: k, data: data, added: now}
	c.entries[k] = it
	c.order = append(c.order, it)
	c.size += int64(len(data))
	c.evictLocked(now)
}

// drop removes managed ledger ml's entries at global indices [from, to),
// at(i) naming each (read by every cursor: cache_read.go), without a key
// list per call: a tailing reader calls it on every read. An item stays
// in order until eviction reaches it, without its data.
func (c *entryCache) drop(ml uint64, from, to int64, at func(int64) Position) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := from; i < to; i++ {
		k := cacheKey{ml, at(i)}
		it := c.entries[k]
		if it == nil {
			continue
		}
		delete(c.entries, k)
		it.gone = true
		c.size -= int64(len(it.data))
		it.data = nil
	}
}

// peek is get without counting a hit or a miss (the read-ahead's check).
func (c *entryCache) peek(k cacheKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it := c.entries[k]
	if it == nil {
		return nil, false
	}
	return it.data, true
}

// countHits counts n hits found by peek (a probe that counts only once
// it has all it looked for: a miss is then read, and counted, by get).
func (c *entryCache) countHits(n int) {
	c.mu.Lock()
	c.hits += int64(n)
	c.mu.Unlock()
}

func (c *entryCache) get(k cacheKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it := c.entries[k]
	if it == nil {
		c.misses++
		return nil, false
	}
	c.hits++
	return it.data, true
}

// evictLocked drops the oldest items that are too old and, once over
// size, the oldest down to the watermark.
func (c *entryCache) evictLocked(now time.Time) {
	limit := c.max
	if c.size > c.max {
		limit = c.low
	}
	for c.head < len(c.order) {
		it := c.order[c.head]
		if !it.gone && c.size <= limit && now.Sub(it.added) < c.maxAge {
			break
		}
		if !it.gone {
			delete(c.entries, it.key)
			c.size -= int64(len(it.data))
		}
		c.order[c.head] = nil
		c.head++
	}
	if c.head > 1024 && c.head > len(c.order)/2 {
		c.order = append([]*cacheItem(nil), c.order[c.head:]...)
		c.head = 0
	}
}

// stats returns the cache's size and hit counts.
func (c *entryCache) stats() (size, hits, misses int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked(time.Now())
	return c.size, c.hits, c.misses
}
