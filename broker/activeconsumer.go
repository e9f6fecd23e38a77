package broker

// ACTIVE_CONSUMER_CHANGE: on Exclusive and Failover subscriptions (one
// active consumer), each consumer is told whether it is the active one when
// it has subscribed and whenever that changes (a consumer joins or
// leaves), as Pulsar's single-active-consumer dispatcher does. Clients
// surface it as listener events (the Go client's ConsumerEventListener
// BecameActive / BecameInactive). A consumer is told only changes of its
// own state.
//
// After a SUBSCRIBE the notices go out activeChangeDelay later: the Go
// client registers a consumer with its connection only once it has
// handled the SUBSCRIBE's SUCCESS, on another goroutine than the one
// reading the connection, and drops notices for consumers it does not know
// yet. Departures are told at once.

import (
	"time"

	"github.com/magnetar-io/magnetar/wire/pb"
)

const activeChangeDelay = 100 * time.Millisecond

// notifyActiveConsumers tells every created consumer whose active state
// changed since it was last told (or that was never told).
func (s *subscription) notifyActiveConsumers() {
	if s.kind() != pb.CommandSubscribe_Failover && s.kind() != pb.CommandSubscribe_Exclusive {
		return
	}
	type notice struct {
		c      *consumer
		active bool
	}
	var out []notice
	s.mu.Lock()
	activeIndex := 0
	if len(s.consumers) > 0 {
		activeIndex = s.activeIndexLocked()
	}
	for i, c := range s.consumers {
		if !c.created.Load() || !c.conn.speaks(protoActiveConsumerChange) {
			continue // told once its SUBSCRIBE succeeded, if its client knows the command
		}
		active := i == activeIndex
		if c.toldActive == nil || *c.toldActive != active {
			c.toldActive = &active
			out = append(out, notice{c, active})
		}
	}
	s.mu.Unlock()
	for _, n := range out {
		id, active := n.c.id, n.active
		_ = n.c.conn.send(&pb.BaseCommand{Type: pb.BaseCommand_ACTIVE_CONSUMER_CHANGE.Enum(),
			ActiveConsumerChange: &pb.CommandActiveConsumerChange{ConsumerId: &id, IsActive: &active}})
	}
}
