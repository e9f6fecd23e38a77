package broker

// Delayed delivery (deliver_at_time, DeliverAfter/DeliverAt in clients) for
// Shared and Key_Shared subscriptions, as in Pulsar: an entry whose time has
// not come is held by position until then, and then goes through the
// replay set like a redelivery. Exclusive and Failover deliver at once
// (ordering wins), as Pulsar does. The held positions live in memory; after
// a broker restart they are read again from the cursor, since they were
// never acknowledged.

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

type delayedEntry struct {
	at   time.Time
	pos  managedledger.Position
	slot int32
}

// delayedQueue is a min-heap by delivery time.
type delayedQueue []delayedEntry

func (q delayedQueue) Len() int           { return len(q) }
func (q delayedQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q delayedQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *delayedQueue) Push(x any)        { *q = append(*q, x.(delayedEntry)) }
func (q *delayedQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// delaysDelivery reports whether the subscription holds entries until
// their deliver_at_time: its type honours it and the topic's delayed
// delivery policy is active.
func (s *subscription) delaysDelivery() bool {
	if s.kind() != pb.CommandSubscribe_Shared && s.kind() != pb.CommandSubscribe_Key_Shared {
		return false
	}
	return s.topic.delayedPolicy(time.Now()).Active
}

// holdLocked keeps an entry until at and arms the timer for the earliest.
func (s *subscription) holdLocked(pos managedledger.Position, slot int32, at time.Time) {
	heap.Push(&s.delayed, delayedEntry{at: at, pos: pos, slot: slot})
	s.armDelayedLocked()
}

func (s *subscription) armDelayedLocked() {
	if len(s.delayed) == 0 {
		return
	}
	wait := time.Until(s.delayed[0].at)
	// The policy's tick time spaces the releases (Pulsar's tracker looks
	// at its held messages at most once a tick): a message due sooner
	// waits for the next tick.
	if tick := time.Duration(s.topic.delayedPolicy(time.Now()).TickTime) * time.Millisecond; tick > 0 {
		wait = max(wait, time.Until(s.lastRelease.Add(tick)))
	}
	if s.delayTimer == nil {
		s.delayTimer = time.AfterFunc(wait, s.releaseDue)
		return
	}
	s.delayTimer.Reset(wait)
}

// releaseDue moves entries whose time has come to the replay set.
func (s *subscription) releaseDue() {
	s.topic.delayedPolicy(time.Now()) // read before the lock (armDelayedLocked asks)
	s.mu.Lock()
	now := time.Now()
	s.lastRelease = now
	for len(s.delayed) > 0 && !s.delayed[0].at.After(now) {
		e := heap.Pop(&s.delayed).(delayedEntry)
		s.replay[e.pos] = e.slot
	}
	s.armDelayedLocked()
	s.mu.Unlock()
	s.dispatch()
}

// deliveryDelayRefusal is why a message asking to be delivered later than
// the policy's longest delay after it was published is refused, in
// Pulsar's words ("" when it is not; checkEntry decoded md).
func (t *topic) deliveryDelayRefusal(md *pb.MessageMetadata) string {
	if md.DeliverAtTime == nil {
		return ""
	}
	limit := t.delayedPolicy(time.Now()).MaxDeliveryDelayInMillis
	if limit > 0 && md.GetDeliverAtTime()-int64(md.GetPublishTime()) > limit {
		return fmt.Sprintf("Exceeds max allowed delivery delay of %d milliseconds", limit)
	}
	return ""
}
