package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/managedledger"
)

// publishBatch stores n messages as one batch entry.
func publishBatch(t *testing.T, c pulsar.Client, topic string, n int) {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: uint(n),
		BatchingMaxPublishDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	done := make(chan error, n)
	for i := range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("b-%02d", i))},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { done <- err })
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// batchAckRound subscribes, receives the batch, acknowledges the messages
// for which ack returns true, and closes; it returns what it received.
func batchAckRound(t *testing.T, url, topic string, want int, ack func(i int) bool) []string {
	t.Helper()
	c := newClient(t, url)
	defer c.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		EnableBatchIndexAcknowledgment: true, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for i, m := range receiveFor(t, cons, want) {
		got = append(got, string(m.Payload()))
		if ack(i) {
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	sort.Strings(got)
	return got
}

func startBatchAckBroker(t *testing.T, ledgers managedledger.Factory, enabled bool) (*Broker, string) {
	t.Helper()
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AcknowledgmentAtBatchIndexLevelEnabled: enabled}, ledgers)
	return b, serveTestBroker(t, b)
}

// With acknowledgmentAtBatchIndexLevelEnabled, messages of a batch acked
// one by one are not delivered again when the batch is redelivered, also
// after the topic loads again; without it the whole batch comes back, as
// in Pulsar, and nothing is lost either way.
func TestBatchIndexAcknowledgement(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		t.Run(fmt.Sprintf("enabled=%v", enabled), func(t *testing.T) {
			ledgers := testLedgers(t, 50)
			b, url := startBatchAckBroker(t, ledgers, enabled)
			topic := fmt.Sprintf("persistent://public/default/batch-ack-%v", enabled)
			func() {
				c := newClient(t, url)
				defer c.Close()
				// Subscribe first so the subscription starts before the batch.
				cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
				if err != nil {
					t.Fatal(err)
				}
				cons.Close()
				publishBatch(t, c, topic, 10)
			}()
			first := batchAckRound(t, url, topic, 10, func(i int) bool { return i%2 == 0 })
			if len(first) != 10 {
				t.Fatalf("first round received %d; want the whole batch of 10", len(first))
			}
			want := []string{"b-01", "b-03", "b-05", "b-07", "b-09"}
			if !enabled {
				want = first
			}
			if got := batchAckRound(t, url, topic, len(want), func(int) bool { return false }); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after acking the even messages: redelivered %v; want %v", got, want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b.UnloadAll(ctx)
			_, url2 := startBatchAckBroker(t, ledgers, enabled)
			if got := batchAckRound(t, url2, topic, len(want), func(int) bool { return true }); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the topic loaded again: %v; want %v", got, want)
			}
			if got := batchAckRound(t, url2, topic, 0, func(int) bool { return true }); len(got) != 0 {
				t.Fatalf("after acknowledging everything: %v; want nothing", got)
			}
		})
	}
}
