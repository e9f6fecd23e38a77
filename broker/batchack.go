package broker

// Batch-index acknowledgement (acknowledgmentAtBatchIndexLevelEnabled):
// an ACK whose message id carries an ack_set acknowledges only some
// messages of a batch entry. The cursor keeps the entry's remaining bits
// (managedledger's AckBatchIndexes, persisted with the cursor) and
// acknowledges the entry once none is left. When such an entry goes out
// again (redelivery, a consumer change, a restart), its MESSAGE carries
// the remaining bits, so the client delivers only the messages still
// unacknowledged, and it takes only their permits. Without the setting a
// partial ack is not applied: the entry stays until the client acks it
// whole, so nothing is lost, but a redelivery repeats the whole batch.

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/magnetar-io/magnetar/managedledger"
)

// batchAck is one message id of an ACK with an ack_set.
type batchAck struct {
	pos    managedledger.Position
	ackSet []uint64 // set bit: still unacknowledged
}

// ackSetOf converts the protocol's signed words.
func ackSetOf(words []int64) []uint64 {
	out := make([]uint64, len(words))
	for i, w := range words {
		out[i] = uint64(w)
	}
	return out
}

// ackBatchIndexes applies partial acks from c; entries they complete
// leave the in-flight set like acknowledged ones.
func (s *subscription) ackBatchIndexes(ctx context.Context, c *consumer, cumulative bool, acks []batchAck) error {
	if !s.topic.name.Persistent() {
		return nil
	}
	if err := s.checkAckType(c, cumulative); err != nil {
		return err
	}
	last := s.topic.ml.LastConfirmed()
	for _, a := range acks {
		if a.pos.Compare(last) > 0 {
			return fmt.Errorf("acknowledged position %v is past the last entry %v", a.pos, last)
		}
		if err := s.cursor.AckBatchIndexes(ctx, a.pos, a.ackSet, cumulative); err != nil {
			return err
		}
	}
	s.advanceSnapshots()
	s.mu.Lock()
	wake := len(s.replay) > 0
	for _, a := range acks {
		if s.cursor.IsAcknowledged(a.pos) {
			wake = s.ackedLocked(a.pos) || wake
		}
		if cumulative {
			wake = s.ackedBeforeLocked(c, a.pos, false) || wake
		}
	}
	s.mu.Unlock()
	if wake {
		s.dispatch()
	}
	return nil
}

// remainingAckSet is what MESSAGE carries for a partly acknowledged batch
// entry (nil otherwise), and the number of its messages still to deliver.
func (s *subscription) remainingAckSet(pos managedledger.Position, messages int) ([]int64, int) {
	if !s.topic.b.cfg.AcknowledgmentAtBatchIndexLevelEnabled {
		return nil, messages
	}
	set := s.cursor.BatchAckSet(pos)
	if set == nil {
		return nil, messages
	}
	out := make([]int64, len(set))
	left := 0
	for i, w := range set {
		out[i] = int64(w)
		left += bits.OnesCount64(w)
	}
	return out, min(left, messages)
}
