package broker

// Topic stats and internal stats for the admin API (admin.Topics),
// gathered under the topic's and subscriptions' locks into the JSON
// shapes of package broker/admin.
//
// Behaviour:
//   - stats: counters and rates of the last stats interval
//     (statsUpdateFrequencyInSecs), storage size, producers, and every
//     subscription: durable ones (also those whose cursor has no consumer
//     since the topic loaded: type "None") and readers (isDurable false).
//     Per-producer and per-consumer rates are not tracked: zero.
//   - internalStats: what the ManagedLedger and Cursor interfaces expose,
//     and entriesAddedCounter, the entries the topic stored since it
//     loaded (as Pulsar's, counted since the managed ledger opened).
//     currentLedgerSize and cursor ledgers are not exposed and stay zero
//     or -1;
//     currentLedgerEntries is the entry count of the ledger holding the
//     last entry. A cursor's individually deleted ranges are found by
//     reading at most maxAckScan entries after its mark-delete position.

import (
	"time"

	"context"
	"sort"
	"strings"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// maxAckScan bounds the entries internalStats reads per cursor to find
// its individually acknowledged ranges.
const maxAckScan = 10000

// TopicStats is a topic's stats (admin.Topics).
func (b *Broker) TopicStats(ctx context.Context, name string) (admin.TopicStats, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.TopicStats{}, err
	}
	return b.statsOf(t), nil
}

// lastPublished is the publish time of the topic's last stored message
// (unix ms; 0: none): kept as messages are stored, read from the last
// entry once after a load (PIP-431's recovery, on the stats path only).
func (t *topic) lastPublished() int64 {
	if ms := t.stats.lastPublishMs.Load(); ms > 0 || t.ml.Entries() == 0 {
		return ms
	}
	ctx, cancel := context.WithTimeout(t.b.ctx, 5*time.Second)
	defer cancel()
	e, err := t.ml.ReadEntry(ctx, t.ml.LastConfirmed())
	if err != nil {
		return 0 // trimmed or unreadable: no last message to name
	}
	ms := int64(publishTime(e.Data))
	t.stats.lastPublishMs.CompareAndSwap(0, ms) // a publish meanwhile wins
	return t.stats.lastPublishMs.Load()
}

// statsOf is a loaded topic's stats.
func (b *Broker) statsOf(t *topic) admin.TopicStats {
	rates := t.rates.current()
	st := admin.TopicStats{MsgRateIn: rates.MsgRateIn, MsgRateOut: rates.MsgRateOut,
		MsgThroughputIn: rates.ThroughputIn, MsgThroughputOut: rates.ThroughputOut, MsgDropRate: rates.MsgDropRate,
		MsgInCounter: t.stats.msgsIn.Load(), MsgOutCounter: t.stats.msgsOut.Load(),
		BytesInCounter: t.stats.bytesIn.Load(), BytesOutCounter: t.stats.bytesOut.Load(),
		StorageSize: t.ml.Size(), Publishers: t.publisherStats(), Subscriptions: t.subscriptionStats(),
		Replication: t.replicationStats(time.Now()), DeduplicationStatus: "Disabled"}
	if rates.MsgRateIn > 0 {
		st.AverageMsgSize = rates.ThroughputIn / rates.MsgRateIn
	}
	if t.dedup != nil {
		st.DeduplicationStatus = "Enabled"
	}
	if ct, ok := t.ml.(managedledger.CreationTimer); ok && !ct.CreatedAt().IsZero() {
		st.TopicCreationTimeStamp = ct.CreatedAt().UnixMilli()
	}
	st.LastPublishTimeStamp = t.lastPublished()
	for _, s := range st.Subscriptions {
		if s.IsDurable {
			st.BacklogSize = max(st.BacklogSize, s.BacklogSize) // what the slowest subscription holds
		}
	}
	return st
}

