package managedledger

import "math"

// Eviction of what every cursor has read. The entry cache exists for the
// readers that have not read an entry yet: a tailing subscription, or a
// read-ahead's window in front of a cursor catching up. Once every cursor
// of a managed ledger has read past an entry, nobody is going to ask the
// cache for it except a redelivery (a rewind, a seek back, a negative
// acknowledgement), which reads it from the bookies instead. Kept until
// the cache's age or size drops it, such entries were most of what a
// catch-up read kept live: a 1 GiB backlog read at 400 MiB/s held the
// 256 MiB cache full of consumed entries, and a fresh broker touched
// each of their pages for the first time (TUNING.md, "The entry cache
// keeps what is still to be read"). Pulsar's broker evicts by the
// slowest reader's read position in the same way
// (managedLedgerCacheEvictionByMarkDeletedPosition=false, its default).

// maxReadEvictSpan bounds the entries one eviction looks up: a cursor that
// jumped far ahead (a skip, a reset to the end) leaves what it jumped over
// to the cache's age and size rules instead of a walk over every index.
const maxReadEvictSpan = 1 << 16

// evictReadLocked drops from the entry cache the entries below the lowest
// read position of the managed ledger's cursors that an earlier call did
// not drop already. Called where a cursor's read position moves forward
// (takeRead).
func (ml *bkLedger) evictReadLocked() {
	low, ok := ml.lowestReadLocked()
	if !ok {
		return
	}
	if low < ml.mu.readEvicted {
		// A cursor came, or went back, below what was dropped: entries
		// read again from there may be cached again, so drop from there.
		ml.mu.readEvicted = low
		return
	}
	from := max(ml.mu.readEvicted, ml.baseLocked(), low-maxReadEvictSpan)
	if low <= from {
		return
	}
	ml.f.cache.drop(ml.id, from, low, ml.positionLocked)
	ml.mu.readEvicted = low
}

// lowestReadLocked is the lowest next-to-read index over every cursor
// (durable or not); false when there is none.
func (ml *bkLedger) lowestReadLocked() (int64, bool) {
	if len(ml.mu.cursors)+len(ml.mu.nonDurable) == 0 {
		return 0, false
	}
	low := int64(math.MaxInt64)
	for _, c := range ml.mu.cursors {
		low = min(low, max(c.read, c.markDelete+1))
	}
	for c := range ml.mu.nonDurable {
		low = min(low, max(c.read, c.markDelete+1))
	}
	return low, true
}
