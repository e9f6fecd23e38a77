package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/spaolacci/murmur3"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// subscription dispatches its cursor's entries to its consumers by their
// permits. Exclusive and Failover send to one active consumer; Shared
// spreads entries round-robin over consumers with permits.
//
// Behaviour:
//   - FLOW permits count messages: a batch entry of N messages takes N.
//   - One read is outstanding at a time; when caught up it waits on the
//     managed ledger for the next add (no polling).
//   - An entry in flight to one consumer is not sent to another until that
//     consumer closes or asks for redelivery; then it goes out again with
//     its redelivery count raised.
//
// Lock rules: mu guards every field below it. Cursor reads and connection
// writes happen after mu is released.
type subscription struct {
	topic   *topic
	name    string
	subType pb.CommandSubscribe_SubType
	cursor  managedledger.Cursor

	mu          sync.Mutex
	consumers   []*consumer
	next        int // Shared: round-robin start
	reading     bool
	inflight    map[managedledger.Position]*consumer
	redelivered map[managedledger.Position]uint32
	closed      bool
}

func newSubscription(t *topic, name string, subType pb.CommandSubscribe_SubType, cursor managedledger.Cursor) *subscription {
	return &subscription{topic: t, name: name, subType: subType, cursor: cursor,
		inflight: map[managedledger.Position]*consumer{}, redelivered: map[managedledger.Position]uint32{}}
}

// addConsumer attaches c, enforcing the subscription type.
func (s *subscription) addConsumer(c *consumer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("subscription %s is closed", s.name)
	}
	if s.subType == pb.CommandSubscribe_Exclusive && len(s.consumers) > 0 {
		return errConsumerBusy
	}
	s.consumers = append(s.consumers, c)
	if s.subType == pb.CommandSubscribe_Failover {
		sort.SliceStable(s.consumers, func(i, j int) bool { return s.consumers[i].name < s.consumers[j].name })
	}
	return nil
}

var errConsumerBusy = errors.New("exclusive subscription already has a consumer")

// removeConsumer detaches c and sends what it had in flight again.
func (s *subscription) removeConsumer(c *consumer) {
	s.mu.Lock()
	for i, x := range s.consumers {
		if x == c {
			s.consumers = append(s.consumers[:i], s.consumers[i+1:]...)
			break
		}
	}
	s.redeliverLocked(c, nil)
	s.mu.Unlock()
	s.dispatch()
}

func (s *subscription) checkOnlyConsumer(c *consumer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.consumers) > 1 || (len(s.consumers) == 1 && s.consumers[0] != c) {
		return fmt.Errorf("subscription %s has other consumers", s.name)
	}
	return nil
}

// flow adds permits to c and dispatches.
func (s *subscription) flow(c *consumer, permits uint32) {
	s.mu.Lock()
	c.permits += int64(permits)
	s.mu.Unlock()
	s.dispatch()
}

// activeLocked returns the consumers entries may go to now.
func (s *subscription) activeLocked() []*consumer {
	if len(s.consumers) == 0 {
		return nil
	}
	if s.subType == pb.CommandSubscribe_Shared || s.subType == pb.CommandSubscribe_Key_Shared {
		return s.consumers
	}
	return s.consumers[:1]
}

func (s *subscription) permitsLocked() int64 {
	var n int64
	for _, c := range s.activeLocked() {
		n += max(c.permits, 0)
	}
	return n
}

// dispatch starts a read if there are permits and none is outstanding.
func (s *subscription) dispatch() {
	s.mu.Lock()
	permits := s.permitsLocked()
	if s.closed || s.reading || permits <= 0 {
		s.mu.Unlock()
		return
	}
	s.reading = true
	s.mu.Unlock()
	n := int(min(permits, int64(s.topic.b.cfg.DispatcherMaxReadBatchSize)))
	s.cursor.ReadEntriesOrWait(n, int64(s.topic.b.cfg.MaxMessageSize), s.onEntries)
}

// delivery is one MESSAGE to write after mu is released.
type delivery struct {
	c     *consumer
	entry managedledger.Entry
	count uint32
}

func (s *subscription) onEntries(entries []managedledger.Entry, err error) {
	if err != nil {
		s.mu.Lock()
		s.reading = false
		closed := s.closed
		s.mu.Unlock()
		if !closed && !errors.Is(err, managedledger.ErrClosed) {
			s.topic.b.log.Warn("dispatch read failed; retrying", "topic", s.topic.name.String(), "subscription", s.name, "err", err)
			time.AfterFunc(100*time.Millisecond, s.dispatch)
		}
		return
	}
	s.mu.Lock()
	out := s.assignLocked(entries)
	s.mu.Unlock()
	// reading stays set until these writes are queued, so the next batch
	// (which may be read on another goroutine) cannot overtake them.
	for _, d := range out {
		d.c.conn.sendMessage(d.c.id, d.entry, d.count)
	}
	s.mu.Lock()
	s.reading = false
	s.mu.Unlock()
	s.dispatch()
}

// assignLocked picks a consumer for each entry; entries nobody can take
// now are read again later (the cursor is moved back to the first).
func (s *subscription) assignLocked(entries []managedledger.Entry) []delivery {
	var out []delivery
	for i, e := range entries {
		if owner, ok := s.inflight[e.Position]; ok && owner != nil {
			continue // still with another consumer (re-read after a seek back)
		}
		info := entryInfoOf(e.Data)
		c := s.pickLocked(info)
		if c == nil {
			s.cursor.Seek(entries[i].Position)
			break
		}
		c.permits -= int64(info.messages)
		s.inflight[e.Position] = c
		s.topic.stats.msgsOut.Add(int64(info.messages))
		s.topic.stats.bytesOut.Add(int64(len(e.Data)))
		out = append(out, delivery{c: c, entry: e, count: s.redelivered[e.Position]})
	}
	return out
}

