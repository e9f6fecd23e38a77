package broker

// Client limits per topic and subscription: maxProducersPerTopic,
// maxConsumersPerTopic and maxConsumersPerSubscription (0: no limit), or
// the namespace's max_producers_per_topic, max_consumers_per_topic and
// max_consumers_per_subscription, or the topic's own maxProducers,
// maxConsumers, maxConsumersPerSubscription and maxSubscriptionsPerTopic
// (topicpolicies.go). As in Pulsar the counts are checked
// before a producer or consumer is added, not under one lock with the
// add, so concurrent creations may pass a limit by the few racing.
//
// Unacknowledged-message limits (maxUnackedMessagesPerConsumer and
// maxUnackedMessagesPerSubscription, or the namespace's
// max_unacked_messages_per_consumer / _per_subscription) are read when a
// consumer subscribes; subscription.go enforces them.

import (
	"context"
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// clientLimits are the limits in effect for a topic (0: none).
type clientLimits struct {
	producers, consumers, consumersPerSub int
	// unackedPerConsumer and unackedPerSub bound the messages delivered
	// and not yet acknowledged on Shared and Key_Shared subscriptions.
	unackedPerConsumer, unackedPerSub int
	// subscriptions bounds the topic's subscriptions (a topic policy).
	subscriptions int
}

func (t *topic) clientLimits(ctx context.Context) clientLimits {
	l := clientLimits{producers: t.b.cfg.MaxProducersPerTopic, consumers: t.b.cfg.MaxConsumersPerTopic,
		consumersPerSub: t.b.cfg.MaxConsumersPerSubscription, unackedPerConsumer: t.b.cfg.MaxUnackedMessagesPerConsumer,
		unackedPerSub: t.b.cfg.MaxUnackedMessagesPerSubscription, subscriptions: t.b.cfg.MaxSubscriptionsPerTopic}
	if p, ok := t.policies(ctx); ok {
		for _, o := range []struct {
			v   *int
			dst *int
		}{{p.MaxProducersPerTopic, &l.producers}, {p.MaxConsumersPerTopic, &l.consumers},
			{p.MaxConsumersPerSubscription, &l.consumersPerSub},
			{p.MaxUnackedMessagesPerConsumer, &l.unackedPerConsumer},
			{p.MaxUnackedMessagesPerSubscription, &l.unackedPerSub},
			{p.MaxSubscriptionsPerTopic, &l.subscriptions}} {
			if o.v != nil {
				*o.dst = *o.v
			}
		}
	}
	own := t.ownPolicies(ctx) // the topic's own limits win
	for _, o := range []struct {
		policy string
		dst    *int
	}{{"maxProducers", &l.producers}, {"maxConsumers", &l.consumers},
		{"maxConsumersPerSubscription", &l.consumersPerSub},
		{"maxUnackedMessagesOnConsumer", &l.unackedPerConsumer},
		{"maxUnackedMessagesOnSubscription", &l.unackedPerSub},
		{"maxSubscriptionsPerTopic", &l.subscriptions}} {
		if v, ok := resources.TopicPolicy[int](own, t.b.cfg.ClusterName, o.policy); ok {
			*o.dst = v
		}
	}
	return l
}

// errTooManySubscriptions refuses a new subscription past the topic's
// maxSubscriptionsPerTopic (NotAllowed, as Pulsar answers it).
var errTooManySubscriptions = errors.New("exceeds the maximum number of subscriptions of the topic")

// admitSubscriptionCount refuses a new durable subscription past the
// topic's maxSubscriptionsPerTopic.
func (t *topic) admitSubscriptionCount(ctx context.Context) error {
	limit := t.clientLimits(ctx).subscriptions
	if limit <= 0 {
		return nil
	}
	if n := len(t.durableSubNames()); n >= limit {
		return fmt.Errorf("topic %s has %d subscriptions, its limit (maxSubscriptionsPerTopic): %w", t.name, n, errTooManySubscriptions)
	}
	return nil
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
