package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spaolacci/murmur3"

	"github.com/magnetar-io/magnetar/broker/txn"
	"github.com/magnetar-io/magnetar/internal/invariants"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/markers"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// subscription dispatches its cursor's entries to its consumers by their
// permits. Exclusive and Failover send to one active consumer; Shared
// spreads entries round-robin over consumers with permits; Key_Shared
// sends each key's entries to that key's consumer.
//
// Behaviour:
//   - FLOW permits count messages: a batch entry of N messages takes N.
//   - One read is outstanding at a time; when caught up it waits on the
//     managed ledger for the next add (no polling).
//   - The cursor only moves forward while dispatching. Entries read but not
//     deliverable now (no permits, or their key's consumer is full) and
//     entries to redeliver (consumer closed, redelivery asked) go to the
//     replay set; each round first delivers what it can from the replay
//     set, in position order, then reads new entries. So a slow Key_Shared
//     consumer holds back only its own keys, and nothing is skipped.
//   - An entry in flight to one consumer is not sent to another until that
//     consumer closes or asks for redelivery; then it goes out again with
//     its redelivery count raised.
//   - A seek bumps the read generation: a read that was already running
//     when the cursor was reset is dropped (and the cursor moved back over
//     it), never delivered.
//   - Unacknowledged-message limits (Shared and Key_Shared, as Pulsar): a
//     consumer with maxUnacked messages in flight, or a subscription with
//     maxUnacked in flight over all its consumers, is blocked; it is
//     unblocked once acknowledgements or redeliveries bring the count to
//     half the limit. Counts are messages (a batch of N counts N), kept
//     by addInflightLocked and removeInflightLocked, the only places the
//     in-flight map changes.
//
// Lock rules: mu guards every field below it. Cursor reads and connection
// writes happen after mu is released. sendMu is held while a dispatched
// batch is written (taken before mu is released, so the order is mu, then
// sendMu): disconnectConsumers takes it after detaching the consumers, so
// no MESSAGE assigned before a SEEK reaches the client after the SEEK's
// CLOSE_CONSUMER and SUCCESS.
type subscription struct {
	sendMu sync.Mutex
	topic  *topic
	name   string
	// partition is the topic's partition index, -1 if it is not a
	// partition (activeIndexLocked).
	partition int
	// subType is the pb.CommandSubscribe_SubType (kind); it changes only
	// while the subscription has no consumer (addConsumer).
	subType atomic.Int32
	cursor  managedledger.Cursor
	durable bool
	// replicated: the subscription follows its progress in the other
	// clusters (replsubs.go); set once, from the cursor's properties.
	replicated atomic.Bool

	mu          sync.Mutex
	consumers   []*consumer
	next        int  // Shared: round-robin start
	reading     bool // a read is outstanding, or its entries are being written
	gen         uint64
	dispatching bool // a dispatch loop runs; others ask it to go again
	again       bool
	// limiter is the subscription dispatch rate (subdispatchrate.go);
	// rateWait: a timer will dispatch once a rate allows.
	limiter  dispatchLimiter
	rateWait bool
	// lastActive (unix nanoseconds) is when a consumer last joined or
	// left (subexpiry.go).
	lastActive atomic.Int64
	inflight   map[managedledger.Position]inflightEntry
	replay     map[managedledger.Position]int32 // position → key slot
	// replaying holds the replay positions taken by the read under way,
	// with their slots, to put back if that read fails (one read at a time).
	replaying   map[managedledger.Position]int32
	redelivered map[managedledger.Position]uint32
	lastRead    *managedledger.Position // last entry read from the cursor
	delayed     delayedQueue            // entries held until their deliver_at_time
	delayTimer  *time.Timer
	lastRelease time.Time // when releaseDue last ran: the tick time spaces its runs
	closed      bool
	// unacked counts the messages in flight over all consumers;
	// blockedOnUnacked is set at maxUnacked (0: no limit) until half.
	unacked          int64
	maxUnacked       int64
	blockedOnUnacked bool
	// messagesPerEntry is a moving average of the messages in the entries
	// dispatched (batches hold many), to size reads by permits; 0 until
	// the first entry.
	messagesPerEntry float64
	// snapshots are the replicated-subscription snapshots read and not yet
	// passed by the mark-delete position, oldest first (replsubs.go).
	snapshots []markers.SnapshotData

	// pending holds acknowledgements made in open transactions
	// (pendingack.go): nil until the first; pendingInit serializes its
	// creation.
	pending     atomic.Pointer[pendingAcks]
	pendingInit sync.Mutex
}

type inflightEntry struct {
	c        *consumer
	slot     int32
	messages int32 // messages in the entry, for the unacked counts
}

// maxReplay bounds the entries held back for busy consumers; past it no
// new entries are read until consumers catch up.
const maxReplay = 10000

// maxPermits caps a consumer's permits: a FLOW of 2^32-1 must not push the
// whole backlog into one connection's write queue.
const maxPermits = 1 << 16

