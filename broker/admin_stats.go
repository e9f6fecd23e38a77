package broker

// Topic stats and internal stats for the admin API, in the JSON shapes
// pulsaradmin decodes (utils.TopicStats, utils.PersistentTopicInternalStats).
//
// Behaviour:
//   - stats: counters and rates of the last stats interval
//     (statsUpdateFrequencyInSecs), storage size, producers, and every
//     subscription: durable ones (also those whose cursor has no consumer
//     since the topic loaded: type "None") and readers (isDurable false).
//     Per-producer and per-consumer rates are not tracked: zero.
//   - internalStats: what the ManagedLedger and Cursor interfaces expose.
//     The ledger list, entriesAddedCounter, currentLedgerSize and cursor
//     ledgers are not exposed and stay empty, zero or -1;
//     currentLedgerEntries is the entry count of the ledger holding the
//     last entry. A cursor's individually deleted ranges are found by
//     reading at most maxAckScan entries after its mark-delete position.

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// maxAckScan bounds the entries internalStats reads per cursor to find
// its individually acknowledged ranges.
const maxAckScan = 10000

type topicStatsJSON struct {
	MsgRateIn           float64                          `json:"msgRateIn"`
	MsgRateOut          float64                          `json:"msgRateOut"`
	MsgThroughputIn     float64                          `json:"msgThroughputIn"`
	MsgThroughputOut    float64                          `json:"msgThroughputOut"`
	AverageMsgSize      float64                          `json:"averageMsgSize"`
	MsgDropRate         float64                          `json:"msgDropRate"` // non-persistent topics
	MsgInCounter        int64                            `json:"msgInCounter"`
	MsgOutCounter       int64                            `json:"msgOutCounter"`
	BytesInCounter      int64                            `json:"bytesInCounter"`
	BytesOutCounter     int64                            `json:"bytesOutCounter"`
	StorageSize         int64                            `json:"storageSize"`
	BacklogSize         int64                            `json:"backlogSize"`
	Publishers          []publisherStatsJSON             `json:"publishers"`
	Subscriptions       map[string]subscriptionStatsJSON `json:"subscriptions"`
	Replication         map[string]struct{}              `json:"replication"`
	DeduplicationStatus string                           `json:"deduplicationStatus"`
}

type publisherStatsJSON struct {
	AccessMode   string  `json:"accessMode"`
	ProducerID   uint64  `json:"producerId"`
	ProducerName string  `json:"producerName"`
	Address      string  `json:"address"`
	MsgRateIn    float64 `json:"msgRateIn"`
}

type subscriptionStatsJSON struct {
	Type                string `json:"type"`
	IsDurable           bool   `json:"isDurable"`
	MsgBacklog          int64  `json:"msgBacklog"`
	MsgBacklogNoDelayed int64  `json:"msgBacklogNoDelayed"`
	BacklogSize         int64  `json:"backlogSize"`
	MsgDelayed          int64  `json:"msgDelayed"`
	UnackedMessages     int64  `json:"unackedMessages"`
	// BlockedOnUnackedMsgs is Pulsar's
	// blockedSubscriptionOnUnackedMsgs.
	BlockedOnUnackedMsgs bool                `json:"blockedSubscriptionOnUnackedMsgs"`
	ActiveConsumerName   string              `json:"activeConsumerName,omitempty"`
	MsgRateOut           float64             `json:"msgRateOut"`
	Consumers            []consumerStatsJSON `json:"consumers"`
}

type consumerStatsJSON struct {
	ConsumerName         string  `json:"consumerName"`
	AvailablePermits     int64   `json:"availablePermits"`
	UnackedMessages      int64   `json:"unackedMessages"`
	BlockedOnUnackedMsgs bool    `json:"blockedConsumerOnUnackedMsgs"`
	Address              string  `json:"address"`
	MsgRateOut           float64 `json:"msgRateOut"`
}

func (b *Broker) httpTopicStats(w http.ResponseWriter, r *http.Request, name TopicName) {
	t, err := b.existingTopic(r.Context(), name)
	if err != nil {
		adminError(w, err)
		return
	}
	writeJSON(w, b.statsOf(t))
}

