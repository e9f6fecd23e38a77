package broker

// The transactions admin calls (admin.Transactions), answered from the
// coordinators hosted here and the buffers and pending acknowledgements
// of the topics served here.

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/txn"
)

var _ admin.Transactions = (*Broker)(nil)

// CoordinatorTopic implements admin.Transactions.
func (b *Broker) CoordinatorTopic(id uint64) string {
	return partitionName(assignTopic, int(min(id, 1<<30))).String()
}

// adminCoordinator is coordinator id for an admin call (errors mapped to
// admin's).
func (b *Broker) adminCoordinator(ctx context.Context, id uint64) (*txn.Coordinator, error) {
	c, err := b.coordinator(ctx, id)
	if err != nil {
		return nil, admin.Errorf(admin.ErrUnavailable, "transaction coordinator %d: %v", id, err)
	}
	return c, nil
}

// coordinatorsFor is coordinator id (nil: every one hosted here) for an
// admin call.
func (b *Broker) coordinatorsFor(ctx context.Context, id *uint64) (map[uint64]*txn.Coordinator, error) {
	if !b.cfg.TransactionCoordinatorEnabled {
		return nil, admin.Errorf(admin.ErrUnavailable, "%v", errTxnDisabled)
	}
	if id == nil {
		return b.hostedCoordinators(), nil
	}
	c, err := b.adminCoordinator(ctx, *id)
	if err != nil {
		return nil, err
	}
	return map[uint64]*txn.Coordinator{*id: c}, nil
}

// CoordinatorStats implements admin.Transactions.
func (b *Broker) CoordinatorStats(ctx context.Context, id *uint64) (map[string]admin.CoordinatorStats, error) {
	hosted, err := b.coordinatorsFor(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[string]admin.CoordinatorStats{}
	for tc, c := range hosted {
		st := c.Stats()
		state := "Ready"
		if st.Failed != nil {
			state = "Close"
		}
		out[strconv.FormatUint(tc, 10)] = admin.CoordinatorStats{State: state, LeastSigBits: st.Sequence,
			LowWaterMark: st.LowWaterMark, OngoingTxnSize: st.Ongoing,
			RecoverStartTime: st.RecoverStart.UnixMilli(), RecoverEndTime: st.RecoverEnd.UnixMilli()}
	}
	return out, nil
}

// TransactionMetadata implements admin.Transactions.
func (b *Broker) TransactionMetadata(ctx context.Context, most, least uint64) (admin.TxnMetadata, error) {
	c, err := b.adminCoordinator(ctx, most)
	if err != nil {
		return admin.TxnMetadata{}, err
	}
	m, err := c.Get(txn.ID{Most: most, Least: least})
	if errors.Is(err, txn.ErrNotFound) {
		return admin.TxnMetadata{}, admin.Errorf(admin.ErrTransactionNotFound, "%v", err)
	}
	if err != nil {
		return admin.TxnMetadata{}, err
	}
	return b.txnMetadata(ctx, m), nil
}

// AbortTransaction implements admin.Transactions (an operator ending a
// stuck transaction).
func (b *Broker) AbortTransaction(ctx context.Context, most, least uint64) error {
	c, err := b.adminCoordinator(ctx, most)
	if err != nil {
		return err
	}
	err = c.End(ctx, txn.ID{Most: most, Least: least}, false)
	switch {
	case errors.Is(err, txn.ErrNotFound):
		return admin.Errorf(admin.ErrTransactionNotFound, "%v", err)
	case errors.Is(err, txn.ErrInvalidStatus):
		return admin.Errorf(admin.ErrInUse, "%v", err)
	}
	return err
}

// ScaleCoordinators implements admin.Transactions.
func (b *Broker) ScaleCoordinators(ctx context.Context, n int) error {
	if !b.cfg.TransactionCoordinatorEnabled {
		return admin.Errorf(admin.ErrUnavailable, "%v", errTxnDisabled)
	}
	cur, err := b.partitions(ctx, assignTopic)
	if err != nil {
		return err
	}
	if n < cur {
		return admin.Errorf(admin.ErrBadRequest, "there are %d transaction coordinators: their number can only grow (asked %d)", cur, n)
	}
	if n == cur {
		return nil
	}
	return b.UpdatePartitions(ctx, assignTopic.String(), n)
}

// txnMetadata is m as Pulsar's TransactionMetadata, with the buffer and
// pending-ack figures of the topics served here.
func (b *Broker) txnMetadata(ctx context.Context, m txn.Meta) admin.TxnMetadata {
	out := admin.TxnMetadata{TxnID: m.ID.String(), Status: m.Status.String(), OpenTimestamp: m.Start.UnixMilli(),
		TimeoutAt: m.Deadline().UnixMilli(), ProducedPartitions: map[string]admin.TxnInBufferStats{},
		AckedPartitions: map[string]map[string]admin.TxnInPendingAckStats{}}
	for _, p := range m.Partitions {
		st, _ := b.TransactionInBufferStats(ctx, p, m.ID.Most, m.ID.Least)
		out.ProducedPartitions[p] = st
	}
	for _, s := range m.Subs {
		if out.AckedPartitions[s.Topic] == nil {
			out.AckedPartitions[s.Topic] = map[string]admin.TxnInPendingAckStats{}
		}
		st, _ := b.TransactionInPendingAckStats(ctx, s.Topic, s.Name, m.ID.Most, m.ID.Least)
		out.AckedPartitions[s.Topic][s.Name] = st
	}
	return out
}

// SlowTransactions implements admin.Transactions: the live transactions
// open longer than olderThan.
func (b *Broker) SlowTransactions(ctx context.Context, olderThan time.Duration, id *uint64) (map[string]admin.TxnMetadata, error) {
	hosted, err := b.coordinatorsFor(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[string]admin.TxnMetadata{}
	now := time.Now()
	for _, c := range hosted {
		for _, m := range c.List() {
			if now.Sub(m.Start) > olderThan {
				out[m.ID.String()] = b.txnMetadata(ctx, m)
			}
		}
	}
	return out, nil
}

// loadedTopicOf is the loaded topic name (nil when not loaded here).
func (b *Broker) loadedTopicNamed(name string) *topic {
	tn, err := ParseTopicName(name)
	if err != nil {
		return nil
	}
	return b.loadedTopic(tn)
}

// TransactionBufferStats implements admin.Transactions.
func (b *Broker) TransactionBufferStats(ctx context.Context, name string) (admin.TxnBufferStats, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.TxnBufferStats{}, err
	}
	tb := t.txns.Load()
	if tb == nil {
		// Never had a transaction: nothing limits reads.
		return admin.TxnBufferStats{State: "NoSnapshot", MaxReadPosition: t.ml.LastConfirmed().String()}, nil
	}
	st := tb.stats()
	maxRead := t.ml.LastConfirmed()
	if st.Capped {
		maxRead = st.MaxRead
	}
	return admin.TxnBufferStats{State: "Ready", MaxReadPosition: maxRead.String(), LastSnapshotTimestamps: st.SnapshotAt.UnixMilli(),
		OngoingTxnSize: int64(st.Ongoing), AbortedTxnSize: int64(st.Aborted), CommittedTxnCount: st.Committed,
		AbortedTxnCount: st.AbortedN}, nil
}

// PendingAckStats implements admin.Transactions.
func (b *Broker) PendingAckStats(ctx context.Context, name, sub string) (admin.PendingAckStats, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.PendingAckStats{}, err
	}
	t.mu.Lock()
	s := t.subs[sub]
	t.mu.Unlock()
	if s == nil {
		if _, ok := t.durableSub(sub); !ok {
			return admin.PendingAckStats{}, admin.Errorf(admin.ErrSubscriptionNotFound, "subscription %s of %s not found", sub, name)
		}
		return admin.PendingAckStats{State: "None"}, nil
	}
	pa := s.pending.Load()
	if pa == nil {
		return admin.PendingAckStats{State: "None"}, nil
	}
	pa.mu.Lock()
	defer pa.mu.Unlock()
	return admin.PendingAckStats{State: "Ready", OngoingTxnSize: int64(len(pa.txns))}, nil
}