func newSubscription(t *topic, name string, subType pb.CommandSubscribe_SubType, cursor managedledger.Cursor, durable bool) *subscription {
	partition := -1
	if _, i, ok := partitionOf(t.name); ok {
		partition = i
	}
	s := &subscription{topic: t, name: name, cursor: cursor, durable: durable, partition: partition,
		inflight: map[managedledger.Position]inflightEntry{}, replay: map[managedledger.Position]int32{},
		replaying: map[managedledger.Position]int32{}, redelivered: map[managedledger.Position]uint32{}}
	s.subType.Store(int32(subType))
	s.replicated.Store(isReplicatedCursor(cursor))
	s.lastActive.Store(time.Now().UnixNano())
	if r := t.subRate.Load(); r != nil {
		s.limiter.setRate(*r, time.Now()) // the topic's last refresh's, until the next
	}
	if err := s.restorePendingAcks(); err != nil {
		// Not restored, the held acknowledgements would be lost: the
		// transaction would commit without them. Loud, and the
		// subscription works without them (its entries are delivered
		// again, which at-least-once consumers handle).
		t.b.log.Error("pending transaction acknowledgements not restored", "topic", t.name.String(), "subscription", name, "err", err)
	}
	return s
}

// kind is the subscription's type.
func (s *subscription) kind() pb.CommandSubscribe_SubType {
	return pb.CommandSubscribe_SubType(s.subType.Load())
}

// errSubscriptionTypeBusy refuses a consumer of another type than the
// subscription's connected ones (Pulsar's SubscriptionBusyException,
// answered ConsumerBusy).
var errSubscriptionTypeBusy = errors.New("subscription is of a different type")

// addConsumer attaches c, enforcing the subscription type, and takes
// maxUnacked (the limit in effect when c subscribed) for the subscription.
// A subscription without consumers takes c's type, as Pulsar's replaces
// its dispatcher: what it holds unacknowledged is delivered the new way.
func (s *subscription) addConsumer(c *consumer, subType pb.CommandSubscribe_SubType, maxUnacked int64) error {
	s.lastActive.Store(time.Now().UnixNano())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("subscription %s is closed", s.name)
	}
	if subType != s.kind() {
		if len(s.consumers) > 0 {
			return fmt.Errorf("subscription %s is %s, not %s: %w", s.name, s.kind(), subType, errSubscriptionTypeBusy)
		}
		s.subType.Store(int32(subType))
	}
	s.maxUnacked = maxUnacked
	if s.kind() == pb.CommandSubscribe_Exclusive && len(s.consumers) > 0 {
		return errConsumerBusy
	}
	var active *consumer
	if len(s.consumers) > 0 {
		active = s.consumers[s.activeIndexLocked()]
		if s.kind() == pb.CommandSubscribe_Key_Shared && s.lastRead != nil {
			at := *s.lastRead
			c.joinedAfter = &at
		}
	}
	s.consumers = append(s.consumers, c)
	if s.kind() == pb.CommandSubscribe_Failover || s.kind() == pb.CommandSubscribe_Key_Shared {
		// Name order: the Failover active consumer, and a Key_Shared
		// auto-split that is stable while the consumers are.
		sort.SliceStable(s.consumers, func(i, j int) bool { return s.consumers[i].name < s.consumers[j].name })
	}
	if s.kind() == pb.CommandSubscribe_Failover {
		if active != nil && s.consumers[s.activeIndexLocked()] != active {
			// The new consumer is now the active one: what the old one
			// holds goes out again, in order, to the new one.
			s.redeliverLocked(active, nil, false)
		}
	}
	return nil
}

var errConsumerBusy = errors.New("exclusive subscription already has a consumer")

// removeConsumer detaches c and sends what it had in flight again. A
// reader's subscription ends with its consumer.
func (s *subscription) removeConsumer(c *consumer) {
	s.lastActive.Store(time.Now().UnixNano())
	s.mu.Lock()
	before := s.singleActiveLocked()
	for i, x := range s.consumers {
		if x == c {
			s.consumers = append(s.consumers[:i], s.consumers[i+1:]...)
			break
		}
	}
	s.redeliverLocked(c, nil, false)
	if after := s.singleActiveLocked(); before != nil && before != c && after != before {
		// On a partition the active consumer moves when another leaves:
		// what the old one holds goes out again, in order, to the new one.
		s.redeliverLocked(before, nil, false)
	}
	last := len(s.consumers) == 0
	s.mu.Unlock()
	if last && !s.durable {
		s.topic.removeReader(s)
		s.close()
		_ = s.cursor.Close(context.Background())
		return
	}
	if last && !s.topic.name.Persistent() {
		s.topic.removeSubscription(s) // it holds nothing to come back to
		return
	}
	s.notifyActiveConsumers()
	s.dispatch()
}

// closeIfOnly marks the subscription closed if c is its only consumer
// (unsubscribe), in one step so no consumer can join in between.
func (s *subscription) closeIfOnly(c *consumer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.consumers) > 1 || (len(s.consumers) == 1 && s.consumers[0] != c) {
		return fmt.Errorf("subscription %s has other consumers: %w", s.name, errSubscriptionBusy)
	}
	s.closed = true
	return nil
}

// flow adds permits to c and dispatches.
func (s *subscription) flow(c *consumer, permits uint32) {
	s.mu.Lock()
	c.permits = min(c.permits+int64(permits), maxPermits)
	s.mu.Unlock()
	s.dispatch()
}

