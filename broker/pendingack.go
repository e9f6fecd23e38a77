package broker

// Pending acknowledgements of a subscription (Pulsar's PendingAckHandle):
// acknowledgements made in a transaction, held until it ends.
//
// Behaviour:
//   - An ACK with a transaction id holds its positions (whole entries, or
//     batch indexes with an ack set) or, on Exclusive and Failover, a
//     cumulative position for the transaction. It is refused with
//     TransactionConflict when another transaction holds one of those
//     positions (or any cumulative ack), when the position is already
//     acknowledged, or when a cumulative ack is not past the mark-delete
//     position, as Pulsar refuses them.
//   - Held whole entries leave their consumer's unacknowledged count
//     (as Pulsar's); dispatch gives no held position to anyone while it
//     is held.
//   - END_TXN_ON_SUBSCRIPTION commit applies them as ordinary acks and
//     makes the cursor durable before forgetting them (so a crash cannot
//     lose a committed transaction's acknowledgements: the coordinator
//     ends again on the next owner, which finds them still held); abort
//     drops them and redelivers the individually held positions.
//   - The held acknowledgements are saved, before the ACK is answered, in
//     the managed ledger's property txnPendingAck/<subscription>, and
//     restored when the subscription is created again (after a reload),
//     so a broker restart loses none.
//
// Lock rules: pendingAcks.mu guards its maps; it may be taken while
// subscription.mu is held (dispatch asks whether a position is held),
// never the other way round. save runs without either lock.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/magnetar-io/magnetar/broker/txn"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// pendingAckPrefix starts the managed-ledger property of a
// subscription's pending acknowledgements.
const pendingAckPrefix = "txnPendingAck/"

// errTxnConflict: another transaction holds the acknowledgement, or it
// was already made (TransactionConflict).
var errTxnConflict = errors.New("transaction conflict")

type pendingAcks struct {
	// save serializes the property writes, in the order of the changes.
	saveMu sync.Mutex

	mu    sync.Mutex
	byPos map[managedledger.Position]txn.ID
	txns  map[txn.ID]*txnAcks
}

type txnAcks struct {
	Most, Least uint64
	Positions   []managedledger.Position `json:",omitempty"`
	Batch       []txnBatchAck            `json:",omitempty"`
	Cumulative  *managedledger.Position  `json:",omitempty"`
}

type txnBatchAck struct {
	Pos    managedledger.Position
	AckSet []uint64
}

func newPendingAcks() *pendingAcks {
	return &pendingAcks{byPos: map[managedledger.Position]txn.ID{}, txns: map[txn.ID]*txnAcks{}}
}

// restorePendingAcks loads s's held acknowledgements, if any were saved.
func (s *subscription) restorePendingAcks() error {
	raw, ok := s.topic.ml.Properties()[pendingAckPrefix+s.name]
	if !ok || !s.durable {
		return nil
	}
	var saved []*txnAcks
	if err := json.Unmarshal([]byte(raw), &saved); err != nil {
		return fmt.Errorf("pending acknowledgements of %s / %s: %w", s.topic.name, s.name, err)
	}
	pa := newPendingAcks()
	for _, a := range saved {
		id := txn.ID{Most: a.Most, Least: a.Least}
		pa.txns[id] = a
		for _, p := range a.Positions {
			pa.byPos[p] = id
		}
		for _, b := range a.Batch {
			pa.byPos[b.Pos] = id
		}
	}
	s.pending.Store(pa)
	return nil
}

// pendingHeldLocked reports whether dispatch must leave pos alone: a
// transaction holds its acknowledgement.
func (s *subscription) pendingHeldLocked(pos managedledger.Position) bool {
	pa := s.pending.Load()
	if pa == nil {
		return false
	}
	pa.mu.Lock()
	defer pa.mu.Unlock()
	_, ok := pa.byPos[pos]
	return ok
}

// txnAck holds an acknowledgement in transaction id.
func (s *subscription) txnAck(ctx context.Context, c *consumer, id txn.ID, cmd *pb.CommandAck) error {
	if !s.durable {
		return fmt.Errorf("%w: a reader's subscription has no acknowledgements to hold", errTxnConflict)
	}
	cumulative := cmd.GetAckType() == pb.CommandAck_Cumulative
	if err := s.checkAckType(c, cumulative); err != nil {
		return err
	}
	s.pendingInit.Lock()
	pa := s.pending.Load()
	if pa == nil {
		pa = newPendingAcks()
		s.pending.Store(pa)
	}
	s.pendingInit.Unlock()
	pa.saveMu.Lock()
	defer pa.saveMu.Unlock()
	if err := s.holdAcks(pa, id, cumulative, cmd.GetMessageId()); err != nil {
		return err
	}
	if s.topic.b.cfg.TraceReaders {
		s.topic.b.log.Info("trace: txn ack held", "topic", s.topic.name.String(), "subscription", s.name, "txn", id.String(),
			"ids", fmt.Sprint(positionsOf(cmd.GetMessageId())))
	}
	if err := s.savePending(ctx, pa); err != nil {
		s.topic.unloadIfStorageLost(err)
		return err
	}
	if !cumulative {
		s.releaseHeld(cmd.GetMessageId())
	}
	return nil
}

