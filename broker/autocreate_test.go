package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// With auto creation off in a namespace, clients of a topic that does not
// exist are refused with TopicNotFound, while a topic created through the
// admin API serves them; other namespaces keep the broker's default.
func TestAutoTopicCreationOff(t *testing.T) {
	b, url := startPolicyBroker(t, func(p *resources.Policies) {
		p.AutoTopicCreationOverride = &resources.AutoTopicCreationOverride{AllowAutoTopicCreation: false,
			TopicType: resources.TopicTypeNonPartitioned}
	})
	c := newClient(t, url)
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/missing"}); err == nil || !strings.Contains(err.Error(), "auto topic creation is off") {
		t.Fatalf("producer on a missing topic: %v", err)
	}
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "t/ns/missing", SubscriptionName: "s"}); err == nil {
		t.Fatal("consumer on a missing topic was accepted")
	}
	if _, err := b.getTopic(context.Background(), mustTopic(t, "t/ns/made")); err != nil { // as the admin API creates it
		t.Fatal(err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/made"}); err != nil {
		t.Fatalf("producer on an existing topic: %v", err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "public/default/anything"}); err != nil {
		t.Fatalf("another namespace follows the broker default: %v", err)
	}
}

// With the partitioned type, a new topic's first client creates it with
// defaultNumPartitions partitions, and produces to them.
func TestAutoTopicCreationPartitioned(t *testing.T) {
	b, url := startPolicyBrokerWith(t, func(*resources.Policies) {}, 0,
		Config{AutoTopicCreationType: resources.TopicTypePartitioned, DefaultNumPartitions: 3})
	c := newClient(t, url)
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/auto-parted"})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.partitions(context.Background(), mustTopic(t, "t/ns/auto-parted")); err != nil || n != 3 {
		t.Fatalf("partitions of the auto-created topic: %d, %v", n, err)
	}
	parts, err := c.TopicPartitions("persistent://t/ns/auto-parted")
	if err != nil || len(parts) != 3 {
		t.Fatalf("client sees partitions %v, %v", parts, err)
	}
}