// activeLocked returns the consumers entries may go to now.
func (s *subscription) activeLocked() []*consumer {
	if len(s.consumers) == 0 {
		return nil
	}
	if s.kind() == pb.CommandSubscribe_Shared || s.kind() == pb.CommandSubscribe_Key_Shared {
		return s.consumers
	}
	i := s.activeIndexLocked()
	return s.consumers[i : i+1]
}

// singleActiveLocked is the active consumer of a Failover subscription,
// nil for other types or without consumers.
func (s *subscription) singleActiveLocked() *consumer {
	if s.kind() != pb.CommandSubscribe_Failover || len(s.consumers) == 0 {
		return nil
	}
	return s.consumers[s.activeIndexLocked()]
}

// activeIndexLocked is the index of the single active consumer among the
// consumers (in name order), as Pulsar picks it: on a partition of a
// partitioned topic the partition index modulo their number, so that the
// partitions spread over the consumers of a Failover subscription;
// otherwise the first. There must be a consumer.
func (s *subscription) activeIndexLocked() int {
	if s.partition < 0 {
		return 0
	}
	return s.partition % len(s.consumers)
}

func (s *subscription) permitsLocked() int64 {
	if s.blockedOnUnacked {
		return 0
	}
	var n int64
	for _, c := range s.activeLocked() {
		if s.canTakeLocked(c) {
			n += c.permits
		}
	}
	return n
}

// dispatch runs dispatch rounds until nothing more can go out now. It
// loops rather than recursing: a read that completes synchronously asks
// the running loop to go again.
func (s *subscription) dispatch() {
	s.mu.Lock()
	if s.dispatching {
		s.again = true
		s.mu.Unlock()
		return
	}
	s.dispatching = true
	for {
		s.again = false
		read := s.startReadLocked()
		s.mu.Unlock()
		if read != nil {
			read()
		}
		s.mu.Lock()
		if !s.again {
			break
		}
	}
	s.dispatching = false
	s.mu.Unlock()
}

// startReadLocked starts the next read, from the replay set first, and
// returns it to run without the lock (nil when there is nothing to do).
func (s *subscription) startReadLocked() func() {
	// A cursor read waiting for new entries must not hold back entries
	// waiting in the replay set.
	if s.reading && len(s.replay) > 0 && s.cursor.CancelPendingRead() {
		s.reading = false
	}
	permits := s.permitsLocked()
	if s.closed || s.reading || permits <= 0 || !s.topic.name.Persistent() {
		return nil // a non-persistent topic's entries are pushed as they come
	}
	ratePermits, ok := s.ratePermitsLocked(time.Now())
	if !ok {
		return nil
	}
	n := s.readCountLocked(min(permits, ratePermits))
	gen := s.gen
	if positions := s.deliverableReplayLocked(n); len(positions) > 0 {
		s.reading = true
		return func() { s.readReplay(gen, positions) }
	}
	if len(s.replay) >= maxReplay {
		return nil
	}
	if len(s.replay) == 0 && s.topic.terminated.Load() && s.cursor.ReadPosition().Compare(s.topic.ml.LastConfirmed()) > 0 {
		return s.endOfTopicLocked() // nothing more will come: no read waits for it
	}
	if limit, capped := s.topic.txns.Load().readLimit(); capped && s.cursor.ReadPosition().Compare(limit) > 0 {
		return nil // an open transaction's entries are next: its end wakes us (txnbuffer.go)
	}
	s.reading = true
	return func() {
		s.cursor.ReadEntriesOrWait(n, int64(s.topic.b.cfg.MaxMessageSize), func(e []managedledger.Entry, err error) {
			s.onEntries(gen, true, e, err)
		})
	}
}

// readCountLocked is how many entries to read for permits messages. As
// Pulsar's dispatcher does, permits are divided by the average messages
// per entry: reading a full dispatcherMaxReadBatchSize of batch entries
// for a consumer that can take a few of them would park the rest in the
// replay set, from where each is read again. The first read, before any
// entry was seen, is of one entry (Pulsar starts from a high average
// for the same reason).
func (s *subscription) readCountLocked(permits int64) int {
	if s.messagesPerEntry == 0 {
		return 1
	}
	n := int64(float64(permits) / max(s.messagesPerEntry, 1))
	return int(max(1, min(n, int64(s.topic.b.settings().dispatcherBatch))))
}

// noteMessagesLocked updates the average messages per entry.
func (s *subscription) noteMessagesLocked(messages int) {
	const weight = 0.1 // about the last ten entries
	if s.messagesPerEntry == 0 {
		s.messagesPerEntry = float64(messages)
		return
	}
	s.messagesPerEntry += weight * (float64(messages) - s.messagesPerEntry)
}