// releaseHeld takes whole entries acknowledged in a transaction out of
// their consumer's unacknowledged count, as Pulsar does: the transaction
// holds them now (an abort gives them out again, redeliverAborted).
func (s *subscription) releaseHeld(ids []*pb.MessageIdData) {
	wake := false
	s.mu.Lock()
	for _, m := range ids {
		if len(m.GetAckSet()) == 0 {
			wake = s.ackedLocked(position(m)) || wake
		}
	}
	s.mu.Unlock()
	if wake {
		s.dispatch()
	}
}

// holdAcks checks and records the acknowledgements.
func (s *subscription) holdAcks(pa *pendingAcks, id txn.ID, cumulative bool, ids []*pb.MessageIdData) error {
	last := s.topic.ml.LastConfirmed()
	pa.mu.Lock()
	defer pa.mu.Unlock()
	a := pa.txns[id]
	if a == nil {
		a = &txnAcks{Most: id.Most, Least: id.Least}
	}
	for _, m := range ids {
		p := position(m)
		if p.Compare(last) > 0 {
			return fmt.Errorf("acknowledged position %v is past the last entry %v", p, last)
		}
		if err := s.checkConflictLocked(pa, id, p, cumulative); err != nil {
			return err
		}
	}
	for _, m := range ids {
		p := position(m)
		switch {
		case cumulative:
			if a.Cumulative == nil || a.Cumulative.Compare(p) < 0 {
				a.Cumulative = &p
			}
		case len(m.GetAckSet()) > 0:
			a.Batch = append(a.Batch, txnBatchAck{Pos: p, AckSet: ackSetOf(m.GetAckSet())})
			pa.byPos[p] = id
		default:
			if !slices.Contains(a.Positions, p) {
				a.Positions = append(a.Positions, p)
			}
			pa.byPos[p] = id
		}
	}
	pa.txns[id] = a
	return nil
}

func (s *subscription) checkConflictLocked(pa *pendingAcks, id txn.ID, p managedledger.Position, cumulative bool) error {
	if cumulative {
		if p.Compare(s.cursor.MarkDeletePosition()) <= 0 {
			return fmt.Errorf("%w: cumulative acknowledgement of %v is not past the mark-delete position %v",
				errTxnConflict, p, s.cursor.MarkDeletePosition())
		}
		for other, a := range pa.txns {
			if other != id && a.Cumulative != nil {
				return fmt.Errorf("%w: transaction %v holds a cumulative acknowledgement of %v", errTxnConflict, other, *a.Cumulative)
			}
		}
		return nil
	}
	if holder, ok := pa.byPos[p]; ok && holder != id {
		return fmt.Errorf("%w: %v is acknowledged in transaction %v, still open", errTxnConflict, p, holder)
	}
	if s.cursor.IsAcknowledged(p) {
		return fmt.Errorf("%w: %v is already acknowledged", errTxnConflict, p)
	}
	return nil
}

// savePending writes the held acknowledgements (saveMu held).
func (s *subscription) savePending(ctx context.Context, pa *pendingAcks) error {
	pa.mu.Lock()
	all := make([]*txnAcks, 0, len(pa.txns))
	for _, a := range pa.txns {
		all = append(all, a)
	}
	pa.mu.Unlock()
	key := pendingAckPrefix + s.name
	if len(all) == 0 {
		if _, ok := s.topic.ml.Properties()[key]; !ok {
			return nil
		}
		return s.topic.ml.UpdateProperties(ctx, nil, []string{key})
	}
	slices.SortFunc(all, func(a, b *txnAcks) int { return int(a.Least - b.Least) })
	if err := saveJSONProperty(ctx, s.topic.ml, key, all); err != nil {
		return fmt.Errorf("save pending acknowledgements of %s / %s: %w", s.topic.name, s.name, err)
	}
	return nil
}

