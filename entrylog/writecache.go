package entrylog

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// ErrWriteCacheFull: AddEntry waited MaxThrottleTime for the write cache to
// drain and it did not. The entry was not added; the storage is not failed.
var ErrWriteCacheFull = errors.New("entrylog: write cache full")

// ErrEntryTooLarge: an entry cannot fit in half of a directory's write
// cache (or exceeds MaxEntrySize).
var ErrEntryTooLarge = errors.New("entrylog: entry too large")

type entryKeyID struct{ ledgerID, entryID int64 }

func compareKeys(a, b entryKeyID) int {
	if c := cmp.Compare(a.ledgerID, b.ledgerID); c != 0 {
		return c
	}
	return cmp.Compare(a.entryID, b.entryID)
}

// span is a record inside a wbuf: its header (and, unless kept, its
// payload) in the arena.
type span struct {
	seg, off, n int32 // n: record bytes, header included
	kept        int32 // 1 + the payload's index in wbuf.kept; 0: payload in the arena
}

// wbuf is one half of the write cache: records, encoded as they will lie in
// the entry log, copied into an arena of segments. Full-size segments come
// from, and go back to, the cache's spare list once the half is flushed:
// fresh memory costs an allocation, its zeroing and a page fault per page
// on first touch, and on the durable path that was as much CPU as the copy
// itself. So nothing may keep a view into a segment past the flush: reads
// get a copy (writeCache.get). The flushed half itself, emptied, takes the
// adds after the next swap with the maps it grew (recycle), so nothing may
// keep the half past its flush either.
//
// A kept add (AddEntryKept) puts only its header in the arena and keeps
// the caller's payload itself: the bookie's adds are never changed after
// they are made, and on the durable path the arena copy was a tenth of
// the server's CPU, on top of the direct write's copy into its aligned
// buffer. A kept payload counts against the half like arena bytes.
type wbuf struct {
	segSize int
	spare   *segments // the cache's; used under writeCache.mu
	segs    [][]byte
	kept    [][]byte // payloads of kept adds
	entries map[entryKeyID]span
	last    map[int64]int64 // highest entry id per ledger
	bytes   int64           // record bytes, replaced ones included
	alloc   int64           // arena bytes allocated, plus kept payloads
}

func newWbuf(segSize int, spare *segments) *wbuf {
	return &wbuf{segSize: segSize, spare: spare, entries: make(map[entryKeyID]span), last: make(map[int64]int64)}
}

// segments is a bounded list of full-size arena segments ready for reuse.
type segments struct {
	free [][]byte
	max  int
}

// take returns a spare segment of at least n bytes' capacity, or nil.
func (p *segments) take(n int) []byte {
	if p == nil || len(p.free) == 0 || cap(p.free[len(p.free)-1]) < n {
		return nil
	}
	seg := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return seg[:0]
}

// give keeps b's full-size segments for reuse, up to the bound.
func (p *segments) give(b *wbuf) {
	for _, seg := range b.segs {
		if p == nil || len(p.free) >= p.max {
			break
		}
		if cap(seg) == b.segSize {
			p.free = append(p.free, seg[:0])
		}
	}
	b.segs = nil
}

// reuseMaxEntries bounds the entries a flushed half may have held and
// still be reused with its maps as they grew: a burst of small adds must
// not keep maps of millions of slots for good.
const reuseMaxEntries = 64 << 10

// recycle empties a flushed half (its segments already given back) for
// use as the next active one, and reports whether it is worth reusing.
// Its maps keep their slots: at 10,000 ledgers a new half's maps and kept
// list grew again to the same size at every flush, a tenth of the bytes
// the durable path allocated (TUNING.md).
func (b *wbuf) recycle() bool {
	if len(b.entries) > reuseMaxEntries {
		return false
	}
	clear(b.kept) // the payloads are the callers' again
	b.kept = b.kept[:0]
	clear(b.entries)
	clear(b.last)
	b.bytes, b.alloc = 0, 0
	return true
}

func (b *wbuf) empty() bool { return len(b.entries) == 0 }

// firstSegment is the size of a half's first arena segment; each next one
// doubles, up to segSize, so a directory that sees a trickle of adds
// between periodic flushes does not allocate a full segment each time.
const firstSegment = 32 << 10

// needs returns the arena bytes adding an n-byte record would allocate.
func (b *wbuf) needs(n int) int64 {
	next := min(firstSegment, b.segSize)
	if len(b.segs) > 0 {
		s := b.segs[len(b.segs)-1]
		if cap(s)-len(s) >= n {
			return 0
		}
		next = min(2*cap(s), b.segSize)
	}
	if b.spare != nil && len(b.spare.free) > 0 {
		next = b.segSize // a spare segment costs nothing new
	}
	return int64(max(n, next))
}

