package broker

// Topic compaction, on a topic (compactor.go has the algorithm).
// Behavior:
//   - The compaction cursor "__compaction" (Pulsar's name) holds the
//     topic's entries until a compaction has read them: its mark-delete
//     position is the compaction horizon, and its property
//     CompactedTopicLedger names the compacted ledger (a side ledger of
//     the managed-ledger factory). Both change in one cursor write, so a
//     crash leaves the old pair or the new one.
//   - A topic whose compaction threshold is set gets the cursor as it
//     loads (or at the next retention check once the threshold is set), at
//     the earliest entry, so nothing is trimmed before a run reads it.
//   - A run is started by the admin API (PUT .../compaction; 409 while one
//     runs; on a partitioned topic, one per partition, on its owner) or by the compaction monitor once the compaction cursor's
//     backlog passes the topic's compactionThreshold (topic policy, else
//     namespace policy, else brokerServiceCompactionThresholdInBytes; 0
//     turns it off), checked every brokerServiceCompactionMonitorIntervalInSeconds.
//   - Its status (NOT_RUN, RUNNING, SUCCESS, ERROR with the error) is kept
//     in memory for GET .../compaction, as Pulsar keeps it on the owner.
//   - The compacted ledger replaced by a run is deleted once the new one is
//     stored; a reader still on the old one fails its read and reads again
//     from the new one.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/txn"
	"github.com/magnetar-io/magnetar/managedledger"
)

const (
	compactionCursor   = "__compaction"
	compactedLedgerKey = "CompactedTopicLedger"
	// compactionReadBatch bounds what one read of the input brings.
	compactionReadBatch = 100
)

// errCompactionRunning: a compaction of the topic is under way.
var errCompactionRunning = errors.New("compaction already in progress")

// compactedView is a stored compaction: the compacted ledger and the
// horizon it covers.
type compactedView struct {
	ledgerID int64
	horizon  managedledger.Position
	reader   managedledger.SideReader
	last     int64 // the compacted ledger's last entry id (-1: empty)
}

// compactionState is a topic's compaction. mu guards every field; it is
// never held across storage calls.
type compactionState struct {
	mu      sync.Mutex
	running bool
	status  string // Pulsar's LongRunningProcessStatus; "" is NOT_RUN
	lastErr string
	view    *compactedView
	loaded  bool // view was read from the cursor (nil: no compaction stored)
	// Counters for /metrics (Pulsar's pulsar_compaction_*): runs that
	// succeeded and failed, messages removed over all runs.
	succeeded, failed, removed int64
}

func (b *Broker) sideLedgers() (managedledger.SideLedgers, bool) {
	s, ok := b.ledgers.(managedledger.SideLedgers)
	return s, ok
}

// TriggerCompaction starts a compaction of the topic, or of each
// partition of a partitioned topic (admin.Compactions).
func (b *Broker) TriggerCompaction(ctx context.Context, name string) error {
	if n, err := b.Partitions(ctx, name); err == nil && n > 0 {
		return b.compactPartitions(ctx, name, n)
	}
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return err
	}
	if !t.name.Persistent() {
		return admin.Errorf(admin.ErrNotSupported, "compaction of %s: only persistent topics are compacted", name)
	}
	if _, ok := b.sideLedgers(); !ok {
		return admin.Errorf(admin.ErrNotSupported, "compaction of %s: this storage keeps no compacted ledgers", name)
	}
	return t.startCompaction()
}

// compactPartitions starts a compaction of each of a partitioned topic's
// n partitions, here or through the admin API of the partition's owner,
// as Pulsar does. One already compacting is left to finish (its 409 is
// not an error here).
func (b *Broker) compactPartitions(ctx context.Context, name string, n int) error {
	base, err := ParseTopicName(name)
	if err != nil {
		return err
	}
	for i := range n {
		p := partitionName(base, i)
		res, err := b.lookup(ctx, p, false)
		if err != nil {
			return fmt.Errorf("compaction of %s: %w", p, err)
		}
		if !res.Self {
			err = b.peers.RemoteCompact(ctx, res, topicPath(p))
		} else {
			err = b.TriggerCompaction(ctx, p.String())
		}
		if err != nil && admin.StatusOf(err) != http.StatusConflict {
			return fmt.Errorf("compaction of %s: %w", p, err)
		}
	}
	return nil
}

