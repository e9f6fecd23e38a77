package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/managedledger"
)

func startStampingBroker(t *testing.T, ledgers managedledger.Factory, expose bool) (*Broker, string) {
	t.Helper()
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BrokerEntryTimestamp: true, BrokerEntryIndex: true, ExposeBrokerEntryMetadata: expose}, ledgers)
	return b, serveTestBroker(t, b)
}

// With both interceptors, consumers of a client that supports it get the
// broker's timestamp and a per-topic index that counts messages (a batch
// of N advances it by N) and continues after the topic loads again.
func TestBrokerEntryMetadata(t *testing.T) {
	ledgers := testLedgers(t, 3) // rollovers: the index must cross ledgers
	b, url := startStampingBroker(t, ledgers, true)
	c := newClient(t, url)
	const topic = "persistent://public/default/bem"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	produce(t, c, topic, 5, false)
	produce(t, c, topic, 4, true) // one batch entry of 4 (sent at once)
	var indices []uint64
	for i := range 9 {
		m := receiveOne(t, cons)
		if m.Index() == nil || m.BrokerPublishTime() == nil {
			t.Fatalf("message %d: index %v, broker publish time %v; want both", i, m.Index(), m.BrokerPublishTime())
		}
		if bt := *m.BrokerPublishTime(); bt.Before(before) || bt.After(time.Now().Add(time.Second)) {
			t.Fatalf("message %d: broker publish time %v is not now", i, bt)
		}
		indices = append(indices, *m.Index())
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	for i, idx := range indices {
		if idx != uint64(i) {
			t.Fatalf("indices %v; want 0..8", indices)
		}
	}
	cons.Close()
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.UnloadAll(ctx)
	// Loaded again (by another broker on the same storage): the index goes on.
	_, url2 := startStampingBroker(t, ledgers, true)
	c2 := newClient(t, url2)
	cons2, err := c2.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, c2, topic, 1, false)
	if m := receiveOne(t, cons2); m.Index() == nil || *m.Index() != 9 {
		t.Fatalf("after the topic loaded again: index %v; want 9", m.Index())
	}
}

// Without exposingBrokerEntryMetadataToClientEnabled consumers get the
// producer's bytes only; the stored metadata still orders seeks by time.
func TestBrokerEntryMetadataNotExposed(t *testing.T) {
	_, url := startStampingBroker(t, testLedgers(t, 50), false)
	c := newClient(t, url)
	const topic = "persistent://public/default/bem-hidden"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, c, topic, 3, false)
	for i := range 3 {
		m := receiveOne(t, cons)
		if m.Index() != nil || m.BrokerPublishTime() != nil {
			t.Fatalf("message %d carries broker entry metadata although it is not exposed", i)
		}
		if want := fmt.Sprintf("m-%05d", i); string(m.Payload()) != want {
			t.Fatalf("payload %q; want %q", m.Payload(), want)
		}
		_ = cons.Ack(m)
	}
	if err := cons.SeekByTime(time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m := receiveOne(t, cons); string(m.Payload()) != "m-00000" {
		t.Fatalf("after a seek to an hour ago: %q; want m-00000", m.Payload())
	}
}

func receiveOne(t *testing.T, cons pulsar.Consumer) pulsar.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
