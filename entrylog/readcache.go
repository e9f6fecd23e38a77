package entrylog

import (
	"sync"
	"sync/atomic"
)

// readCacheOverhead is what one cached entry costs beyond its payload (map
// slot, slice header), so a cache of tiny entries stays bounded too.
const readCacheOverhead = 64

// readCache holds entries read from the entry logs (the one asked for and
// those read ahead with it). It is two generations of at most half the
// size each: inserts go to the current one; when it is full the previous
// one is dropped whole and the current one takes its place. A hit in the
// previous generation moves the entry to the current one, so what is read
// stays and what is not ages out, at the cost of one map operation.
//
// Cached payloads are never written to after insertion: they are shared
// with the callers that read them.
//
// Lock rules: mu guards everything but the counters; nothing blocks under
// it. epoch changes whenever entries may have been replaced (every flush);
// a reader that looked the index up before the change must not insert what
// it read (it may be the old version of a replaced entry).
type readCache struct {
	half int64

	hits, misses atomic.Int64

	mu struct {
		sync.Mutex
		cur, prev           map[entryKeyID][]byte
		curBytes, prevBytes int64
		epoch               uint64
	}
}

func newReadCache(size int64) *readCache {
	c := &readCache{half: size / 2}
	c.mu.cur = make(map[entryKeyID][]byte)
	c.mu.prev = make(map[entryKeyID][]byte)
	return c
}

func cost(p []byte) int64 { return int64(len(p)) + readCacheOverhead }

// get returns a cached entry.
func (c *readCache) get(k entryKeyID) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.mu.cur[k]; ok {
		c.hits.Add(1)
		return p, true
	}
	p, ok := c.mu.prev[k]
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	delete(c.mu.prev, k)
	c.mu.prevBytes -= cost(p)
	c.insertLocked(k, p)
	return p, true
}

// epoch returns the current epoch, to pass to put.
func (c *readCache) epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.epoch
}

// put caches entries read after the index lookup of epoch; it drops them if
// the epoch has moved on since.
func (c *readCache) put(epoch uint64, keys []entryKeyID, payloads [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.mu.epoch {
		return
	}
	for i, k := range keys {
		c.insertLocked(k, payloads[i])
	}
}

func (c *readCache) insertLocked(k entryKeyID, p []byte) {
	n := cost(p)
	if n > c.half {
		return
	}
	if old, ok := c.mu.cur[k]; ok {
		c.mu.curBytes -= cost(old)
	} else if old, ok := c.mu.prev[k]; ok {
		delete(c.mu.prev, k)
		c.mu.prevBytes -= cost(old)
	}
	if c.mu.curBytes+n > c.half {
		c.mu.prev, c.mu.prevBytes = c.mu.cur, c.mu.curBytes
		c.mu.cur, c.mu.curBytes = make(map[entryKeyID][]byte), 0
	}
	c.mu.cur[k] = p
	c.mu.curBytes += n
}

// invalidate drops entries that a flush may just have replaced, and moves
// the epoch so reads racing with the flush do not cache old versions.
func (c *readCache) invalidate(keys []entryKeyID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.epoch++
	if len(c.mu.cur)+len(c.mu.prev) == 0 {
		return
	}
	for _, k := range keys {
		if p, ok := c.mu.cur[k]; ok {
			delete(c.mu.cur, k)
			c.mu.curBytes -= cost(p)
		}
		if p, ok := c.mu.prev[k]; ok {
			delete(c.mu.prev, k)
			c.mu.prevBytes -= cost(p)
		}
	}
}

// size returns the bytes the cache accounts for.
func (c *readCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.curBytes + c.mu.prevBytes
}