// CompactionStatus is the topic's last compaction's status.
func (b *Broker) CompactionStatus(ctx context.Context, name string) (admin.LongRunningStatus, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.LongRunningStatus{}, err
	}
	c := &t.compaction
	c.mu.Lock()
	defer c.mu.Unlock()
	st := admin.LongRunningStatus{Status: c.status, LastError: c.lastErr}
	if st.Status == "" {
		st.Status = "NOT_RUN"
	}
	return st, nil
}

// startCompaction runs a compaction in the background.
func (t *topic) startCompaction() error {
	c := &t.compaction
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return admin.Errorf(resources.ErrConflict, "compaction of %s: %v", t.name, errCompactionRunning)
	}
	c.running, c.status, c.lastErr = true, "RUNNING", ""
	c.mu.Unlock()
	go func() {
		start := time.Now()
		removed, err := t.compact(context.Background())
		c.mu.Lock()
		c.running = false
		if err != nil {
			c.status, c.lastErr = "ERROR", err.Error()
			c.failed++
		} else {
			c.status = "SUCCESS"
			c.succeeded++
			c.removed += removed
		}
		c.mu.Unlock()
		if err != nil {
			t.b.log.Warn("topic compaction failed", "topic", t.name.String(), "err", err)
			return
		}
		t.b.log.Info("topic compacted", "topic", t.name.String(), "took", time.Since(start).Round(time.Millisecond).String())
	}()
	return nil
}

// compact runs one compaction: phase one finds each key's last message,
// phase two writes the survivors to a new compacted ledger, then the
// compaction cursor moves to the new horizon naming it.
func (t *topic) compact(ctx context.Context) (removed int64, err error) {
	side, ok := t.b.sideLedgers()
	if !ok {
		return 0, errors.New("this storage keeps no compacted ledgers")
	}
	cur, err := t.ml.OpenCursor(ctx, compactionCursor, managedledger.CursorOptions{Initial: managedledger.Earliest})
	if err != nil {
		return 0, fmt.Errorf("open the compaction cursor: %w", err)
	}
	prev, err := t.compactedView(ctx)
	if err != nil {
		return 0, err
	}
	from, end := cur.MarkDeletePosition(), t.ml.LastConfirmed()
	if _, capped := t.txns.Load().readLimit(); capped {
		// A transaction is open: its messages and what follows them
		// are not readable yet, so not compacted either; the next run
		// compacts once it ended.
		return 0, nil
	}
	if prev != nil && end.Compare(prev.horizon) <= 0 {
		return 0, nil // nothing added since
	}
	latest, err := t.compactionPhaseOne(ctx, prev, from, end)
	if err != nil {
		return 0, err
	}
	w, err := side.CreateSideLedger(ctx, t.ml.Name())
	if err != nil {
		return 0, err
	}
	if removed, err = t.compactionPhaseTwo(ctx, prev, from, end, latest, w); err != nil {
		_ = w.Close(ctx)
		_ = side.DeleteSideLedger(ctx, w.ID())
		return 0, err
	}
	props := map[string]int64{compactedLedgerKey: w.ID()}
	if err := cur.MarkDeleteWithProperties(ctx, end, props); err != nil {
		_ = side.DeleteSideLedger(ctx, w.ID())
		return 0, fmt.Errorf("store the compaction horizon %v: %w", end, err)
	}
	next, err := openCompactedView(ctx, side, w.ID(), end)
	if err != nil {
		return 0, err
	}
	t.compaction.mu.Lock()
	t.compaction.view, t.compaction.loaded = next, true
	t.compaction.mu.Unlock()
	if prev != nil {
		if err := side.DeleteSideLedger(ctx, prev.ledgerID); err != nil {
			t.b.log.Warn("old compacted ledger not deleted: it stays until deleted by hand", "topic", t.name.String(),
				"ledger", prev.ledgerID, "err", err)
		}
	}
	return removed, nil
}

