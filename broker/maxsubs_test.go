package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

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
