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

// TestNamespaceMaxSubscriptionsPerTopic: a namespace's
// max_subscriptions_per_topic bounds each of its topics' subscriptions
// (NotAllowed past it), the broker's maxSubscriptionsPerTopic applies
// where the namespace has none, and a topic's own policy wins over both.
func TestNamespaceMaxSubscriptionsPerTopic(t *testing.T) {
	one := 1
	b, url := startPolicyBrokerWith(t, func(p *resources.Policies) { p.MaxSubscriptionsPerTopic = &one }, 0,
		Config{MaxSubscriptionsPerTopic: 3})
	c := newClient(t, url)
	ctx := context.Background()
	subscribe := func(topic, name string) error {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: name})
		if err == nil {
			cons.Close()
		}
		return err
	}
	const topic = "persistent://t/ns/max-subs"
	if err := subscribe(topic, "a"); err != nil {
		t.Fatal(err)
	}
	if err := subscribe(topic, "b"); err == nil {
		t.Fatal("a second subscription was admitted past the namespace's max_subscriptions_per_topic 1")
	}
	if err := b.SetTopicPolicy(ctx, topic, "maxSubscriptionsPerTopic", false, json.RawMessage("2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the topic's own limit of 2 in force", func() error { return subscribe(topic, "b") })
	if v, err := b.TopicPolicy(ctx, "persistent://t/ns/other", "maxSubscriptionsPerTopic", false, true); err != nil || v != 1 {
		t.Fatalf("applied on a topic without its own: %v %v, want the namespace's 1", v, err)
	}
	if _, err := b.cfg.Resources.UpdateNamespace(ctx, "t", "ns", func(p *resources.Policies) error {
		p.MaxSubscriptionsPerTopic = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the broker's limit applied once the namespace has none", func() error {
		if v, err := b.TopicPolicy(ctx, "persistent://t/ns/other", "maxSubscriptionsPerTopic", false, true); err != nil || v != 3 {
			return fmt.Errorf("applied: %v %v, want the broker's 3", v, err)
		}
		return nil
	})
}

// TestNamespaceDeduplicationSnapshotInterval: a namespace's
// deduplicationSnapshotIntervalSeconds is in force for its topics without
// a policy of their own (applied value and the interval a loading topic
// takes), between the topic's and brokerDeduplicationSnapshotIntervalSeconds.
func TestNamespaceDeduplicationSnapshotInterval(t *testing.T) {
	thirty := 30
	b, _ := startPolicyBrokerWith(t, func(p *resources.Policies) { p.DeduplicationSnapshotIntervalSeconds = &thirty }, 0,
		Config{DeduplicationSnapshotInterval: 120 * time.Second})
	ctx := context.Background()
	const topic = "persistent://t/ns/dedup-interval"
	if v, err := b.TopicPolicy(ctx, topic, "deduplicationSnapshotInterval", false, true); err != nil || v != 30 {
		t.Fatalf("applied: %v %v, want the namespace's 30", v, err)
	}
	tp, err := b.getTopic(ctx, mustTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.dedupSnapshotInterval(ctx); got != 30*time.Second {
		t.Fatalf("a loading topic takes %v, want the namespace's 30s", got)
	}
	if err := b.SetTopicPolicy(ctx, topic, "deduplicationSnapshotInterval", false, json.RawMessage("5")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the topic's own 5 s wins", func() error {
		if got := tp.dedupSnapshotInterval(ctx); got != 5*time.Second {
			return fmt.Errorf("interval %v", got)
		}
		return nil
	})
}