// statsOf is a loaded topic's stats.
func (b *Broker) statsOf(t *topic) topicStatsJSON {
	rates := t.rates.current()
	st := topicStatsJSON{MsgRateIn: rates.MsgRateIn, MsgRateOut: rates.MsgRateOut,
		MsgThroughputIn: rates.ThroughputIn, MsgThroughputOut: rates.ThroughputOut, MsgDropRate: rates.MsgDropRate,
		MsgInCounter: t.stats.msgsIn.Load(), MsgOutCounter: t.stats.msgsOut.Load(),
		BytesInCounter: t.stats.bytesIn.Load(), BytesOutCounter: t.stats.bytesOut.Load(),
		StorageSize: t.ml.Size(), Publishers: t.publisherStats(), Subscriptions: t.subscriptionStats(),
		Replication: map[string]struct{}{}, DeduplicationStatus: "Disabled"}
	if rates.MsgRateIn > 0 {
		st.AverageMsgSize = rates.ThroughputIn / rates.MsgRateIn
	}
	if b.cfg.BrokerDeduplicationEnabled {
		st.DeduplicationStatus = "Enabled"
	}
	for _, s := range st.Subscriptions {
		if s.IsDurable {
			st.BacklogSize = max(st.BacklogSize, s.BacklogSize) // what the slowest subscription holds
		}
	}
	return st
}

func (t *topic) publisherStats() []publisherStatsJSON {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]publisherStatsJSON, 0, len(t.producers))
	for p := range t.producers {
		mode := "Shared"
		if t.exclusive == p {
			mode = "Exclusive"
		}
		out = append(out, publisherStatsJSON{AccessMode: mode, ProducerID: p.id, ProducerName: p.name,
			Address: p.conn.t.RemoteAddr().String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerName < out[j].ProducerName })
	return out
}

// subscriptionStats covers the subscriptions, the durable cursors without
// one (no consumer since the topic loaded) and the readers.
func (t *topic) subscriptionStats() map[string]subscriptionStatsJSON {
	t.mu.Lock()
	subs := make([]*subscription, 0, len(t.subs)+len(t.readers))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	for s := range t.readers {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	out := make(map[string]subscriptionStatsJSON, len(subs))
	for _, s := range subs {
		out[s.name] = s.stats()
	}
	for _, c := range t.subscriptionCursors() {
		if _, ok := out[c.Name()]; ok || !c.Durable() {
			continue
		}
		backlog := c.Backlog()
		out[c.Name()] = subscriptionStatsJSON{Type: "None", IsDurable: true, MsgBacklog: backlog,
			MsgBacklogNoDelayed: backlog, BacklogSize: c.BacklogSize(), Consumers: []consumerStatsJSON{}}
	}
	return out
}

// stats is the subscription's part of the topic stats.
func (s *subscription) stats() subscriptionStatsJSON {
	st := s.consumerStats()
	st.MsgBacklog = s.cursor.Backlog()
	st.MsgBacklogNoDelayed = max(st.MsgBacklog-st.MsgDelayed, 0)
	st.BacklogSize = s.cursor.BacklogSize()
	return st
}

// consumerCounts are one consumer's permits and unacknowledged messages.
func (s *subscription) consumerCounts(c *consumer) (permits, unacked int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.permits, c.unacked
}

func (s *subscription) consumerStats() subscriptionStatsJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := subscriptionStatsJSON{Type: s.subType.String(), IsDurable: s.durable, MsgDelayed: int64(len(s.delayed)),
		UnackedMessages: s.unacked, BlockedOnUnackedMsgs: s.blockedOnUnacked,
		Consumers: make([]consumerStatsJSON, 0, len(s.consumers))}
	for _, c := range s.consumers {
		st.Consumers = append(st.Consumers, consumerStatsJSON{ConsumerName: c.name, AvailablePermits: c.permits,
			UnackedMessages: c.unacked, BlockedOnUnackedMsgs: c.blockedOnUnacked, Address: c.conn.t.RemoteAddr().String()})
	}
	exclusive := s.subType == pb.CommandSubscribe_Exclusive || s.subType == pb.CommandSubscribe_Failover
	if active := s.activeLocked(); exclusive && len(active) > 0 {
		st.ActiveConsumerName = active[0].name
	}
	return st
}