// deliverableReplayLocked takes up to n replay positions, in order, whose
// consumer could take them now, out of the replay set.
func (s *subscription) deliverableReplayLocked(n int) []managedledger.Position {
	if len(s.replay) == 0 {
		return nil
	}
	s.releaseJoinedLocked()
	all := make([]managedledger.Position, 0, len(s.replay))
	for p := range s.replay {
		all = append(all, p)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Compare(all[j]) < 0 })
	var out []managedledger.Position
	blocked := map[int32]bool{}
	for _, p := range all {
		if len(out) == n {
			break
		}
		slot := s.replay[p]
		if s.kind() == pb.CommandSubscribe_Key_Shared {
			c := s.keyConsumerLocked(slot)
			if blocked[slot] || c == nil || !s.canTakeLocked(c) || (c.joinedAfter != nil && p.Compare(*c.joinedAfter) > 0) {
				blocked[slot] = true // later entries of this key wait behind it
				continue
			}
		}
		s.replaying[p] = slot
		delete(s.replay, p)
		out = append(out, p)
	}
	return out
}

// readReplay reads replayed positions by position, skipping those
// acknowledged meanwhile.
func (s *subscription) readReplay(gen uint64, positions []managedledger.Position) {
	wanted := positions[:0:0]
	for _, p := range positions {
		if !s.cursor.IsAcknowledged(p) {
			wanted = append(wanted, p)
		}
	}
	// One read for all: runs of consecutive entries go to the bookies
	// together. Entries trimmed meanwhile were acknowledged: left out.
	entries, err := s.readAt(context.Background(), wanted)
	if err != nil {
		s.replayFailed(gen, wanted, err)
		return
	}
	s.mu.Lock()
	clear(s.replaying)
	s.mu.Unlock()
	s.onEntries(gen, false, entries, nil)
}

// readAt reads entries by position: a compacted reader's from the
// compacted ledger up to the horizon (compactedread.go).
func (s *subscription) readAt(ctx context.Context, positions []managedledger.Position) ([]managedledger.Entry, error) {
	if c, ok := s.cursor.(*compactedCursor); ok {
		return c.readCompactedAt(ctx, positions)
	}
	return s.topic.ml.ReadEntriesAt(ctx, positions)
}

// replayFailed puts positions whose read failed back into the replay set
// (with their key slots) and tries again shortly: they are neither in
// flight nor anywhere else, so dropping them would lose them until the
// subscription is reloaded.
func (s *subscription) replayFailed(gen uint64, positions []managedledger.Position, err error) {
	s.mu.Lock()
	s.reading = false
	closed := s.closed
	for _, p := range positions {
		if slot, ok := s.replaying[p]; ok && gen == s.gen { // a seek since: they are not wanted
			s.replay[p] = slot
		}
	}
	clear(s.replaying)
	s.mu.Unlock()
	if closed || errors.Is(err, managedledger.ErrClosed) {
		return
	}
	s.topic.b.log.Warn("redelivery read failed; retrying", "topic", s.topic.name.String(), "subscription", s.name, "err", err)
	time.AfterFunc(100*time.Millisecond, s.dispatch)
}

// delivery is one MESSAGE to write after mu is released.
type delivery struct {
	c      *consumer
	entry  managedledger.Entry
	count  uint32
	ackSet []int64 // a partly acknowledged batch's remaining messages
	// messages is what the delivery takes of the consumer's permits.
	messages int32
	// epoch is the consumer's when the entry went to it (hasEpoch: it
	// subscribed or redelivered with one).
	epoch    uint64
	hasEpoch bool
}

func (s *subscription) onEntries(gen uint64, fromCursor bool, entries []managedledger.Entry, err error) {
	// Read (at most once a second) before the lock: assignLocked asks
	// for it per delayed entry, and a refresh may read the metadata cache.
	s.topic.delayedPolicy(time.Now())
	s.mu.Lock()
	if err != nil {
		s.reading = false
		closed := s.closed
		s.mu.Unlock()
		if !closed && !errors.Is(err, managedledger.ErrClosed) && !errors.Is(err, managedledger.ErrCursorNotFound) {
			s.topic.b.log.Warn("dispatch read failed; retrying", "topic", s.topic.name.String(), "subscription", s.name, "err", err)
			time.AfterFunc(100*time.Millisecond, s.dispatch)
		}
		return
	}
	if gen != s.gen || s.closed {
		// Read before a seek: drop it, and move the cursor back over it in
		// case it was read after the reset (Seek never goes before the
		// mark-delete position, so a pre-reset read cannot undo the seek).
		if fromCursor && len(entries) > 0 {
			s.cursor.Seek(entries[0].Position)
		}
		s.reading = false
		s.mu.Unlock()
		s.dispatch()
		return
	}
	if fromCursor {
		entries = s.topic.txns.Load().belowReadLimit(s.cursor, entries)
	}
	if fromCursor && len(entries) > 0 {
		last := entries[len(entries)-1].Position
		s.lastRead = &last
	}
	out, deferred, skipped := s.assignLocked(entries, fromCursor)
	s.tookFromRates(out)
	s.sendMu.Lock()
	s.mu.Unlock()
	// reading stays set until these writes are queued, so the next batch
	// (which may be read on another goroutine) cannot overtake them.
	trace := s.traced()
	for _, d := range out {
		if trace { // before the send, so the line is written before the client can have the message
			s.topic.b.log.Info("trace: reader delivery", "subscription", s.name, "consumer", d.c.id, "position", d.entry.Position.String())
		}
		d.c.conn.sendMessage(d.c.id, d.entry, wire.MessageHeader{RedeliveryCount: d.count, AckSet: d.ackSet,
			ConsumerEpoch: d.epoch, HasEpoch: d.hasEpoch})
	}
	s.sendMu.Unlock()
	if len(skipped) > 0 {
		// Markers are for brokers: acknowledged as read, never delivered.
		if err := s.cursor.Delete(context.Background(), skipped...); err != nil && !errors.Is(err, managedledger.ErrClosed) {
			s.topic.b.log.Warn("markers not acknowledged", "topic", s.topic.name.String(), "subscription", s.name, "err", err)
		}
		s.advanceSnapshots()
	}
	s.mu.Lock()
	s.reading = false
	s.mu.Unlock()
	if len(out) > 0 || deferred == 0 {
		s.dispatch()
	}
	// Otherwise entries were held back for busy consumers: wait for a
	// FLOW, an ack, a drained connection or a consumer change, which
	// dispatch again (going on now would spin on the same entries).
}

