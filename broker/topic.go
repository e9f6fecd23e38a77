package broker

import (
	"context"
	"fmt"
	"sync"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// topic is one loaded topic: its stream, producers and subscriptions.
//
// Lock rules: mu guards producers and subs; it is never held while calling
// into a subscription (which has its own lock) or the managed ledger.
type topic struct {
	b    *Broker
	name TopicName
	ml   managedledger.ManagedLedger

	stats topicStats

	mu        sync.Mutex
	producers map[*producer]struct{}
	subs      map[string]*subscription
	closed    bool
}

func newTopic(b *Broker, name TopicName, ml managedledger.ManagedLedger) *topic {
	return &topic{b: b, name: name, ml: ml, producers: map[*producer]struct{}{}, subs: map[string]*subscription{}}
}

func (t *topic) addProducer(p *producer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("topic %s is closing", t.name)
	}
	t.producers[p] = struct{}{}
	return nil
}

func (t *topic) removeProducer(p *producer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.producers, p)
}

// subscription returns the named subscription, creating it (and its
// cursor) when needed.
func (t *topic) subscription(ctx context.Context, cmd *pb.CommandSubscribe) (*subscription, error) {
	name := cmd.GetSubscription()
	t.mu.Lock()
	if s, ok := t.subs[name]; ok && cmd.GetDurable() {
		t.mu.Unlock()
		if s.subType != cmd.GetSubType() {
			return nil, fmt.Errorf("subscription %s is %s, not %s", name, s.subType, cmd.GetSubType())
		}
		return s, nil
	}
	t.mu.Unlock()
	cursor, err := t.openCursor(ctx, cmd)
	if err != nil {
		return nil, err
	}
	s := newSubscription(t, name, cmd.GetSubType(), cursor)
	if !cmd.GetDurable() {
		return s, nil // readers: one subscription per consumer, not registered
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if existing, ok := t.subs[name]; ok {
		return existing, nil
	}
	t.subs[name] = s
	return s, nil
}

func (t *topic) openCursor(ctx context.Context, cmd *pb.CommandSubscribe) (managedledger.Cursor, error) {
	if !cmd.GetDurable() {
		start := managedledger.Position{LedgerID: -1, EntryID: -1}
		if id := cmd.GetStartMessageId(); id != nil {
			start = managedledger.Position{LedgerID: int64(id.GetLedgerId()), EntryID: int64(id.GetEntryId())}
		}
		return t.ml.NewNonDurableCursor(start)
	}
	initial := managedledger.Latest
	if cmd.GetInitialPosition() == pb.CommandSubscribe_Earliest {
		initial = managedledger.Earliest
	}
	return t.ml.OpenCursor(ctx, cmd.GetSubscription(), managedledger.CursorOptions{Initial: initial})
}

// unsubscribe removes a subscription that has no consumer left but c.
func (t *topic) unsubscribe(ctx context.Context, s *subscription, c *consumer) error {
	if err := s.checkOnlyConsumer(c); err != nil {
		return err
	}
	t.mu.Lock()
	delete(t.subs, s.name)
	t.mu.Unlock()
	s.close()
	return t.ml.DeleteCursor(ctx, s.name)
}

func (t *topic) close(ctx context.Context) {
	t.mu.Lock()
	t.closed = true
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.close()
	}
	_ = t.ml.Close(ctx)
}