func (t *topic) publisherStats() []admin.PublisherStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]admin.PublisherStats, 0, len(t.producers))
	for p := range t.producers {
		mode := "Shared"
		if t.exclusive == p {
			mode = "Exclusive"
		}
		out = append(out, admin.PublisherStats{AccessMode: mode, ProducerID: p.id, ProducerName: p.name,
			Address: p.conn.t.RemoteAddr().String(), ClientVersion: p.client.version,
			ConnectedSince: p.client.connectedSince(), Metadata: p.client.metadata})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerName < out[j].ProducerName })
	return out
}

// subscriptionStats covers the subscriptions, the durable cursors without
// one (no consumer since the topic loaded) and the readers.
func (t *topic) subscriptionStats() map[string]admin.SubscriptionStats {
	t.mu.Lock()
	subs := make([]*subscription, 0, len(t.subs)+len(t.readers))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	for s := range t.readers {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	out := make(map[string]admin.SubscriptionStats, len(subs))
	for _, s := range subs {
		out[s.name] = s.stats()
	}
	for _, c := range t.subscriptionCursors() {
		if _, ok := out[c.Name()]; ok || !c.Durable() {
			continue
		}
		backlog := c.Backlog()
		out[c.Name()] = admin.SubscriptionStats{Type: "None", IsDurable: true, MsgBacklog: backlog,
			MsgBacklogNoDelayed: backlog, BacklogSize: c.BacklogSize(), Consumers: []admin.ConsumerStats{},
			IsReplicated: isReplicatedCursor(c), ConsumersAfterMarkDeletePosition: map[string]string{},
			SubscriptionProperties: map[string]string{}}
	}
	return out
}

// stats is the subscription's part of the topic stats.
func (s *subscription) stats() admin.SubscriptionStats {
	st := s.consumerStats()
	st.MsgBacklog = s.cursor.Backlog()
	st.MsgBacklogNoDelayed = max(st.MsgBacklog-st.MsgDelayed, 0)
	st.BacklogSize = s.cursor.BacklogSize()
	st.IsReplicated = s.replicated.Load()
	return st
}

// consumerCounts are one consumer's permits and unacknowledged messages.
func (s *subscription) consumerCounts(c *consumer) (permits, unacked int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.permits, c.unacked
}

func (s *subscription) consumerStats() admin.SubscriptionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := admin.SubscriptionStats{Type: s.kind().String(), IsDurable: s.durable, MsgDelayed: int64(len(s.delayed)),
		UnackedMessages: s.unacked, BlockedOnUnackedMsgs: s.blockedOnUnacked,
		Consumers:                        make([]admin.ConsumerStats, 0, len(s.consumers)),
		ConsumersAfterMarkDeletePosition: map[string]string{}, SubscriptionProperties: map[string]string{}}
	for _, c := range s.consumers {
		st.Consumers = append(st.Consumers, admin.ConsumerStats{ConsumerName: c.name, AvailablePermits: c.permits,
			UnackedMessages: c.unacked, BlockedOnUnackedMsgs: c.blockedOnUnacked, Address: c.conn.t.RemoteAddr().String(),
			ClientVersion: c.client.version, ConnectedSince: c.client.connectedSince(), Metadata: c.client.metadata,
			LastConsumedFlowTimestamp: c.lastFlowMs.Load()})
	}
	exclusive := s.kind() == pb.CommandSubscribe_Exclusive || s.kind() == pb.CommandSubscribe_Failover
	if active := s.activeLocked(); exclusive && len(active) > 0 {
		st.ActiveConsumerName = active[0].name
	}
	return st
}

// InternalStats is a topic's managed ledger and cursors (admin.Topics).
func (b *Broker) InternalStats(ctx context.Context, name string) (admin.InternalStats, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.InternalStats{}, err
	}
	return internalStatsOf(ctx, t)
}