// compactionPhaseOne maps each key to its last message in the input
// (tombstones remove the key).
func (t *topic) compactionPhaseOne(ctx context.Context, prev *compactedView, from, end managedledger.Position) (map[string]msgRef, error) {
	latest := map[string]msgRef{}
	err := t.scanCompactionInput(ctx, prev, from, end, func(e managedledger.Entry, p parsedEntry) error {
		for i, m := range p.messages {
			switch {
			case !m.hasKey:
			case m.tombstone:
				delete(latest, m.key)
			default:
				latest[m.key] = msgRef{pos: e.Position, index: int32(i)}
			}
		}
		return nil
	})
	return latest, err
}

// compactionPhaseTwo writes what survives to w; removed counts the
// messages it left out (placeholders of earlier runs not counted again).
func (t *topic) compactionPhaseTwo(ctx context.Context, prev *compactedView, from, end managedledger.Position,
	latest map[string]msgRef, w managedledger.SideWriter) (removed int64, err error) {
	err = t.scanCompactionInput(ctx, prev, from, end, func(e managedledger.Entry, p parsedEntry) error {
		keep := func(i int) bool {
			m := p.messages[i]
			return !m.hasKey || latest[m.key] == msgRef{pos: e.Position, index: int32(i)}
		}
		for i, m := range p.messages {
			if !m.placeholder && !keep(i) {
				removed++
			}
		}
		out, ok, err := compactedEntry(e, p, keep)
		if err != nil || !ok {
			return err
		}
		return w.Append(ctx, encodeCompacted(out))
	})
	if err != nil {
		return 0, err
	}
	return removed, w.Close(ctx)
}

// scanCompactionInput calls fn on the previous compacted ledger's entries,
// then on the topic's entries after from up to end.
func (t *topic) scanCompactionInput(ctx context.Context, prev *compactedView, from, end managedledger.Position,
	fn func(managedledger.Entry, parsedEntry) error) error {
	if prev != nil {
		for first := int64(0); first <= prev.last; first += compactionReadBatch {
			recs, err := prev.reader.Read(ctx, first, min(first+compactionReadBatch-1, prev.last))
			if err != nil {
				return fmt.Errorf("read compacted ledger %d: %w", prev.ledgerID, err)
			}
			for _, r := range recs {
				e, err := decodeCompacted(r)
				if err != nil {
					return fmt.Errorf("compacted ledger %d: %w", prev.ledgerID, err)
				}
				if err := fn(e, t.b.parseForCompaction(ctx, e.Data)); err != nil {
					return err
				}
			}
		}
	}
	cur, err := t.ml.NewNonDurableCursor(from)
	if err != nil {
		return fmt.Errorf("read the topic for compaction: %w", err)
	}
	defer cur.Close(ctx)
	for {
		entries, err := cur.ReadEntries(ctx, compactionReadBatch, 4<<20)
		if err != nil {
			return fmt.Errorf("read the topic for compaction: %w", err)
		}
		if len(entries) == 0 {
			return nil
		}
		for _, e := range entries {
			if e.Position.Compare(end) > 0 {
				return nil
			}
			p := t.b.parseForCompaction(ctx, e.Data)
			if p.md != nil && (p.md.TxnidMostBits != nil || p.md.TxnidLeastBits != nil) &&
				t.txns.Load().isAborted(txn.ID{Most: p.md.GetTxnidMostBits(), Least: p.md.GetTxnidLeastBits()}) {
				// An aborted transaction's message: dropped as markers
				// are, and none of its messages counts for its key.
				p = parsedEntry{prefix: p.prefix, md: p.md, marker: true}
			}
			if err := fn(e, p); err != nil {
				return err
			}
		}
	}
}

