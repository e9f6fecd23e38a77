package broker

// Dispatch and flow-control edge cases, each once a bug: a slow Key_Shared
// consumer, readers started inside a batch and their cursors, one pending
// publish per connection, an ack past the end, a Failover takeover, a
// congested consumer connection.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// A Key_Shared consumer that stops receiving holds back only its own keys
// (it once sent the dispatcher into endless recursion); when it leaves,
// the other consumer gets everything.
func TestKeySharedSlowConsumer(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	opts := func(name string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: "slow-keys", SubscriptionName: "s", Type: pulsar.KeyShared, Name: name,
			ReceiverQueueSize: 5, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest}
	}
	fast, err := c.Subscribe(opts("fast"))
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	slow, err := c.Subscribe(opts("slow"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "slow-keys", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := 0; i < n; i++ {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i%16),
			Payload: []byte(fmt.Sprintf("m-%05d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(seen) < 20 { // the fast consumer's keys keep flowing
		m, err := fast.Receive(ctx)
		if err != nil {
			t.Fatalf("fast consumer stuck after %d: %v", len(seen), err)
		}
		fast.Ack(m)
		seen[string(m.Payload())] = true
	}
	slow.Close() // its keys (and what it held) move to the fast consumer
	for len(seen) < n {
		m, err := fast.Receive(ctx)
		if err != nil {
			t.Fatalf("after the slow consumer left: %d of %d: %v", len(seen), n, err)
		}
		fast.Ack(m)
		seen[string(m.Payload())] = true
	}
}

// Readers started at a message inside a batch, inclusively, begin at it.
func TestReaderStartInsideBatchInclusive(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	ids := produce(t, c, "reader-batch", 20, true)
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: "reader-batch", StartMessageID: ids[5],
		StartMessageIDInclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := r.Next(ctx)
	if err != nil || string(m.Payload()) != "m-00005" {
		t.Fatalf("first message from an inclusive start at message 5: %v %v", m, err)
	}
}

// Closed readers leave no cursor behind.
func TestReadersReleaseTheirCursors(t *testing.T) {
	b, url := startBroker(t)
	c := newClient(t, url)
	produce(t, c, "readers", 3, false)
	for i := 0; i < 5; i++ {
		r, err := c.CreateReader(pulsar.ReaderOptions{Topic: "readers", StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	tp, err := b.getTopic(context.Background(), TopicName{Domain: "persistent", Tenant: "public", Namespace: "default", Local: "readers"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(tp.ml.Cursors()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d cursors left after the readers closed", len(tp.ml.Cursors()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// maxPendingPublishRequestsPerConnection=1 still lets SENDs through one
// at a time (the resume threshold once rounded to zero and froze the
// connection).
func TestMaxPendingPublishOne(t *testing.T) {
	b := New(Config{ClusterName: "test", MaxPendingPublishRequestsPerConnection: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		testLedgers(t, 0))
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	c := newClient(t, "pulsar://"+srv.Addr().String())
	produce(t, c, "one-at-a-time", 20, false)
}

// A cumulative ack of a position past the end is refused and loses
// nothing: a later consumer still gets every unacknowledged message.
func TestBadAckLosesNothing(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	produce(t, c, "bad-ack", 5, false)
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: ptr("bad-ack"), Subscription: ptr("s"), SubType: pb.CommandSubscribe_Shared.Enum(),
		ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(1)), InitialPosition: pb.CommandSubscribe_Earliest.Enum()}})
	if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("subscribe: %v %v", cmd, err)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)), MessagePermits: ptr(uint32(100))}})
	for i := 0; i < 5; i++ {
		if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_MESSAGE {
			t.Fatalf("message %d: %v %v", i, cmd.GetType(), err)
		}
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: ptr(uint64(1)),
		AckType: pb.CommandAck_Cumulative.Enum(), MessageId: []*pb.MessageIdData{{LedgerId: ptr(uint64(99)), EntryId: ptr(uint64(0))}}}})
	r.conn.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "bad-ack", SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := receive(t, cons, 5, true)
	sort.Strings(got)
	expectOrdered(t, got, 5)
}

// A Failover consumer that joins and sorts first takes over; what the old
// active consumer held goes to it, in order.
func TestFailoverNewcomerTakesOverInOrder(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	opts := func(name string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: "failover-join", SubscriptionName: "s", Type: pulsar.Failover, Name: name,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true}
	}
	old, err := c.Subscribe(opts("b-old"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	produce(t, c, "failover-join", 10, false)
	got := receive(t, old, 3, true) // it holds the other 7, unacknowledged, in its queue
	expectOrdered(t, got, 3)
	newcomer, err := c.Subscribe(opts("a-new"))
	if err != nil {
		t.Fatal(err)
	}
	defer newcomer.Close()
	rest := receive(t, newcomer, 7, true)
	for i, m := range rest {
		if m != fmt.Sprintf("m-%05d", 3+i) {
			t.Fatalf("newcomer's message %d is %q: %v", i, m, rest)
		}
	}
}

// Key_Shared: a consumer that joins does not get new messages of a key
// that moved to it while another consumer still holds that key's older,
// unacknowledged messages.
func TestKeySharedJoinWaitsForOlderMessages(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	opts := func(name string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: "join-keys", SubscriptionName: "s", Type: pulsar.KeyShared, Name: name,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true}
	}
	old, err := c.Subscribe(opts("b-old"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "join-keys", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i%16),
				Payload: []byte(fmt.Sprintf("m-%05d", i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(0, 50)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var held []pulsar.Message
	for len(held) < 50 { // received, not acknowledged yet
		m, err := old.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, m)
	}
	newcomer, err := c.Subscribe(opts("a-new"))
	if err != nil {
		t.Fatal(err)
	}
	defer newcomer.Close()
	send(50, 100)
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if m, err := newcomer.Receive(wctx); err == nil {
		t.Fatalf("newcomer got %q (key %s) while older messages were unacknowledged", m.Payload(), m.Key())
	}
	wcancel()
	for _, m := range held {
		if err := old.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	m, err := newcomer.Receive(ctx)
	if err != nil {
		t.Fatalf("newcomer never got its keys after the acks: %v", err)
	}
	newcomer.Ack(m)
}

// A consumer whose socket does not keep up stops being sent entries once
// its connection is congested: the broker's queue for it stays bounded.
func TestCongestedConsumerIsNotFlooded(t *testing.T) {
	b, url := startBroker(t)
	c := newClient(t, url)
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: ptr("flood"), Subscription: ptr("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(1)), InitialPosition: pb.CommandSubscribe_Earliest.Enum()}})
	if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("subscribe: %v %v", cmd, err)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)),
		MessagePermits: ptr(uint32(1 << 20))}})
	// The raw client now stops reading; 64 MiB of messages are published.
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "flood", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	payload := make([]byte, 64<<10)
	for i := 0; i < 1024; i++ {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload}, func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	var worst int
	b.mu.Lock()
	for sc := range b.conns {
		if nc, ok := sc.t.(interface{ Pending() int }); ok {
			worst = max(worst, nc.Pending())
		}
	}
	b.mu.Unlock()
	// High water is 1 MiB; one dispatch round may overshoot by a batch.
	if worst > 16<<20 {
		t.Fatalf("%d MiB queued for a consumer that is not reading", worst>>20)
	}
	t.Logf("largest write queue: %d KiB", worst>>10)
}