// TransactionInBufferStats implements admin.Transactions (figures of a
// topic loaded here; empty otherwise).
func (b *Broker) TransactionInBufferStats(ctx context.Context, name string, most, least uint64) (admin.TxnInBufferStats, error) {
	t := b.loadedTopicNamed(name)
	if t == nil {
		return admin.TxnInBufferStats{}, nil
	}
	tb := t.txns.Load()
	if tb == nil {
		return admin.TxnInBufferStats{}, nil
	}
	id := txn.ID{Most: most, Least: least}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	out := admin.TxnInBufferStats{}
	if o := tb.ongoing[id]; o != nil && o.known {
		out.StartPosition = o.first.String()
	}
	_, out.Aborted = tb.aborted[id]
	return out, nil
}

// TransactionInPendingAckStats implements admin.Transactions.
func (b *Broker) TransactionInPendingAckStats(ctx context.Context, name, sub string, most, least uint64) (admin.TxnInPendingAckStats, error) {
	t := b.loadedTopicNamed(name)
	if t == nil {
		return admin.TxnInPendingAckStats{}, nil
	}
	t.mu.Lock()
	s := t.subs[sub]
	t.mu.Unlock()
	if s == nil {
		return admin.TxnInPendingAckStats{}, nil
	}
	cum, _, _ := s.pendingOf(txn.ID{Most: most, Least: least})
	out := admin.TxnInPendingAckStats{}
	if cum != nil {
		out.CumulativeAckPosition = cum.String()
	}
	return out, nil
}
