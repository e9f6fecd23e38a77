package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// received counts what consumers get within d, stopping at most.
func received(t *testing.T, d time.Duration, most int, consumers ...pulsar.Consumer) int {
	t.Helper()
	n := 0
	deadline := time.Now().Add(d)
	for _, c := range consumers {
		for n < most {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			m, err := c.Receive(ctx)
			cancel()
			if err != nil {
				break
			}
			c.Ack(m)
			n++
		}
	}
	return n
}

// setRatePolicy sets (nil: removes) a topic's rate policy and applies it
// once the broker's policy cache has it.
func setRatePolicy(t *testing.T, b *Broker, topic, policy string, value json.RawMessage) {
	t.Helper()
	ctx := context.Background()
	if err := b.SetTopicPolicy(ctx, topic, policy, false, value); err != nil {
		t.Fatal(err)
	}
	tp, err := b.getTopic(ctx, mustTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy cache has "+policy, func() error {
		if _, ok := topicPolicy[json.RawMessage](ctx, tp, policy); ok != (value != nil) {
			return fmt.Errorf("set %v", ok)
		}
		return nil
	})
	b.refreshDispatchRates(ctx)
}

func subscribeLimited(t *testing.T, c pulsar.Client, topic, sub string) pulsar.Consumer {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, ReceiverQueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	return cons
}

// TestSubscriptionDispatchRate: a topic's subscriptionDispatchRate holds
// each subscription to it; removing it lets the rest out at once.
// Bounds: a bucket holds one period's permits, so in time T at most
// rate*(1+T) messages go out (plus the client's queue of one).
func TestSubscriptionDispatchRate(t *testing.T) {
	b, url := startPolicyBroker(t, func(*resources.Policies) {})
	c := newClient(t, url)
	const topic = "persistent://t/ns/sub-rate"
	cons := subscribeLimited(t, c, topic, "s")
	setRatePolicy(t, b, topic, "subscriptionDispatchRate", json.RawMessage(`{"dispatchThrottlingRateInMsg":10,"ratePeriodInSecond":1}`))
	produce(t, c, topic, 60, false)
	got := received(t, 1500*time.Millisecond, 60, cons)
	t.Logf("%d messages in 1.5 s", got)
	if got < 5 || got > 10*(1+1.5)+2 {
		t.Fatalf("%d messages in 1.5 s at 10 a second", got)
	}
	setRatePolicy(t, b, topic, "subscriptionDispatchRate", nil)
	if rest := received(t, 5*time.Second, 60-got, cons); got+rest != 60 {
		t.Fatalf("%d + %d messages after the limit was removed, want 60", got, rest)
	}
}

// TestTopicDispatchRateIsShared: a topic's dispatchRate bounds all its
// subscriptions together; a namespace's subscriptionDispatchRate for this
// cluster applies where the topic has none.
func TestTopicDispatchRateIsShared(t *testing.T) {
	b, url := startPolicyBroker(t, func(p *resources.Policies) {
		p.SubscriptionDispatchRate = map[string]resources.DispatchRate{"test": {DispatchThrottlingRateInMsg: 1000,
			DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}}
	})
	c := newClient(t, url)
	const topic = "persistent://t/ns/topic-rate"
	ctx := context.Background()
	a, bb := subscribeLimited(t, c, topic, "a"), subscribeLimited(t, c, topic, "b")
	setRatePolicy(t, b, topic, "dispatchRate", json.RawMessage(`{"dispatchThrottlingRateInMsg":10,"ratePeriodInSecond":1}`))
	applied, err := b.TopicPolicy(ctx, topic, "subscriptionDispatchRate", false, true)
	if err != nil || applied.(resources.DispatchRate).DispatchThrottlingRateInMsg != 1000 {
		t.Fatalf("applied subscription rate %+v, %v: want the namespace's", applied, err)
	}
	produce(t, c, topic, 40, false)
	got := received(t, 1500*time.Millisecond, 80, a, bb)
	t.Logf("%d messages in 1.5 s", got)
	if got < 5 || got > 10*(1+1.5)+4 {
		t.Fatalf("%d messages to two subscriptions in 1.5 s at 10 a second for the topic", got)
	}
}

// TestTopicPublishRate: a topic's publishRate holds its producers to it:
// past the bucket of one second's messages, the connection is read no
// faster than the rate. Removing the policy lifts it.
func TestTopicPublishRate(t *testing.T) {
	b, url := startPolicyBroker(t, func(*resources.Policies) {})
	c := newClient(t, url)
	const topic = "persistent://t/ns/publish-rate"
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(n int) time.Duration {
		t.Helper()
		start := time.Now()
		for i := range n {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	setRatePolicy(t, b, topic, "publishRate", json.RawMessage(`{"publishThrottlingRateInMsg":20,"publishThrottlingRateInByte":-1}`))
	// 20 fill the bucket, the next 40 take 2 s at 20 a second.
	if took := send(60); took < 1500*time.Millisecond {
		t.Fatalf("60 messages at 20 a second took %v", took)
	}
	setRatePolicy(t, b, topic, "publishRate", nil)
	send(1) // a pause under way ends on its timer
	if took := send(200); took > 10*time.Second {
		t.Fatalf("200 messages with no limit took %v", took)
	}
}

// TestRatePassSkipsTopicsNothingChanged: the once-a-second pass applies
// the rates to a topic again only when a policy or a dynamic setting
// changed, or while one of the topic's rates is limited; a change still
// applies at the next pass.
func TestRatePassSkipsTopicsNothingChanged(t *testing.T) {
	b, _ := startPolicyBroker(t, func(*resources.Policies) {})
	ctx := context.Background()
	topics := make([]*topic, 3)
	for i := range topics {
		tp, err := b.getTopic(ctx, mustTopic(t, fmt.Sprintf("persistent://t/ns/pass-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		topics[i] = tp
	}
	settled := func(what string) {
		t.Helper()
		eventually(t, what, func() error {
			if n := b.refreshDispatchRates(ctx); n != 0 {
				return fmt.Errorf("a pass applied rates to %d topics", n)
			}
			return nil
		})
	}
	settled("a pass with nothing changed applies nothing")
	setSubRate := func(msgs int) {
		t.Helper()
		if _, err := b.cfg.Resources.UpdateNamespace(ctx, "t", "ns", func(p *resources.Policies) error {
			p.SubscriptionDispatchRate = map[string]resources.DispatchRate{"test": {DispatchThrottlingRateInMsg: msgs, RatePeriodInSecond: 1}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("every topic has the namespace's rate of %d", msgs), func() error {
			b.refreshDispatchRates(ctx)
			for _, tp := range topics {
				if r := tp.subRate.Load(); r == nil || r.Msgs != int64(msgs) {
					return fmt.Errorf("%s: %+v", tp.name, r)
				}
			}
			return nil
		})
	}
	setSubRate(7)
	if n := b.refreshDispatchRates(ctx); n != len(topics) {
		t.Fatalf("a pass applied rates to %d topics with a rate limited, want all %d", n, len(topics))
	}
	setSubRate(0)
	settled("unlimited again, the topics are skipped")
	if err := b.SetDynamic(ctx, "dispatchThrottlingRatePerTopicInMsg", "5"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the dynamic topic rate applies", func() error {
		b.refreshDispatchRates(ctx)
		for _, tp := range topics {
			tp.dispatchLimit.mu.Lock()
			msgs := tp.dispatchLimit.rate.Msgs
			tp.dispatchLimit.mu.Unlock()
			if msgs != 5 {
				return fmt.Errorf("%s: %d messages a second", tp.name, msgs)
			}
		}
		return nil
	})
}
