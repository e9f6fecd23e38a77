package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// receiveFor collects what cons receives: at least want messages (or
// what came within 10 s), and then whatever else arrives until nothing has
// come for 300 ms, so that tests can also check that no more came.
func receiveFor(t *testing.T, cons pulsar.Consumer, want int) []pulsar.Message {
	t.Helper()
	return collect(t, []pulsar.Consumer{cons}, want)[0]
}

// collect is receiveFor over several consumers: want counts them all.
func collect(t *testing.T, consumers []pulsar.Consumer, want int) [][]pulsar.Message {
	t.Helper()
	const quiet = 300 * time.Millisecond
	out := make([][]pulsar.Message, len(consumers))
	deadline := time.Now().Add(10 * time.Second)
	last, total := time.Now(), 0
	for time.Now().Before(deadline) && (total < want || time.Since(last) < quiet) {
		for i, cons := range consumers {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			m, err := cons.Receive(ctx)
			cancel()
			if err == nil {
				out[i] = append(out[i], m)
				last, total = time.Now(), total+1
			}
		}
	}
	return out
}

func ackAll(t *testing.T, cons pulsar.Consumer, msgs []pulsar.Message) {
	t.Helper()
	for _, m := range msgs {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// A Shared consumer at maxUnackedMessagesPerConsumer gets nothing more
// until half of what it holds is acknowledged; then it is filled up to the
// limit again, and nothing is lost.
func TestMaxUnackedMessagesPerConsumer(t *testing.T) {
	_, url := startPolicyBrokerWith(t, func(*resources.Policies) {}, 0, Config{MaxUnackedMessagesPerConsumer: 10})
	c := newClient(t, url)
	const topic = "t/ns/unacked-consumer"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produce(t, c, topic, 30, false)
	first := receiveFor(t, cons, 10)
	if len(first) != 10 {
		t.Fatalf("received %d messages before acknowledging; want the limit, 10", len(first))
	}
	ackAll(t, cons, first[:4]) // 6 still unacked: above half, stays blocked
	if more := receiveFor(t, cons, 0); len(more) != 0 {
		t.Fatalf("received %d more with 6 of 10 unacked; want none until half", len(more))
	}
	ackAll(t, cons, first[4:5]) // 5 unacked: half, unblocked, filled to 10 again
	second := receiveFor(t, cons, 5)
	if len(second) != 5 {
		t.Fatalf("received %d after acking down to half; want 5 (back to the limit)", len(second))
	}
	seen := map[string]bool{}
	all := append(append([]pulsar.Message{}, first...), second...)
	for {
		ackAll(t, cons, all)
		for _, m := range all {
			seen[string(m.Payload())] = true
		}
		if all = receiveFor(t, cons, 0); len(all) == 0 {
			break
		}
	}
	if len(seen) != 30 {
		t.Fatalf("received %d distinct messages; want 30", len(seen))
	}
}

// maxUnackedMessagesPerSubscription bounds what all consumers of a Shared
// subscription hold together; an Exclusive subscription has no such limit.
func TestMaxUnackedMessagesPerSubscription(t *testing.T) {
	_, url := startPolicyBrokerWith(t, func(*resources.Policies) {}, 0, Config{MaxUnackedMessagesPerSubscription: 8})
	c := newClient(t, url)
	const topic = "t/ns/unacked-sub"
	var consumers []pulsar.Consumer
	for i := range 2 {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
			Name: fmt.Sprintf("c%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		consumers = append(consumers, cons)
	}
	excl, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "x", Type: pulsar.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer excl.Close()
	produce(t, c, topic, 20, false)
	got := collect(t, consumers, 8)
	held := len(got[0]) + len(got[1])
	if held != 8 {
		t.Fatalf("the shared subscription's consumers hold %d unacked messages; want the subscription limit, 8", held)
	}
	if n := len(receiveFor(t, excl, 20)); n != 20 {
		t.Fatalf("the exclusive subscription received %d; want all 20 (no unacked limit)", n)
	}
}

// A namespace's max_unacked_messages_per_consumer overrides the broker's.
func TestNamespaceMaxUnackedMessagesPerConsumer(t *testing.T) {
	three := 3
	_, url := startPolicyBrokerWith(t, func(p *resources.Policies) { p.MaxUnackedMessagesPerConsumer = &three }, 0,
		Config{MaxUnackedMessagesPerConsumer: 100})
	c := newClient(t, url)
	const topic = "t/ns/unacked-policy"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produce(t, c, topic, 10, false)
	if n := len(receiveFor(t, cons, 3)); n != 3 {
		t.Fatalf("received %d; want the namespace's limit, 3", n)
	}
}