// assignLocked picks a consumer for each entry; entries nobody can take
// now go to the replay set. New entries (fromCursor) of a key with entries
// still waiting in the replay set wait behind them; entries taken from the
// replay set are already the oldest of their key. Markers are not
// delivered: they come back in skipped, to acknowledge (a replicated
// subscription keeps the snapshots among them).
func (s *subscription) assignLocked(entries []managedledger.Entry, fromCursor bool) (out []delivery, deferred int, skipped []managedledger.Position) {
	blocked := map[int32]bool{}
	if fromCursor {
		blocked = s.blockedSlotsLocked()
	}
	s.releaseJoinedLocked()
	for _, e := range entries {
		if _, ok := s.inflight[e.Position]; ok {
			continue // already with a consumer
		}
		info := entryInfoOf(e.Data)
		if info.marker != 0 {
			if info.marker == markers.Snapshot && s.replicated.Load() {
				if _, ent, err := wire.ParseStoredEntry(e.Data); err == nil {
					s.keepSnapshotLocked(ent.Payload())
				}
			}
			skipped = append(skipped, e.Position)
			continue
		}
		if info.hasTxn && s.topic.txns.Load().isAborted(info.txn) {
			skipped = append(skipped, e.Position) // aborted: acknowledged as read, never delivered
			continue
		}
		if s.pendingHeldLocked(e.Position) {
			continue // acknowledged in an open transaction: given out again only if it aborts (pendingack.go)
		}
		s.noteMessagesLocked(info.messages)
		slot := int32(-1)
		if s.kind() == pb.CommandSubscribe_Key_Shared {
			slot = keySlot(info.key)
		}
		if !info.deliverAt.IsZero() && s.delaysDelivery() && time.Now().Before(info.deliverAt) {
			s.holdLocked(e.Position, slot, info.deliverAt)
			continue
		}
		var c *consumer
		if s.kind() != pb.CommandSubscribe_Key_Shared || !blocked[slot] {
			c = s.pickLocked(e.Position, info, slot)
		}
		if c == nil {
			s.replay[e.Position] = slot
			blocked[slot] = true
			deferred++
			continue
		}
		ackSet, messages := s.remainingAckSet(e.Position, info.messages)
		c.permits -= int64(messages)
		s.addInflightLocked(e.Position, inflightEntry{c: c, slot: slot, messages: int32(messages)})
		s.topic.stats.msgsOut.Add(int64(messages))
		s.topic.stats.bytesOut.Add(int64(len(e.Data)))
		out = append(out, delivery{c: c, entry: e, count: s.redelivered[e.Position], ackSet: ackSet,
			messages: int32(messages), epoch: c.epoch, hasEpoch: c.hasEpoch})
	}
	return out, deferred, skipped
}

// traced reports whether the reader trace (Config.TraceReaders) logs this
// subscription: a reader's, with the trace on.
func (s *subscription) traced() bool { return !s.durable && s.topic.b.cfg.TraceReaders }

// releaseJoinedLocked lifts the recently-joined restriction of consumers
// once everything read before they joined is acknowledged.
func (s *subscription) releaseJoinedLocked() {
	var md *managedledger.Position
	for _, c := range s.consumers {
		if c.joinedAfter == nil {
			continue
		}
		if md == nil {
			p := s.cursor.MarkDeletePosition()
			md = &p
		}
		if md.Compare(*c.joinedAfter) >= 0 {
			c.joinedAfter = nil
		}
	}
}

// blockedSlotsLocked is the set of key slots with entries waiting in the
// replay set: their later entries must wait too, to keep per-key order.
// (Other types read new entries only once the replay set is delivered.)
func (s *subscription) blockedSlotsLocked() map[int32]bool {
	blocked := map[int32]bool{}
	for _, slot := range s.replay {
		blocked[slot] = true
	}
	return blocked
}

