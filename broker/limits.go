package broker

// Client limits per topic and subscription: maxProducersPerTopic,
// maxConsumersPerTopic and maxConsumersPerSubscription (0: no limit), or
// the namespace's max_producers_per_topic, max_consumers_per_topic and
// max_consumers_per_subscription. As in Pulsar the counts are checked
// before a producer or consumer is added, not under one lock with the
// add, so concurrent creations may pass a limit by the few racing.

import (
	"context"
	"fmt"
)

// clientLimits are the limits in effect for a topic (0: none).
type clientLimits struct {
	producers, consumers, consumersPerSub int
}

func (t *topic) clientLimits(ctx context.Context) clientLimits {
	l := clientLimits{producers: t.b.cfg.MaxProducersPerTopic, consumers: t.b.cfg.MaxConsumersPerTopic,
		consumersPerSub: t.b.cfg.MaxConsumersPerSubscription}
	if p, ok := t.policies(ctx); ok {
		for _, o := range []struct {
			v   *int
			dst *int
		}{{p.MaxProducersPerTopic, &l.producers}, {p.MaxConsumersPerTopic, &l.consumers},
			{p.MaxConsumersPerSubscription, &l.consumersPerSub}} {
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
func (t *topic) admitConsumerCount(ctx context.Context, s *subscription) error {
	l := t.clientLimits(ctx)
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
