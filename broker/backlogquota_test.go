package broker

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func startQuotaBroker(t *testing.T, policy string) (*Broker, string) {
	t.Helper()
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BacklogQuotaDefaultLimitBytes: 4 << 10, BacklogQuotaDefaultRetentionPolicy: policy,
		BacklogQuotaCheckInterval: 50 * time.Millisecond}, testLedgers(t, 0))
	return b, serveTestBroker(t, b)
}

// fillBacklog subscribes without consuming and produces 32 KiB.
func fillBacklog(t *testing.T, client pulsar.Client, topic string) (pulsar.Consumer, pulsar.Producer) {
	t.Helper()
	// A one-message receiver queue: the broker dispatches one message at a
	// time, so the backlog stays on the broker (not in the client's queue).
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", ReceiverQueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for range 32 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 1024)})
		cancel()
		if err != nil {
			break // the periodic check already blocked the producer: the quota works
		}
		sent++
	}
	if sent < 4 { // 4 messages of 1 KiB plus metadata pass 4 KiB
		t.Fatalf("only %d messages sent before the producer was blocked at a 4 KiB quota", sent)
	}
	return cons, prod
}

func TestBacklogQuotaProducerException(t *testing.T) {
	_, url := startQuotaBroker(t, BacklogFailProducers)
	client := newClient(t, url)
	fillBacklog(t, client, "quota-exc")
	waitProducerRefused(t, client, "quota-exc", "ProducerBlockedQuotaExceeded")
}

// waitProducerRefused waits until creating a producer on topic fails with
// an error mentioning reason.
func waitProducerRefused(t *testing.T, client pulsar.Client, topic, reason string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil && strings.Contains(err.Error(), reason) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a producer on a topic over its backlog quota: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBacklogQuotaConsumerEviction(t *testing.T) {
	b, url := startQuotaBroker(t, BacklogEvictConsumers)
	client := newClient(t, url)
	cons, _ := fillBacklog(t, client, "quota-evict")
	topic, err := b.getTopic(context.Background(), mustTopic(t, "quota-evict"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for topic.overQuota() {
		if time.Now().After(deadline) {
			t.Fatal("backlog never evicted under the quota")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The consumer now starts after the evicted messages.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		m, err := cons.Receive(rctx)
		rcancel()
		if err != nil {
			break
		}
		cons.Ack(m)
		n++
	}
	// What is left: about 4 KiB of backlog, plus what the client had
	// prefetched before the eviction (its receiver queue).
	if n == 0 || n > 20 {
		t.Fatalf("received %d of 32 messages after eviction to 4 KiB of 1 KiB messages", n)
	}
	// Eviction never blocks producers.
	if _, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "quota-evict"}); err != nil {
		t.Fatalf("producer under consumer_backlog_eviction: %v", err)
	}
}

func mustTopic(t *testing.T, s string) TopicName {
	t.Helper()
	n, err := ParseTopicName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