type internalStatsJSON struct {
	EntriesAddedCounter    int64                      `json:"entriesAddedCounter"`
	NumberOfEntries        int64                      `json:"numberOfEntries"`
	TotalSize              int64                      `json:"totalSize"`
	CurrentLedgerEntries   int64                      `json:"currentLedgerEntries"`
	CurrentLedgerSize      int64                      `json:"currentLedgerSize"`
	WaitingCursorsCount    int                        `json:"waitingCursorsCount"`
	PendingAddEntriesCount int                        `json:"pendingAddEntriesCount"`
	LastConfirmedEntry     string                     `json:"lastConfirmedEntry"`
	State                  string                     `json:"state"`
	Ledgers                []ledgerInfoJSON           `json:"ledgers"`
	Cursors                map[string]cursorStatsJSON `json:"cursors"`
	SchemaLedgers          []struct{}                 `json:"schemaLedgers"`
	CompactedLedger        compactedLedgerJSON        `json:"compactedLedger"`
}

type ledgerInfoJSON struct {
	LedgerID        int64  `json:"ledgerId"`
	Entries         int64  `json:"entries"`
	Size            int64  `json:"size"`
	Timestamp       int64  `json:"timestamp"`
	Offloaded       bool   `json:"offloaded"`
	MetaData        string `json:"metadata,omitempty"`
	UnderReplicated bool   `json:"underReplicated"`
}

type compactedLedgerJSON struct {
	LedgerID int64 `json:"ledgerId"`
	Entries  int64 `json:"entries"`
	Size     int64 `json:"size"`
}

type cursorStatsJSON struct {
	MarkDeletePosition                       string           `json:"markDeletePosition"`
	ReadPosition                             string           `json:"readPosition"`
	WaitingReadOp                            bool             `json:"waitingReadOp"`
	PendingReadOps                           int              `json:"pendingReadOps"`
	MessagesConsumedCounter                  int64            `json:"messagesConsumedCounter"`
	CursorLedger                             int64            `json:"cursorLedger"`
	CursorLedgerLastEntry                    int64            `json:"cursorLedgerLastEntry"`
	IndividuallyDeletedMessages              string           `json:"individuallyDeletedMessages"`
	State                                    string           `json:"state"`
	NumberOfEntriesSinceFirstNotAckedMessage int64            `json:"numberOfEntriesSinceFirstNotAckedMessage"`
	TotalNonContiguousDeletedMessagesRange   int              `json:"totalNonContiguousDeletedMessagesRange"`
	Properties                               map[string]int64 `json:"properties"`
}

func (b *Broker) httpInternalStats(w http.ResponseWriter, r *http.Request, name TopicName) {
	t, err := b.existingTopic(r.Context(), name)
	if err != nil {
		adminError(w, err)
		return
	}
	st, err := internalStatsOf(r.Context(), t)
	if err != nil {
		adminError(w, err)
		return
	}
	writeJSON(w, st)
}

func internalStatsOf(ctx context.Context, t *topic) (internalStatsJSON, error) {
	last := t.ml.LastConfirmed()
	st := internalStatsJSON{NumberOfEntries: t.ml.Entries(), TotalSize: t.ml.Size(),
		CurrentLedgerEntries: max(last.EntryID+1, 0), LastConfirmedEntry: last.String(), State: "LedgerOpened",
		Ledgers: []ledgerInfoJSON{}, Cursors: map[string]cursorStatsJSON{}, SchemaLedgers: []struct{}{},
		CompactedLedger: compactedLedgerJSON{LedgerID: -1, Entries: -1, Size: -1}}
	if ll, ok := t.ml.(managedledger.LedgerLister); ok {
		for _, l := range ll.Ledgers() {
			st.Ledgers = append(st.Ledgers, ledgerInfoJSON{LedgerID: l.ID, Entries: l.Entries, Size: l.Size, Timestamp: l.Timestamp})
		}
		if n := len(st.Ledgers); n > 0 {
			st.CurrentLedgerSize = st.Ledgers[n-1].Size
		}
	}
	if t.terminated.Load() {
		st.State = "Terminated"
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

func cursorStatsOf(ctx context.Context, ml managedledger.ManagedLedger, c managedledger.Cursor) (cursorStatsJSON, error) {
	read := c.ReadPosition()
	ranges, sinceUnacked, err := ackedRanges(ctx, ml, c, read)
	if err != nil {
		return cursorStatsJSON{}, err
	}
	return cursorStatsJSON{MarkDeletePosition: c.MarkDeletePosition().String(), ReadPosition: read.String(),
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
