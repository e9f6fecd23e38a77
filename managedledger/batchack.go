package managedledger

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Batch-index acknowledgement (Pulsar's batchDeletedIndexes).
//
// Behaviour:
//   - A batch entry holds several messages. A consumer that acknowledges
//     some of them sends an ack set: a little-endian bit set over the
//     batch's messages in which a set bit is a message still
//     unacknowledged. The cursor keeps, per partly acknowledged entry,
//     the AND of every ack set given (acks only ever clear bits, as
//     Java's BitSet.and: words past the shorter set count as zero), with
//     trailing zero words dropped (as BitSet.toLongArray).
//   - When no bit is left the entry is acknowledged as by Delete. An
//     empty ack set (no bit set) acknowledges the whole entry.
//   - Entries already acknowledged (at or before the mark-delete position,
//     or individually) are no-ops; an entry acknowledged by any path
//     loses its set (see the invariant on ackState).
//   - Cumulative: every entry before pos is acknowledged (the mark-delete
//     position moves to the entry before pos) and pos keeps its set.
//   - Backlog stays in entries: a partly acknowledged entry is backlog.

// maxAckSetWords bounds one ack set: 8 Ki words are 512 Ki messages, far
// more than a producer batches; a larger set is a broken or hostile
// client, and each set is kept in memory and persisted.
const maxAckSetWords = 1 << 13

// batchSet is a partly acknowledged batch entry: the bits of its messages
// still unacknowledged, trailing zero words dropped, never empty.
type batchSet struct {
	index int64
	bits  []uint64
}

// batchAt is where index i's set is (or would go) in s.batch, and
// whether it has one.
func (s *ackState) batchAt(i int64) (int, bool) {
	k := sort.Search(len(s.batch), func(k int) bool { return s.batch[k].index >= i })
	return k, k < len(s.batch) && s.batch[k].index == i
}

// dropBatch drops the sets of indices lo..hi.
func (s *ackState) dropBatch(lo, hi int64) {
	if len(s.batch) == 0 || lo > hi {
		return
	}
	a, _ := s.batchAt(lo)
	b := a + sort.Search(len(s.batch)-a, func(k int) bool { return s.batch[a+k].index > hi })
	switch {
	case a == b:
	case a == 0:
		// The common case (the mark-delete position moved): no copy. The
		// slice's head is reclaimed when an insert reallocates it.
		s.batch = s.batch[b:]
	default:
		s.batch = slices.Delete(s.batch, a, b)
	}
	if len(s.batch) == 0 {
		s.batch = nil
	}
}

// dropBatchThrough drops the sets of indices up to i.
func (s *ackState) dropBatchThrough(i int64) { s.dropBatch(math.MinInt64, i) }

// batchBits returns a copy of index i's set, nil if it has none.
func (s *ackState) batchBits(i int64) []uint64 {
	if k, ok := s.batchAt(i); ok {
		return slices.Clone(s.batch[k].bits)
	}
	return nil
}

// andAckSet ANDs set into index i's set (i must be unacknowledged);
// with no bit left, i is acknowledged. It reports whether the state
// changed.
func (s *ackState) andAckSet(i int64, set []uint64) bool {
	k, ok := s.batchAt(i)
	var bits []uint64
	if ok {
		old := s.batch[k].bits
		bits = make([]uint64, min(len(old), len(set)))
		for j := range bits {
			bits[j] = old[j] & set[j]
		}
	} else {
		bits = slices.Clone(set)
	}
	bits = trimZeroWords(bits)
	switch {
	case len(bits) == 0:
		s.addAcked(i) // drops the set
		s.normalise()
		return true
	case ok:
		changed := !slices.Equal(bits, s.batch[k].bits)
		s.batch[k].bits = bits
		return changed
	}
	s.batch = slices.Insert(s.batch, k, batchSet{index: i, bits: bits})
	return true
}

// ackBatchIndexes applies AckBatchIndexes at index i (a stored entry)
// and reports whether the state changed.
func (s *ackState) ackBatchIndexes(i int64, set []uint64, cumulative bool) bool {
	changed := false
	if cumulative && i-1 > s.markDelete {
		s.markDelete = i - 1
		s.normalise()
		changed = true
	}
	if s.isAcked(i) {
		return changed
	}
	return s.andAckSet(i, set) || changed
}

func trimZeroWords(bits []uint64) []uint64 {
	n := len(bits)
	for n > 0 && bits[n-1] == 0 {
		n--
	}
	if n == 0 {
		return nil
	}
	return bits[:n]
}

func checkAckSet(set []uint64) error {
	if len(set) > maxAckSetWords {
		return fmt.Errorf("ack set of %d words, over the limit of %d: %w", len(set), maxAckSetWords, ErrInvalidAckSet)
	}
	return nil
}

// AckBatchIndexes implements Cursor.
func (c *bkCursor) AckBatchIndexes(ctx context.Context, pos Position, ackSet []uint64, cumulative bool) error {
	if err := checkAckSet(ackSet); err != nil {
		return fmt.Errorf("%s: cursor %s: ack %v: %w", c.ml.name, c.name, pos, err)
	}
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.checkLocked(); err != nil {
		return err
	}
	i, ok := c.ml.indexAtLocked(pos)
	if !ok {
		if pos.Compare(c.ml.positionLocked(c.ml.endLocked()-1)) > 0 {
			return fmt.Errorf("%s: cursor %s: ack of %v past the last entry: %w", c.ml.name, c.name, pos, ErrInvalidPosition)
		}
		return nil // trimmed: already gone
	}
	if c.ackBatchIndexes(i, ackSet, cumulative) {
		// As Delete: the throttled persistence writes it.
		c.dirty = true
		c.ml.schedulePersistLocked()
	}
	return nil
}

// BatchAckSet implements Cursor.
func (c *bkCursor) BatchAckSet(pos Position) []uint64 {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	i, ok := c.ml.indexAtLocked(pos)
	if !ok {
		return nil
	}
	return c.batchBits(i)
}

// AckBatchIndexes implements Cursor.
func (c *memoryCursor) AckBatchIndexes(ctx context.Context, pos Position, ackSet []uint64, cumulative bool) error {
	if err := checkAckSet(ackSet); err != nil {
		return fmt.Errorf("%s: cursor %s: ack %v: %w", c.ml.name, c.name, pos, err)
	}
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.check(); err != nil {
		return err
	}
	i, ok := c.indexAtLocked(pos)
	if !ok {
		if pos.Compare(c.ml.positionLocked(c.ml.endLocked()-1)) > 0 {
			return fmt.Errorf("%s: cursor %s: ack of %v past the last entry: %w", c.ml.name, c.name, pos, ErrInvalidPosition)
		}
		return nil // trimmed: already gone
	}
	if c.ackBatchIndexes(i, ackSet, cumulative) {
		c.ml.trimLocked() // as Delete: an entry may be acknowledged now
	}
	return nil
}

// BatchAckSet implements Cursor.
func (c *memoryCursor) BatchAckSet(pos Position) []uint64 {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	i, ok := c.indexAtLocked(pos)
	if !ok {
		return nil
	}
	return c.batchBits(i)
}
