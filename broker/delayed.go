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

// delaysDelivery reports whether the subscription type honours
// deliver_at_time.
func (s *subscription) delaysDelivery() bool {
	return s.kind() == pb.CommandSubscribe_Shared || s.kind() == pb.CommandSubscribe_Key_Shared
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
	if s.delayTimer == nil {
		s.delayTimer = time.AfterFunc(wait, s.releaseDue)
		return
	}
	s.delayTimer.Reset(wait)
}

// releaseDue moves entries whose time has come to the replay set.
func (s *subscription) releaseDue() {
	s.mu.Lock()
	now := time.Now()
	for len(s.delayed) > 0 && !s.delayed[0].at.After(now) {
		e := heap.Pop(&s.delayed).(delayedEntry)
		s.replay[e.pos] = e.slot
	}
	s.armDelayedLocked()
	s.mu.Unlock()
	s.dispatch()
}