// pickLocked returns the consumer the entry goes to now, or nil when it
// must wait (no permits; for Key_Shared, none for the key's consumer).
func (s *subscription) pickLocked(pos managedledger.Position, info entryInfo, slot int32) *consumer {
	if s.kind() == pb.CommandSubscribe_Key_Shared {
		c := s.keyConsumerLocked(slot)
		if c == nil || !s.canTakeLocked(c) || (c.joinedAfter != nil && pos.Compare(*c.joinedAfter) > 0) {
			return nil
		}
		return c
	}
	active := s.activeLocked()
	for k := 0; k < len(active); k++ {
		c := active[(s.next+k)%len(active)]
		if s.canTakeLocked(c) {
			s.next = (s.next + k + 1) % max(len(active), 1)
			return c
		}
	}
	return nil
}

// canTakeLocked reports whether c can be sent an entry now: it has
// permits and its connection is not congested. A congested consumer is
// skipped (its socket is not keeping up: queueing more would only grow the
// broker's memory) and dispatch resumes when its connection drains.
func (s *subscription) canTakeLocked(c *consumer) bool {
	if c.permits <= 0 || c.blockedOnUnacked || s.blockedOnUnacked {
		return false
	}
	if !c.conn.t.Congested() {
		return true
	}
	if !c.drainWait {
		c.drainWait = true
		drained := c.conn.t.Drained()
		go func() {
			<-drained
			s.mu.Lock()
			c.drainWait = false
			s.mu.Unlock()
			s.dispatch()
		}()
	}
	return false
}

// keyHashRange is Key_Shared's hash space: a key's slot is
// murmur3_32(key) mod 65536, as Pulsar computes it, so sticky ranges that
// clients declare mean the same here.
const keyHashRange = 65536

// keySlot is a key's place in Key_Shared's hash space.
func keySlot(key []byte) int32 { return int32(murmur3.Sum32(key) % keyHashRange) }

// keyConsumerLocked maps a key slot to its consumer: the one whose sticky
// range holds the key's slot, else the auto-split share of the slot among
// consumers without sticky ranges (in name order, so the mapping is stable
// while the consumers are).
func (s *subscription) keyConsumerLocked(slot int32) *consumer {
	auto := 0
	for _, c := range s.consumers {
		if len(c.hashRanges) == 0 {
			auto++
			continue
		}
		for _, r := range c.hashRanges {
			if slot >= r.GetStart() && slot <= r.GetEnd() {
				return c
			}
		}
	}
	if auto == 0 {
		return nil
	}
	// consumers are kept in name order (addConsumer): take the k-th
	// auto-split one without allocating on this per-entry path.
	k := int(slot) * auto / keyHashRange
	for _, c := range s.consumers {
		if len(c.hashRanges) == 0 {
			if k == 0 {
				return c
			}
			k--
		}
	}
	return nil
}

// entryInfo is what dispatch reads from a stored entry's metadata.
type entryInfo struct {
	messages  int       // FLOW permits it takes (a batch of N takes N)
	key       []byte    // ordering key, else partition key (Key_Shared)
	deliverAt time.Time // deliver_at_time, zero when none
	// marker is the marker type (0: a message): markers go to no consumer.
	marker markers.Type
	// txn is the transaction of a transactional message or marker.
	txn    txn.ID
	hasTxn bool
}

// entryInfoOf reads an entry's metadata; a damaged entry counts as one
// message without a key and is delivered as it is.
func entryInfoOf(data []byte) entryInfo {
	info := entryInfo{messages: 1}
	_, e, err := wire.ParseStoredEntry(data)
	if err != nil {
		return info
	}
	var md pb.MessageMetadata
	if err := e.DecodeMetadata(&md); err != nil {
		return info
	}
	info.messages = max(int(md.GetNumMessagesInBatch()), 1)
	info.marker = markerType(&md)
	if md.TxnidMostBits != nil || md.TxnidLeastBits != nil {
		info.txn, info.hasTxn = txn.ID{Most: md.GetTxnidMostBits(), Least: md.GetTxnidLeastBits()}, true
	}
	info.key = md.GetOrderingKey()
	if md.DeliverAtTime != nil {
		info.deliverAt = time.UnixMilli(md.GetDeliverAtTime())
	}
	if len(info.key) == 0 && md.PartitionKey != nil {
		info.key = []byte(md.GetPartitionKey())
	}
	return info
}

// errSubscriptionBusy: the subscription's other consumers stop an
// unsubscribe or a consumer of another type (ConsumerBusy, as Pulsar's
// SubscriptionBusyException).
var errSubscriptionBusy = errors.New("subscription is busy")

// errCumulativeAckNotAllowed refuses a cumulative ack on a Shared or
// Key_Shared subscription: the entries before the position given are in
// flight to other consumers too, and acknowledging them would drop them.
// Pulsar's clients refuse it themselves; its broker ignores it (with a
// warning) and answers success, and so does handleAck.
var errCumulativeAckNotAllowed = errors.New("cannot do a cumulative ack on a Shared or Key_Shared subscription")

// checkAckType refuses cumulative acks where only individual acks are
// allowed (subType never changes after creation: no lock needed).
func (s *subscription) checkAckType(c *consumer, cumulative bool) error {
	if cumulative && (s.kind() == pb.CommandSubscribe_Shared || s.kind() == pb.CommandSubscribe_Key_Shared) {
		s.topic.b.log.Warn("cumulative ack on a shared subscription refused", "topic", s.topic.name.String(),
			"subscription", s.name, "consumer", c.id)
		return fmt.Errorf("subscription %s is %s: %w", s.name, s.kind(), errCumulativeAckNotAllowed)
	}
	return nil
}