// put copies a record into the arena; hdr is its encoded header. With
// keep, payload is kept as it is and only hdr is copied.
func (b *wbuf) put(k entryKeyID, hdr, payload []byte, keep bool) {
	n := len(hdr) + len(payload)
	inArena := n
	if keep {
		inArena = len(hdr)
	}
	if need := b.needs(inArena); need > 0 {
		seg := b.spare.take(int(need))
		if seg == nil {
			seg = make([]byte, 0, need)
		}
		b.segs = append(b.segs, seg)
		b.alloc += int64(cap(seg))
	}
	i := len(b.segs) - 1
	s := b.segs[i]
	off := len(s)
	s = append(s, hdr...)
	sp := span{seg: int32(i), off: int32(off), n: int32(n)}
	if keep {
		b.kept = append(b.kept, payload)
		b.alloc += int64(len(payload))
		sp.kept = int32(len(b.kept))
	} else {
		s = append(s, payload...)
	}
	b.segs[i] = s
	b.entries[k] = sp
	b.bytes += int64(n)
	if last, ok := b.last[k.ledgerID]; !ok || k.entryID > last {
		b.last[k.ledgerID] = k.entryID
	}
}

// cost is what adding an n-byte record (payload bytes of it kept, or 0)
// counts against the half.
func (b *wbuf) cost(n, kept int) int64 { return b.needs(n-kept) + int64(kept) }

// record returns the encoded record of sp: its header, and its payload
// when kept (else head holds the whole record). head's capacity runs on
// into the segment, so the flush can tell records adjacent in memory and
// write them as one buffer; it is never appended to.
func (b *wbuf) record(sp span) (head, kept []byte) {
	if sp.kept == 0 {
		return b.segs[sp.seg][sp.off : sp.off+sp.n], nil
	}
	return b.segs[sp.seg][sp.off : sp.off+RecordHeaderSize], b.kept[sp.kept-1]
}

// payload returns a view of an entry's payload, capped so appending to it
// cannot touch the arena; valid only until the half is released.
func (b *wbuf) payload(k entryKeyID) ([]byte, bool) {
	sp, ok := b.entries[k]
	if !ok {
		return nil, false
	}
	if sp.kept != 0 {
		p := b.kept[sp.kept-1]
		return p[:len(p):len(p)], true
	}
	end := sp.off + sp.n
	return b.segs[sp.seg][sp.off+RecordHeaderSize : end : end], true
}