// endTxn applies (commit) or drops (abort) what transaction id holds on
// this subscription (END_TXN_ON_SUBSCRIPTION). Ending a transaction that
// holds nothing here does nothing.
func (s *subscription) endTxn(ctx context.Context, id txn.ID, commit bool) error {
	pa := s.pending.Load()
	if pa == nil {
		return nil
	}
	pa.saveMu.Lock()
	defer pa.saveMu.Unlock()
	pa.mu.Lock()
	a := pa.txns[id]
	pa.mu.Unlock()
	if s.topic.b.cfg.TraceReaders {
		s.topic.b.log.Info("trace: txn acks ended", "topic", s.topic.name.String(), "subscription", s.name, "txn", id.String(),
			"commit", commit, "held", a != nil)
	}
	if a == nil {
		return nil
	}
	if commit {
		if err := s.applyTxnAcks(ctx, a); err != nil {
			return err
		}
	}
	pa.mu.Lock()
	delete(pa.txns, id)
	for p, holder := range pa.byPos {
		if holder == id {
			delete(pa.byPos, p)
		}
	}
	pa.mu.Unlock()
	if err := s.savePending(ctx, pa); err != nil {
		s.topic.unloadIfStorageLost(err)
		return err
	}
	if !commit {
		s.redeliverAborted(a)
	}
	return nil
}

// applyTxnAcks makes a committed transaction's acknowledgements.
func (s *subscription) applyTxnAcks(ctx context.Context, a *txnAcks) error {
	if a.Cumulative != nil {
		if err := s.cursor.MarkDelete(ctx, *a.Cumulative); err != nil && !errors.Is(err, managedledger.ErrInvalidPosition) {
			return fmt.Errorf("commit cumulative acknowledgement: %w", err)
		}
	}
	if len(a.Positions) > 0 {
		if err := s.cursor.Delete(ctx, a.Positions...); err != nil {
			return fmt.Errorf("commit acknowledgements: %w", err)
		}
	}
	for _, b := range a.Batch {
		if err := s.cursor.AckBatchIndexes(ctx, b.Pos, b.AckSet, false); err != nil {
			return fmt.Errorf("commit batch acknowledgement: %w", err)
		}
	}
	// Durable before the held acknowledgements are forgotten (endTxn):
	// cursors persist in the background, and a crash in between would
	// lose acknowledgements a committed transaction made, so their
	// messages would be processed again. Found by the fault suite
	// (txn-pipeline seed 5: 27 messages in each sink twice after a
	// broker was killed).
	if err := flushCursor(ctx, s.cursor); err != nil {
		return fmt.Errorf("commit acknowledgements: %w", err)
	}
	s.advanceSnapshots()
	s.mu.Lock()
	for _, p := range a.Positions {
		s.ackedLocked(p)
	}
	if a.Cumulative != nil {
		for q := range s.inflight {
			if q.Compare(*a.Cumulative) <= 0 {
				s.ackedLocked(q)
			}
		}
	}
	s.mu.Unlock()
	s.dispatch()
	return nil
}

// redeliverAborted gives an aborted transaction's individually held
// positions out again: those still in flight go back to their consumer's
// replay, those whose consumer left meanwhile (dispatch skipped them
// while held) to the replay set.
func (s *subscription) redeliverAborted(a *txnAcks) {
	positions := slices.Clone(a.Positions)
	for _, b := range a.Batch {
		positions = append(positions, b.Pos)
	}
	slots := make([]int32, len(positions))
	for i, p := range positions {
		slots[i] = s.slotOf(p)
	}
	s.mu.Lock()
	for i, p := range positions {
		if in, ok := s.inflight[p]; ok {
			s.removeInflightLocked(p)
			s.replay[p] = in.slot
		} else if !s.cursor.IsAcknowledged(p) {
			s.replay[p] = slots[i]
		}
	}
	s.mu.Unlock()
	s.dispatch()
}

// slotOf is p's key slot on Key_Shared (read from the entry), -1
// otherwise.
func (s *subscription) slotOf(p managedledger.Position) int32 {
	if s.kind() != pb.CommandSubscribe_Key_Shared {
		return -1
	}
	e, err := s.topic.ml.ReadEntry(context.Background(), p)
	if err != nil {
		return 0
	}
	return keySlot(entryInfoOf(e.Data).key)
}

// pendingStats are a transaction's held acknowledgements on s (admin).
func (s *subscription) pendingOf(id txn.ID) (cumulative *managedledger.Position, held int, ok bool) {
	pa := s.pending.Load()
	if pa == nil {
		return nil, 0, false
	}
	pa.mu.Lock()
	defer pa.mu.Unlock()
	a := pa.txns[id]
	if a == nil {
		return nil, 0, false
	}
	return a.Cumulative, len(a.Positions) + len(a.Batch), true
}

// flushCursor makes a cursor's state durable (managedledger.Flusher), a
// compacted subscription's through the cursor it wraps.
func flushCursor(ctx context.Context, c managedledger.Cursor) error {
	if cc, ok := c.(*compactedCursor); ok {
		c = cc.Cursor
	}
	if f, ok := c.(managedledger.Flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}