// ack applies an acknowledgement from c. Positions past the last entry
// are ignored (a confused client must not make delivered entries vanish);
// only what the cursor accepted leaves the in-flight set. A cumulative ack
// acknowledges up to the highest position it names, and only on Exclusive
// and Failover subscriptions.
func (s *subscription) ack(ctx context.Context, c *consumer, cumulative bool, positions []managedledger.Position) error {
	if !s.topic.name.Persistent() {
		return nil // nothing is kept to acknowledge
	}
	if err := s.checkAckType(c, cumulative); err != nil {
		return err
	}
	last := s.topic.ml.LastConfirmed()
	valid := positions[:0:0]
	for _, p := range positions {
		if p.Compare(last) <= 0 {
			valid = append(valid, p)
		}
	}
	if len(valid) == 0 {
		return fmt.Errorf("acknowledged positions %v are past the last entry %v", positions, last)
	}
	var err error
	if cumulative {
		// The highest, not the last: ids in an ack need not be in order.
		err = s.cursor.MarkDelete(ctx, slices.MaxFunc(valid, managedledger.Position.Compare))
	} else {
		err = s.cursor.Delete(ctx, valid...)
	}
	if err != nil {
		return err
	}
	s.advanceSnapshots()
	s.mu.Lock()
	// Acks can release entries held back (Key_Shared joins) and unblock
	// consumers held at their unacknowledged-message limit.
	wake := len(s.replay) > 0
	for _, p := range valid {
		if cumulative {
			wake = s.ackedBeforeLocked(c, p, true) || wake
			continue
		}
		wake = s.ackedLocked(p) || wake
	}
	s.mu.Unlock()
	if wake {
		s.dispatch()
	}
	return nil
}

// ackedLocked forgets an acknowledged entry; it reports whether that
// unblocked a consumer (removeInflightLocked).
func (s *subscription) ackedLocked(p managedledger.Position) (unblocked bool) {
	delete(s.redelivered, p)
	return s.removeInflightLocked(p)
}

// ackedBeforeLocked forgets c's in-flight entries before pos (and pos
// itself when inclusive): a cumulative acknowledgement.
func (s *subscription) ackedBeforeLocked(c *consumer, pos managedledger.Position, inclusive bool) (unblocked bool) {
	for q, in := range s.inflight {
		if cmp := q.Compare(pos); in.c == c && (cmp < 0 || inclusive && cmp == 0) {
			unblocked = s.ackedLocked(q) || unblocked
		}
	}
	return unblocked
}

// addInflightLocked records an entry sent to in.c and counts its
// messages against the unacknowledged-message limits.
func (s *subscription) addInflightLocked(p managedledger.Position, in inflightEntry) {
	s.inflight[p] = in
	s.countUnackedLocked(in.c, int64(in.messages))
}

// removeInflightLocked forgets an in-flight entry (acknowledged, or going
// back for redelivery); it reports whether that unblocked a consumer or
// the subscription, which then needs a dispatch round.
func (s *subscription) removeInflightLocked(p managedledger.Position) (unblocked bool) {
	in, ok := s.inflight[p]
	if !ok {
		return false
	}
	delete(s.inflight, p)
	return s.countUnackedLocked(in.c, -int64(in.messages))
}

// countUnackedLocked adds delta to c's and the subscription's unacked
// counts and applies the limits: blocked at the limit, unblocked at half
// (so a consumer near its limit is not woken for every single ack).
func (s *subscription) countUnackedLocked(c *consumer, delta int64) (unblocked bool) {
	c.unacked += delta
	s.unacked += delta
	if invariants.Enabled && (c.unacked < 0 || s.unacked < 0) {
		invariants.Failf("unacked count below zero: consumer %d, subscription %d (delta %d)", c.unacked, s.unacked, delta)
	}
	if s.kind() != pb.CommandSubscribe_Shared && s.kind() != pb.CommandSubscribe_Key_Shared {
		return false // Exclusive and Failover consumers ack cumulatively: no limit, as in Pulsar
	}
	unblocked = applyUnackedLimit(&c.blockedOnUnacked, c.unacked, c.maxUnacked)
	if applyUnackedLimit(&s.blockedOnUnacked, s.unacked, s.maxUnacked) {
		unblocked = true
	}
	return unblocked
}

// applyUnackedLimit sets or clears *blocked for count against limit and
// reports whether it was cleared.
func applyUnackedLimit(blocked *bool, count, limit int64) (unblocked bool) {
	switch {
	case limit <= 0:
		unblocked = *blocked
		*blocked = false
	case !*blocked && count >= limit:
		*blocked = true
	case *blocked && count <= limit/2:
		*blocked = false
		unblocked = true
	}
	return unblocked
}

// redeliver sends c's unacknowledged entries (or just positions) again.
func (s *subscription) redeliver(c *consumer, positions []managedledger.Position, epoch *uint64) {
	s.mu.Lock()
	if epoch != nil {
		c.epoch, c.hasEpoch = *epoch, true
	}
	s.redeliverLocked(c, positions, s.individualAck())
	s.mu.Unlock()
	s.dispatch()
}