func internalStatsOf(ctx context.Context, t *topic) (admin.InternalStats, error) {
	last := t.ml.LastConfirmed()
	st := admin.InternalStats{NumberOfEntries: t.ml.Entries(), TotalSize: t.ml.Size(), EntriesAddedCounter: t.entriesAdded.Load(),
		CurrentLedgerEntries: max(last.EntryID+1, 0), LastConfirmedEntry: last.String(), State: "LedgerOpened",
		Ledgers: []admin.LedgerInfo{}, Cursors: map[string]admin.CursorStats{}, SchemaLedgers: []struct{}{},
		CompactedLedger: admin.CompactedLedger{LedgerID: -1, Entries: -1, Size: -1}}
	if ll, ok := t.ml.(managedledger.LedgerLister); ok {
		var offloaded map[int64]bool
		if o, ok := t.ml.(managedledger.Offloadable); ok {
			offloaded = o.Offloaded()
		}
		for _, l := range ll.Ledgers() {
			st.Ledgers = append(st.Ledgers, admin.LedgerInfo{LedgerID: l.ID, Entries: l.Entries, Size: l.Size, Timestamp: l.Timestamp,
				Offloaded: offloaded[l.ID]})
		}
		if n := len(st.Ledgers); n > 0 {
			st.CurrentLedgerSize = st.Ledgers[n-1].Size
		}
	}
	if t.terminated.Load() {
		st.State = "Terminated"
	}
	if v, err := t.compactedView(ctx); err == nil && v != nil {
		// Its size is not kept (the compactor writes it; Pulsar reads it
		// from the ledger's metadata): -1, as Pulsar answers when unknown.
		st.CompactedLedger = admin.CompactedLedger{LedgerID: v.ledgerID, Entries: v.last + 1, Size: -1}
	}
	for _, c := range t.ml.Cursors() {
		if !c.Durable() {
			continue
		}
		cs, err := cursorStatsOf(ctx, t.ml, c)
		if err != nil {
			return st, err
		}
		st.Cursors[c.Name()] = cs
	}
	return st, nil
}

func cursorStatsOf(ctx context.Context, ml managedledger.ManagedLedger, c managedledger.Cursor) (admin.CursorStats, error) {
	read := c.ReadPosition()
	ranges, sinceUnacked, err := ackedRanges(ctx, ml, c, read)
	if err != nil {
		return admin.CursorStats{}, err
	}
	return admin.CursorStats{MarkDeletePosition: c.MarkDeletePosition().String(), ReadPosition: read.String(),
		MessagesConsumedCounter: ml.Entries() - c.Backlog(), CursorLedger: -1, CursorLedgerLastEntry: -1,
		IndividuallyDeletedMessages: formatRanges(ranges), State: "Open",
		NumberOfEntriesSinceFirstNotAckedMessage: sinceUnacked, TotalNonContiguousDeletedMessagesRange: len(ranges),
		Properties: map[string]int64{}}, nil
}

// ackRange is Pulsar's (from..to] range of individually acknowledged
// entries.
type ackRange struct{ from, to managedledger.Position }

// ackedRanges reads (at most maxAckScan) entries after the cursor's
// mark-delete position and returns the acknowledged ranges among them and
// how many of them lie before read (read but not all acknowledged).
func ackedRanges(ctx context.Context, ml managedledger.ManagedLedger, c managedledger.Cursor, read managedledger.Position) ([]ackRange, int64, error) {
	prev := c.MarkDeletePosition()
	scan, err := ml.NewNonDurableCursor(prev)
	if err != nil {
		return nil, 0, err
	}
	defer scan.Close(ctx)
	var ranges []ackRange
	var beforeRead int64
	open := false
	for n := 0; n < maxAckScan; {
		entries, err := scan.ReadEntries(ctx, min(100, maxAckScan-n), 16<<20)
		if err != nil || len(entries) == 0 {
			return ranges, beforeRead, err
		}
		for _, e := range entries {
			n++
			if e.Position.Compare(read) < 0 {
				beforeRead++
			}
			acked := c.IsAcknowledged(e.Position)
			if acked && !open {
				ranges = append(ranges, ackRange{from: prev})
			}
			if acked {
				ranges[len(ranges)-1].to = e.Position
			}
			open, prev = acked, e.Position
		}
	}
	return ranges, beforeRead, nil
}

// formatRanges writes ranges as Pulsar does: [(1:2..1:4], (1:6..1:7]].
func formatRanges(ranges []ackRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = "(" + r.from.String() + ".." + r.to.String() + "]"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