// sorted returns the keys in (ledger, entry) order, so a ledger's entries
// land next to each other in the entry log.
func (b *wbuf) sorted() []entryKeyID {
	keys := make([]entryKeyID, 0, len(b.entries))
	for k := range b.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

// writeCache is a directory's double-buffered write cache. AddEntry copies
// into the active half; once it would pass its size (half the cache) the
// halves swap and the full one is handed to the flusher, which writes it to
// the entry log in the background. When the other half is still being
// flushed, AddEntry waits, at most maxWait.
//
// Lock rules: mu guards both halves and the spare segments; nothing blocks
// under it (copies are bounded by the entry size). A half in flushing is
// read-only: only the flush that holds the shard's writeMu clears it,
// after its index commit, so a reader that misses both halves finds the
// entry in the index.
type writeCache struct {
	half    int64
	segSize int
	maxWait time.Duration
	kick    chan struct{} // cap 1: a swapped half waits for the flusher
	waiting atomic.Int32  // puts waiting for room
	closing atomic.Bool   // the storage is closing: its flushes hurry

	mu struct {
		sync.Mutex
		active   *wbuf
		flushing *wbuf
		released *wbuf         // a flushed half, emptied, for the next swap; or nil
		spare    segments      // full-size segments of released halves
		freed    chan struct{} // closed (and replaced) when flushing is cleared
		stopped  error         // set when the storage closes or fails: waiters give up
		// noSpace is set while the half in flushing could not be written
		// for lack of space: a put that would wait for it fails at once
		// with it instead of waiting MaxThrottleTime for nothing.
		noSpace error
	}
}

func newWriteCache(size int64, maxWait time.Duration) *writeCache {
	half := max(size/2, 1)
	seg := int(min(max(half/8, 4<<10), 1<<20, half))
	c := &writeCache{half: half, segSize: seg, maxWait: maxWait, kick: make(chan struct{}, 1)}
	// One half's worth of spare segments: the other half's are in use.
	c.mu.spare.max = int(half/int64(seg)) + 1
	c.mu.active = newWbuf(seg, &c.mu.spare)
	c.mu.freed = make(chan struct{})
	return c
}

// put adds an entry, waiting (bounded) while both halves are full. It
// reports whether it had to wait (for stats).
func (c *writeCache) put(ledgerID, entryID int64, data []byte, sum crc32c.Known, keep bool) (waited bool, err error) {
	n := RecordHeaderSize + len(data)
	if int64(n) > c.half || len(data) > MaxEntrySize {
		return false, fmt.Errorf("%w: %d bytes, a directory's write cache takes at most %d",
			ErrEntryTooLarge, len(data), min(c.half-RecordHeaderSize, MaxEntrySize))
	}
	var hdr [RecordHeaderSize]byte
	putRecordHeader(hdr[:], ledgerID, entryID, data, sum) // checksum outside the lock
	var deadline *time.Timer
	for {
		wait, err := c.tryPut(entryKeyID{ledgerID, entryID}, hdr[:], data, keep)
		if wait == nil || err != nil {
			return waited, err
		}
		if deadline == nil {
			deadline = time.NewTimer(c.maxWait)
			defer deadline.Stop()
			c.waiting.Add(1) // a paced flush hurries (pressed)
			defer c.waiting.Add(-1)
		}
		waited = true
		select {
		case <-wait:
		case <-deadline.C:
			return true, fmt.Errorf("%w: waited %v for the previous half to reach the entry log (disk too slow for the write rate?)",
				ErrWriteCacheFull, c.maxWait)
		}
	}
}

// tryPut adds the record, swapping halves if the active one is full; it
// returns a channel to wait on when both are full.
func (c *writeCache) tryPut(k entryKeyID, hdr, data []byte, keep bool) (<-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.stopped != nil {
		return nil, c.mu.stopped
	}
	n, kept := len(hdr)+len(data), 0
	if keep {
		kept = len(data)
	}
	if c.mu.active.alloc+c.mu.active.cost(n, kept) > c.half {
		if c.mu.flushing != nil && c.mu.noSpace != nil {
			return nil, c.mu.noSpace
		}
		if c.mu.flushing != nil {
			return c.mu.freed, nil
		}
		c.swapLocked()
	}
	c.mu.active.put(k, hdr, data, keep)
	return nil, nil
}

// pressed reports whether the flush in progress must hurry: the active
// half is half full, an add waits for room, or the storage is closing.
func (c *writeCache) pressed() bool {
	if c.waiting.Load() > 0 || c.closing.Load() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return 2*c.mu.active.alloc >= c.half
}

// swapLocked hands the active half to the flusher.
func (c *writeCache) swapLocked() {
	c.mu.flushing = c.mu.active
	c.mu.active = c.nextActiveLocked()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// next returns the half to flush next: one AddEntry swapped out, if any;
// else, with swapActive, the active half (if it holds anything), swapped
// out now. The caller holds writeMu, so nobody else flushes meanwhile.
func (c *writeCache) next(swapActive bool) *wbuf {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.flushing != nil || !swapActive || c.mu.active.empty() {
		return c.mu.flushing
	}
	c.mu.flushing = c.mu.active
	c.mu.active = c.nextActiveLocked()
	return c.mu.flushing
}

// nextActiveLocked returns the half to take adds after a swap: the last
// flushed one if it was kept, else a new one.
func (c *writeCache) nextActiveLocked() *wbuf {
	if b := c.mu.released; b != nil {
		c.mu.released = nil
		return b
	}
	return newWbuf(c.segSize, &c.mu.spare)
}

// pending returns the half waiting to be flushed, if any.
func (c *writeCache) pending() *wbuf { return c.next(false) }

// flushed releases b once its entries are in the index.
func (c *writeCache) flushed(b *wbuf) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.flushing != b {
		panic("entrylog: flushed a write-cache half that is not the flushing one")
	}
	c.mu.flushing = nil
	c.mu.spare.give(b)
	if b.recycle() {
		c.mu.released = b
	}
	c.mu.noSpace = nil
	close(c.mu.freed)
	c.mu.freed = make(chan struct{})
}

// outOfSpace records that the half in flushing could not be written for
// lack of space; waiting puts wake and fail with err.
func (c *writeCache) outOfSpace(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.noSpace = err
	close(c.mu.freed)
	c.mu.freed = make(chan struct{})
}

// stop makes every waiting and later put fail with err. Entries already
// held stay readable.
func (c *writeCache) stop(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.stopped == nil {
		c.mu.stopped = err
		close(c.mu.freed)
		c.mu.freed = make(chan struct{})
	}
}

// get returns a copy of an entry held in either half: the arena's
// segments are reused once their half is flushed, and the caller may keep
// what it reads for as long as it likes.
func (c *writeCache) get(ledgerID, entryID int64) ([]byte, bool) {
	k := entryKeyID{ledgerID, entryID}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.mu.active.payload(k); ok {
		return bytes.Clone(p), true
	}
	if c.mu.flushing != nil {
		if p, ok := c.mu.flushing.payload(k); ok {
			return bytes.Clone(p), true
		}
	}
	return nil, false
}

// last returns the highest entry id of a ledger held in either half.
func (c *writeCache) last(ledgerID int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.mu.active.last[ledgerID]
	if c.mu.flushing != nil {
		if l, ok2 := c.mu.flushing.last[ledgerID]; ok2 && (!ok || l > last) {
			last, ok = l, true
		}
	}
	return last, ok
}

// size returns the record bytes held in both halves.
func (c *writeCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.mu.active.bytes
	if c.mu.flushing != nil {
		n += c.mu.flushing.bytes
	}
	return n
}