// compactedView returns the topic's stored compaction (nil when none),
// reading it from the compaction cursor once.
func (t *topic) compactedView(ctx context.Context) (*compactedView, error) {
	c := &t.compaction
	c.mu.Lock()
	v, loaded := c.view, c.loaded
	c.mu.Unlock()
	if loaded {
		return v, nil
	}
	cur := t.compactionCursorOf()
	if cur == nil {
		return nil, nil // never compacted, nor a threshold set (openCompactionCursor)
	}
	id, ok := cur.Properties()[compactedLedgerKey]
	if !ok { // created for a threshold, not compacted yet
		return nil, nil
	}
	side, ok := t.b.sideLedgers()
	if !ok {
		return nil, errors.New("this storage keeps no compacted ledgers")
	}
	v, err := openCompactedView(ctx, side, id, cur.MarkDeletePosition())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if !c.loaded {
		c.view, c.loaded = v, true
	}
	v = c.view
	c.mu.Unlock()
	return v, nil
}

func openCompactedView(ctx context.Context, side managedledger.SideLedgers, id int64, horizon managedledger.Position) (*compactedView, error) {
	r, err := side.OpenSideLedger(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("open compacted ledger %d: %w", id, err)
	}
	return &compactedView{ledgerID: id, horizon: horizon, reader: r, last: r.LastEntryID()}, nil
}

// openCompactionCursor creates the compaction cursor of a topic whose
// compaction threshold is set, at the earliest entry still stored, if it
// has none. Without it a topic with no subscription and no retention lets
// its full ledgers go before the first compaction, which then compacts
// nothing; so, as Pulsar does (#11672), the cursor is there before the
// topic is served, or from the retention check after a threshold is set.
func (t *topic) openCompactionCursor(ctx context.Context) error {
	if !t.name.Persistent() || t.compactionCursorOf() != nil {
		return nil
	}
	if _, ok := t.b.sideLedgers(); !ok || t.compactionThreshold(ctx) <= 0 {
		return nil
	}
	if _, err := t.ml.OpenCursor(ctx, compactionCursor, managedledger.CursorOptions{Initial: managedledger.Earliest}); err != nil {
		return fmt.Errorf("topic %s: compaction cursor: %w", t.name, err)
	}
	return nil
}

// compactionCursorOf is the topic's compaction cursor, nil if it has none.
func (t *topic) compactionCursorOf() managedledger.Cursor {
	for _, c := range t.ml.Cursors() {
		if c.Name() == compactionCursor {
			return c
		}
	}
	return nil
}

// compactionThreshold is the backlog (bytes) of the compaction cursor
// that starts a compaction: the topic's policy, else the namespace's,
// else the broker's (0: none).
func (t *topic) compactionThreshold(ctx context.Context) int64 {
	if v, ok := topicPolicy[int64](ctx, t, "compactionThreshold"); ok {
		return v
	}
	return compactionThresholdOf(t.b, t.namespacePolicies(ctx))
}

// compactionThresholdOf is the namespace's threshold, else the broker's.
func compactionThresholdOf(b *Broker, ns resources.Policies) int64 {
	if ns.CompactionThreshold != nil {
		return *ns.CompactionThreshold
	}
	return b.cfg.CompactionThreshold
}

// checkCompactions starts a compaction on every loaded persistent topic
// whose unread bytes passed its threshold (the compaction monitor).
func (b *Broker) checkCompactions(ctx context.Context) {
	if _, ok := b.sideLedgers(); !ok {
		return
	}
	for t := range b.topicPass() {
		if !t.name.Persistent() {
			continue
		}
		limit := t.compactionThreshold(ctx)
		if limit <= 0 {
			continue
		}
		backlog := t.ml.Size() // never compacted: everything is unread
		if c := t.compactionCursorOf(); c != nil {
			backlog = c.BacklogSize()
		}
		if backlog < limit {
			continue
		}
		if err := t.startCompaction(); err == nil {
			b.log.Info("compaction started: the topic's uncompacted backlog passed its threshold", "topic", t.name.String(),
				"backlog_bytes", strconv.FormatInt(backlog, 10), "threshold_bytes", strconv.FormatInt(limit, 10))
		}
	}
}
