package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/managedledger"
)

// countedReads counts the entries read by position (ReadEntry,
// ReadEntriesAt: what the dispatcher reads again from its replay set).
type countedReads struct {
	managedledger.Factory
	single *atomic.Int64
}

func (f countedReads) Open(ctx context.Context, name string) (managedledger.ManagedLedger, error) {
	ml, err := f.Factory.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return countedML{ManagedLedger: ml, single: f.single}, nil
}

type countedML struct {
	managedledger.ManagedLedger
	single *atomic.Int64
}

func (m countedML) ReadEntry(ctx context.Context, pos managedledger.Position) (managedledger.Entry, error) {
	m.single.Add(1)
	return m.ManagedLedger.ReadEntry(ctx, pos)
}

func (m countedML) ReadEntriesAt(ctx context.Context, positions []managedledger.Position) ([]managedledger.Entry, error) {
	m.single.Add(int64(len(positions)))
	return m.ManagedLedger.ReadEntriesAt(ctx, positions)
}

// Reads are sized by permits over the average messages per entry: a
// consumer with room for 100 messages of a backlog of 50-message batches
// gets reads of about 2 entries, not dispatcherMaxReadBatchSize entries of
// which 98 would wait in the replay set to be read again one by one.
func TestDispatchReadsFitBatchPermits(t *testing.T) {
	var single atomic.Int64
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		countedReads{Factory: testLedgers(t, 0), single: &single})
	url := serveTestBroker(t, b)
	c := newClient(t, url)
	const topic = "persistent://public/default/batched-backlog"
	sub, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	const entries, perEntry = 100, 50
	for range entries {
		publishBatch(t, c, topic, perEntry)
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range entries * perEntry {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		_ = cons.Ack(m)
	}
	// Without the sizing it was 2,402 for these 100 entries: they went in
	// and out of the replay set over and over; with a first read of 100
	// entries before the average was known, 98.
	if n := single.Load(); n > entries/10 {
		t.Fatalf("%d of %d entries were read again one by one; want the reads sized by the permits", n, entries)
	}
	t.Logf("%d entries read again", single.Load())
}

// failOnce fails the first read by position.
type failOnce struct {
	managedledger.Factory
	failed *atomic.Bool
}

func (f failOnce) Open(ctx context.Context, name string) (managedledger.ManagedLedger, error) {
	ml, err := f.Factory.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return failOnceML{ManagedLedger: ml, failed: f.failed}, nil
}

type failOnceML struct {
	managedledger.ManagedLedger
	failed *atomic.Bool
}

func (m failOnceML) ReadEntriesAt(ctx context.Context, positions []managedledger.Position) ([]managedledger.Entry, error) {
	if m.failed.CompareAndSwap(false, true) {
		return nil, errors.New("injected read failure")
	}
	return m.ManagedLedger.ReadEntriesAt(ctx, positions)
}

// A redelivery whose read fails is tried again: the entries are not lost
// from the subscription.
func TestRedeliveryReadFailureRetries(t *testing.T) {
	var failed atomic.Bool
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		failOnce{Factory: testLedgers(t, 0), failed: &failed})
	c := newClient(t, serveTestBroker(t, b))
	const topic = "persistent://public/default/redeliver-retry"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		NackRedeliveryDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produce(t, c, topic, 5, false)
	for _, m := range receiveFor(t, cons, 5) {
		cons.Nack(m)
	}
	again := receiveFor(t, cons, 5)
	if len(again) != 5 || !failed.Load() {
		t.Fatalf("redelivered %d of 5 (read failure injected: %v)", len(again), failed.Load())
	}
}