// pickLocked returns the consumer the entry goes to now, or nil when it
// must wait (no permits; for Key_Shared, none for the key's consumer).
func (s *subscription) pickLocked(info entryInfo) *consumer {
	if s.subType == pb.CommandSubscribe_Key_Shared {
		if c := s.keyConsumerLocked(info.key); c != nil && c.permits > 0 {
			return c
		}
		return nil
	}
	active := s.activeLocked()
	for k := 0; k < len(active); k++ {
		c := active[(s.next+k)%len(active)]
		if c.permits > 0 {
			s.next = (s.next + k + 1) % max(len(active), 1)
			return c
		}
	}
	return nil
}

// keyHashRange is Key_Shared's hash space: a key's slot is
// murmur3_32(key) mod 65536, as Pulsar computes it, so sticky ranges that
// clients declare mean the same here.
const keyHashRange = 65536

// keyConsumerLocked maps a key to its consumer: the one whose sticky range
// holds the key's slot, else the auto-split share of the slot among
// consumers without sticky ranges (in name order, so the mapping is stable
// while the consumers are).
func (s *subscription) keyConsumerLocked(key []byte) *consumer {
	slot := int32(murmur3.Sum32(key) % keyHashRange)
	var auto []*consumer
	for _, c := range s.consumers {
		if len(c.hashRanges) == 0 {
			auto = append(auto, c)
			continue
		}
		for _, r := range c.hashRanges {
			if slot >= r.GetStart() && slot <= r.GetEnd() {
				return c
			}
		}
	}
	if len(auto) == 0 {
		return nil
	}
	sort.SliceStable(auto, func(i, j int) bool { return auto[i].name < auto[j].name })
	return auto[int(slot)*len(auto)/keyHashRange]
}

// entryInfo is what dispatch reads from a stored entry's metadata.
type entryInfo struct {
	messages int    // FLOW permits it takes (a batch of N takes N)
	key      []byte // ordering key, else partition key (Key_Shared)
}

// entryInfoOf reads an entry's metadata; a damaged entry counts as one
// message without a key and is delivered as it is.
func entryInfoOf(data []byte) entryInfo {
	info := entryInfo{messages: 1}
	e, err := wire.ParseEntry(data)
	if err != nil {
		return info
	}
	var md pb.MessageMetadata
	if err := e.DecodeMetadata(&md); err != nil {
		return info
	}
	info.messages = max(int(md.GetNumMessagesInBatch()), 1)
	info.key = md.GetOrderingKey()
	if len(info.key) == 0 && md.PartitionKey != nil {
		info.key = []byte(md.GetPartitionKey())
	}
	return info
}

// ack applies an acknowledgement from c.
func (s *subscription) ack(ctx context.Context, c *consumer, cumulative bool, positions []managedledger.Position) error {
	s.mu.Lock()
	for _, p := range positions {
		if cumulative {
			for q, owner := range s.inflight {
				if owner == c && q.Compare(p) <= 0 {
					delete(s.inflight, q)
					delete(s.redelivered, q)
				}
			}
			continue
		}
		delete(s.inflight, p)
		delete(s.redelivered, p)
	}
	s.mu.Unlock()
	if cumulative {
		return s.cursor.MarkDelete(ctx, positions[len(positions)-1])
	}
	return s.cursor.Delete(ctx, positions...)
}

// redeliver sends c's unacknowledged entries (or just positions) again.
func (s *subscription) redeliver(c *consumer, positions []managedledger.Position) {
	s.mu.Lock()
	s.redeliverLocked(c, positions)
	s.mu.Unlock()
	s.dispatch()
}

func (s *subscription) redeliverLocked(c *consumer, positions []managedledger.Position) {
	var first *managedledger.Position
	take := func(p managedledger.Position) {
		delete(s.inflight, p)
		s.redelivered[p]++
		if first == nil || p.Compare(*first) < 0 {
			first = &p
		}
	}
	if positions == nil {
		for p, owner := range s.inflight {
			if owner == c {
				take(p)
			}
		}
	}
	for _, p := range positions {
		if s.inflight[p] == c {
			take(p)
		}
	}
	if first != nil {
		if s.reading && s.cursor.CancelPendingRead() {
			s.reading = false
		}
		s.cursor.Seek(*first)
	}
}

// seek moves the subscription so that pos is the next entry read: every
// acknowledgement and in-flight assignment is dropped.
func (s *subscription) seek(ctx context.Context, pos managedledger.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reading && s.cursor.CancelPendingRead() {
		s.reading = false
	}
	s.inflight = map[managedledger.Position]*consumer{}
	s.redelivered = map[managedledger.Position]uint32{}
	for _, c := range s.consumers {
		c.permits = 0
	}
	return s.cursor.Reset(ctx, pos)
}

// disconnectConsumers closes every consumer from the broker side
// (CLOSE_CONSUMER); clients reconnect them.
func (s *subscription) disconnectConsumers() {
	s.mu.Lock()
	consumers := s.consumers
	s.consumers = nil
	// Nothing is in flight without consumers; a read that raced the seek
	// may have moved the cursor, so read again from the first unacked.
	s.inflight = map[managedledger.Position]*consumer{}
	s.cursor.Rewind()
	s.mu.Unlock()
	for _, c := range consumers {
		c.conn.removeConsumer(c.id)
		id := c.id
		_ = c.conn.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(),
			CloseConsumer: &pb.CommandCloseConsumer{ConsumerId: &id, RequestId: ptr(uint64(0))}})
	}
}

func (s *subscription) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cursor.CancelPendingRead()
}
