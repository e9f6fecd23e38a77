package broker

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// A non-persistent topic delivers each message to every subscription as
// it is published: to one consumer of a Shared subscription, to the
// consumer of an Exclusive one. Nothing published before a subscription
// existed reaches it, and nothing survives the topic.
func TestNonPersistentDelivery(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 50), false)
	c := newClient(t, env.url)
	const topic = "non-persistent://public/default/np-delivery"
	produce(t, c, topic, 5, false) // nobody listens: gone
	sub := func(name string, typ pulsar.SubscriptionType, consumer string) pulsar.Consumer {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: name, Type: typ, Name: consumer,
			AckWithResponse: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cons.Close)
		return cons
	}
	shared := []pulsar.Consumer{sub("shared", pulsar.Shared, "a"), sub("shared", pulsar.Shared, "b")}
	excl := sub("excl", pulsar.Exclusive, "x")
	produce(t, c, topic, 20, false)
	var got []string
	perConsumer := make([]int, 2)
	for i, msgs := range collect(t, shared, 20) {
		cons := shared[i]
		for _, m := range msgs {
			got = append(got, string(m.Payload()))
			perConsumer[i]++
			if err := cons.Ack(m); err != nil { // accepted; nothing is kept
				t.Fatal(err)
			}
		}
	}
	sort.Strings(got)
	if len(got) != 20 || got[0] != "m-00000" || got[19] != "m-00019" {
		t.Fatalf("the shared subscription received %d messages %v; want the 20 published after it subscribed", len(got), got)
	}
	if perConsumer[0] == 0 || perConsumer[1] == 0 {
		t.Fatalf("shared consumers received %v: want both to take part", perConsumer)
	}
	var exclGot []string
	for _, m := range receiveFor(t, excl, 20) {
		exclGot = append(exclGot, string(m.Payload()))
	}
	for i, p := range exclGot {
		if want := fmt.Sprintf("m-%05d", i); p != want {
			t.Fatalf("exclusive subscription: message %d is %q; want %q, in order", i, p, want)
		}
	}
	if len(exclGot) != 20 {
		t.Fatalf("exclusive subscription received %d; want 20", len(exclGot))
	}
	stats, err := env.admin.Topics().GetStats(topicName(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	if stats.MsgCounterIn != 25 || stats.StorageSize != 0 || len(stats.Subscriptions) != 2 {
		t.Fatalf("stats: %d in, %d stored, %d subscriptions; want 25, 0, 2", stats.MsgCounterIn, stats.StorageSize, len(stats.Subscriptions))
	}
}

// A consumer that does not keep up loses messages instead of queueing
// them in the broker: it gets what its permits allow, the rest is dropped
// and counted.
func TestNonPersistentDropsWithoutPermits(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 50), false)
	c := newClient(t, env.url)
	const topic = "non-persistent://public/default/np-drop"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produce(t, c, topic, 100, false) // the consumer's application reads nothing meanwhile
	got := receiveFor(t, cons, 1)
	tp := env.b.loadedTopic(mustTopicName(t, topic))
	dropped := tp.stats.msgsDropped.Load()
	if len(got) >= 100 || dropped == 0 || int64(len(got))+dropped != 100 {
		t.Fatalf("received %d, dropped %d of 100; want some dropped and the two to add up", len(got), dropped)
	}
	if got := env.b.loadedNonPersistentTopics("public", "default"); len(got) != 1 || got[0] != topic {
		t.Fatalf("non-persistent topics listed: %v", got)
	}
}

// Deleting a non-persistent topic (force) disconnects its clients; a
// subscription ends with its last consumer.
func TestNonPersistentSubscriptionsAndDelete(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 50), false)
	c := newClient(t, env.url)
	const topic = "non-persistent://public/default/np-delete"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	tp := env.b.loadedTopic(mustTopicName(t, topic))
	if n := len(tp.durableSubs()); n != 1 {
		t.Fatalf("%d subscriptions; want 1", n)
	}
	cons.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(tp.durableSubs()) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the subscription outlived its last consumer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err != nil {
		t.Fatal(err)
	}
	if err := env.admin.Topics().Delete(topicName(t, topic), false, true); err == nil {
		t.Fatal("delete without force succeeded with a producer connected")
	}
	if err := env.admin.Topics().Delete(topicName(t, topic), true, true); err != nil {
		t.Fatal(err)
	}
	if env.b.loadedTopic(mustTopicName(t, topic)) == tp {
		t.Fatal("the deleted topic is still loaded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := env.b.existingTopic(ctx, mustTopicName(t, "non-persistent://public/default/never-used")); err == nil {
		t.Fatal("a non-persistent topic that was never used must not exist")
	}
}

func mustTopicName(t *testing.T, s string) TopicName {
	t.Helper()
	n, err := ParseTopicName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A partitioned non-persistent topic: the partition count is metadata as
// for persistent ones, and each partition delivers as a non-persistent
// topic.
func TestNonPersistentPartitioned(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 50), false)
	const topic = "non-persistent://public/default/np-parted"
	if err := env.admin.Topics().Create(topicName(t, topic), 3); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, env.url)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produce(t, c, topic, 30, false)
	partitions := map[string]bool{}
	for _, m := range receiveFor(t, cons, 30) {
		partitions[m.Topic()] = true
	}
	if len(partitions) != 3 {
		t.Fatalf("messages came from %d partitions (%v); want 3", len(partitions), partitions)
	}
}
