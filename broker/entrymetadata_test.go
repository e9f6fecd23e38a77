package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
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

// When every entry was consumed and trimmed, the index continues from the
// broker index cursor, which also is no subscription.
func TestBrokerEntryIndexSurvivesTrimming(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ledgers := managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: 1})
	cfg := Config{BrokerEntryIndex: true}
	ml, err := ledgers.Open(ctx, "public/default/persistent/trimmed")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := ml.OpenCursor(ctx, "s", managedledger.CursorOptions{Initial: managedledger.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newEntryStamper(ctx, cfg, ml)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0),
		PublishTime: proto.Uint64(1)}, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	var last managedledger.Position
	for range 3 {
		done := make(chan error, 1)
		s.add(ml, entry, crc32c.Of(crc32c.Checksum(entry)), 2, func(p managedledger.Position, err error) { last = p; done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.MarkDelete(ctx, last); err != nil {
		t.Fatal(err)
	}
	_ = ml.Close(ctx)
	reopened, _ := ledgers.Open(ctx, "public/default/persistent/trimmed")
	// As the ledger-backed stream is once every ledger was consumed and a
	// new owner rolled over: nothing stored to read the index from.
	ml = allTrimmed{reopened}
	s2, err := newEntryStamper(ctx, cfg, ml)
	if err != nil {
		t.Fatal(err)
	}
	if s2.last != 5 {
		t.Fatalf("index after reloading a trimmed topic: %d; want 5 (3 entries of 2 messages)", s2.last)
	}
	tp := &topic{ml: ml}
	for _, c := range tp.subscriptionCursors() {
		if c.Name() == indexCursor {
			t.Fatal("the index cursor is listed as a subscription")
		}
	}
	// Index off: the cursor goes, so it pins nothing.
	if _, err := newEntryStamper(ctx, Config{}, ml); err != nil {
		t.Fatal(err)
	}
	for _, c := range ml.Cursors() {
		if c.Name() == indexCursor {
			t.Fatal("the index cursor outlived the index interceptor")
		}
	}
}

// allTrimmed is a stream whose entries were all trimmed.
type allTrimmed struct{ managedledger.ManagedLedger }

func (allTrimmed) Entries() int64 { return 0 }

func (allTrimmed) ReadEntry(context.Context, managedledger.Position) (managedledger.Entry, error) {
	return managedledger.Entry{}, managedledger.ErrInvalidPosition
}
