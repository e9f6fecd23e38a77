package broker

// Client limits per topic and subscription: maxProducersPerTopic,
// maxConsumersPerTopic and maxConsumersPerSubscription (0: no limit), or
// the namespace's max_producers_per_topic, max_consumers_per_topic and
// max_consumers_per_subscription. As in Pulsar the counts are checked
// before a producer or consumer is added, not under one lock with the
// add, so concurrent creations may pass a limit by the few racing.
//
// Unacknowledged-message limits (maxUnackedMessagesPerConsumer and
// maxUnackedMessagesPerSubscription, or the namespace's
// max_unacked_messages_per_consumer / _per_subscription) are read when a
// consumer subscribes; subscription.go enforces them.

import (
	"context"
	"fmt"
)

// clientLimits are the limits in effect for a topic (0: none).
type clientLimits struct {
	producers, consumers, consumersPerSub int
	// unackedPerConsumer and unackedPerSub bound the messages delivered
	// and not yet acknowledged on Shared and Key_Shared subscriptions.
	unackedPerConsumer, unackedPerSub int
}

func (t *topic) clientLimits(ctx context.Context) clientLimits {
	l := clientLimits{producers: t.b.cfg.MaxProducersPerTopic, consumers: t.b.cfg.MaxConsumersPerTopic,
		consumersPerSub: t.b.cfg.MaxConsumersPerSubscription, unackedPerConsumer: t.b.cfg.MaxUnackedMessagesPerConsumer,
		unackedPerSub: t.b.cfg.MaxUnackedMessagesPerSubscription}
	if p, ok := t.policies(ctx); ok {
		for _, o := range []struct {
			v   *int
			dst *int
		}{{p.MaxProducersPerTopic, &l.producers}, {p.MaxConsumersPerTopic, &l.consumers},
			{p.MaxConsumersPerSubscription, &l.consumersPerSub},
			{p.MaxUnackedMessagesPerConsumer, &l.unackedPerConsumer},
			{p.MaxUnackedMessagesPerSubscription, &l.unackedPerSub}} {
			if o.v != nil {
				*o.dst = *o.v
			}
		}
	}
	return l
}

// admitProducerCount refuses a producer past the topic's limit.
func (t *topic) admitProducerCount(ctx context.Context) error {
	limit := t.clientLimits(ctx).producers
	if limit <= 0 {
		return nil
	}
	if producers, _ := t.clients(); producers >= limit {
		return fmt.Errorf("topic %s reached its limit of %d producers (maxProducersPerTopic)", t.name, limit)
	}
	return nil
}

// admitConsumerCount refuses a consumer past the topic's or the
// subscription's limit.
func (t *topic) admitConsumerCount(l clientLimits, s *subscription) error {
	if l.consumers > 0 {
		if _, consumers := t.clients(); consumers >= l.consumers {
			return fmt.Errorf("topic %s reached its limit of %d consumers (maxConsumersPerTopic)", t.name, l.consumers)
		}
	}
	if l.consumersPerSub > 0 {
		s.mu.Lock()
		n := len(s.consumers)
		s.mu.Unlock()
		if n >= l.consumersPerSub {
			return fmt.Errorf("subscription %s reached its limit of %d consumers (maxConsumersPerSubscription)", s.name, l.consumersPerSub)
		}
	}
	return nil
}