// individualAck reports whether the subscription acknowledges message by
// message (Shared, Key_Shared), Pulsar's isIndividualAckMode: only those
// take the ids of a redelivery request and count redeliveries.
func (s *subscription) individualAck() bool {
	return s.kind() == pb.CommandSubscribe_Shared || s.kind() == pb.CommandSubscribe_Key_Shared
}

// redeliverLocked moves c's in-flight entries (all, or those listed) to
// the replay set, raising their redelivery count if counted. As Pulsar
// counts, only a client's request counts, and only on Shared and
// Key_Shared; what a consumer held when it left comes again uncounted.
func (s *subscription) redeliverLocked(c *consumer, positions []managedledger.Position, counted bool) {
	take := func(p managedledger.Position, in inflightEntry) {
		s.removeInflightLocked(p) // the caller dispatches anyway
		if counted {
			s.redelivered[p]++
		}
		s.replay[p] = in.slot
	}
	if positions == nil {
		for p, in := range s.inflight {
			if in.c == c {
				take(p, in)
			}
		}
		return
	}
	for _, p := range positions {
		if in, ok := s.inflight[p]; ok && in.c == c {
			take(p, in)
		}
	}
}

// seek moves the subscription so that pos is the next entry read: every
// acknowledgement, in-flight assignment and replay entry is dropped, and
// reads started before are discarded when they complete.
func (s *subscription) seek(ctx context.Context, pos managedledger.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	if s.reading && s.cursor.CancelPendingRead() {
		s.reading = false
	}
	s.inflight = map[managedledger.Position]inflightEntry{}
	s.replay = map[managedledger.Position]int32{}
	clear(s.replaying)
	s.redelivered = map[managedledger.Position]uint32{}
	s.delayed = nil
	s.unacked, s.blockedOnUnacked = 0, false
	for _, c := range s.consumers {
		c.permits = 0
		c.unacked, c.blockedOnUnacked = 0, false
	}
	return s.cursor.Reset(ctx, pos)
}

// disconnectConsumers closes every consumer from the broker side
// (CLOSE_CONSUMER); clients reconnect them. What they held goes back to
// the replay set.
func (s *subscription) disconnectConsumers() {
	s.mu.Lock()
	consumers := s.consumers
	s.consumers = nil
	for _, c := range consumers {
		s.redeliverLocked(c, nil, false)
	}
	s.mu.Unlock()
	s.awaitAssignedWrites() // messages already assigned to them go first
	for _, c := range consumers {
		c.conn.dropConsumer(c)
		c.conn.closeConsumerWhenFlowed(c)
	}
}

// awaitAssignedWrites waits until a batch being written (onEntries holds
// sendMu from assignment to the last write) has been queued on its
// connections.
func (s *subscription) awaitAssignedWrites() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
}

// awaitingReturn reports whether the subscription is open without a
// consumer: one a SEEK disconnected and its client has not resubscribed.
func (s *subscription) awaitingReturn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed && len(s.consumers) == 0
}

// readerReturnWindow is how long a reader's subscription waits for its
// client to come back after a SEEK disconnected it.
const readerReturnWindow = 30 * time.Second

// closeIfAbandoned ends a reader's subscription that no consumer came
// back to after a SEEK, so its cursor does not pin the topic's ledgers.
func (s *subscription) closeIfAbandoned() {
	s.mu.Lock()
	abandoned := !s.closed && len(s.consumers) == 0
	s.mu.Unlock()
	if !abandoned {
		return
	}
	s.topic.removeReader(s)
	s.close()
	_ = s.cursor.Close(context.Background())
}

func (s *subscription) close() {
	s.mu.Lock()
	s.closed = true
	if s.delayTimer != nil {
		s.delayTimer.Stop()
	}
	s.mu.Unlock()
	s.cursor.CancelPendingRead()
}

// endOfTopicLocked tells each consumer, once, that it has read the whole
// of a terminated topic (REACHED_END_OF_TOPIC), if its client handles the
// command; the returned func sends it without the lock.
func (s *subscription) endOfTopicLocked() func() {
	var told []*consumer
	for _, c := range s.consumers {
		if !c.toldEndOfTopic && c.conn.endOfTopic.Load() {
			c.toldEndOfTopic = true
			told = append(told, c)
		}
	}
	if len(told) == 0 {
		return nil
	}
	return func() {
		for _, c := range told {
			id := c.id
			_ = c.conn.send(&pb.BaseCommand{Type: pb.BaseCommand_REACHED_END_OF_TOPIC.Enum(),
				ReachedEndOfTopic: &pb.CommandReachedEndOfTopic{ConsumerId: &id}})
		}
	}
}

// wakeAtEnd ends a read waiting for entries that will never come (the
// topic was terminated), so the next round tells the consumers.
func (s *subscription) wakeAtEnd() {
	s.mu.Lock()
	if s.reading && s.cursor.CancelPendingRead() {
		s.reading = false
	}
	s.mu.Unlock()
	s.dispatch()
}
