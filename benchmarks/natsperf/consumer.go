package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// The e2e consumer is JetStream's nearest equivalent of a Pulsar consumer
// that acknowledges each message, configured the fastest way that keeps
// the same guarantee:
//
//   - a durable pull consumer with explicit acks: the server tracks each
//     message until its ack, as a Pulsar subscription's cursor does. An
//     ordered consumer (ack none) would be faster but tracks nothing, so
//     it is not the same work; AckAll (cumulative) would ack less than a
//     Pulsar consumer calling Acknowledge per message.
//   - every message is acked with Ack(), which sends the ack and does not
//     wait for a reply, like Pulsar's Acknowledge (DoubleAck would add a
//     round trip Pulsar does not have).
//   - Consume() keeps pull requests in flight for up to pullBatch
//     messages, the counterpart of Pulsar's receiver queue (1000 by
//     default); maxAckPending matches the broker's default limit of
//     unacknowledged messages per consumer (50000).
//   - pull rather than push: pull is what the NATS client recommends and
//     optimises; both deliver over the same connection.
const (
	pullBatch     = 1000
	maxAckPending = 50000
	// ackWait is long so that a run whose consumer lags does not see
	// redeliveries, which would count twice.
	ackWait = 2 * time.Minute
)

// consumer receives every message of the stream on its own connection.
type consumer struct {
	nc    *nats.Conn
	cc    jetstream.ConsumeContext
	tally *perfkit.Tally // measured end-to-end latencies

	receivedAll atomic.Int64 // every message, for the timeline and the drain
	ackErrs     atomic.Int64
	firstErr    atomic.Pointer[error] // first consume or ack error, for a warning
}

// startConsumer creates the durable consumer and starts receiving before
// any message is published, so end-to-end latency never includes a
// backlog the consumer was not there for.
func startConsumer(ctx context.Context, url string) (*consumer, error) {
	c := &consumer{tally: perfkit.NewTally()}
	nc, err := nats.Connect(url, nats.Name("natsperf-consumer"), nats.NoReconnect())
	if err != nil {
		return nil, fmt.Errorf("consumer: connecting to %s: %w", url, err)
	}
	c.nc = nc
	if err := c.subscribe(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (c *consumer) subscribe(ctx context.Context) error {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return fmt.Errorf("consumer: jetstream context: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{
		Durable:       consumerName,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxAckPending: maxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("consumer: creating %s on %s: %w", consumerName, streamName, err)
	}
	c.cc, err = cons.Consume(c.handle, jetstream.PullMaxMessages(pullBatch),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { c.noteErr(err) }))
	if err != nil {
		return fmt.Errorf("consumer: consume: %w", err)
	}
	return nil
}

// handle runs on the subscription's goroutine, one message at a time.
func (c *consumer) handle(m jetstream.Msg) {
	now := time.Now()
	if sent, measured, ok := readStamp(m.Data()); ok && measured {
		c.tally.Record(now.Sub(sent))
	}
	c.receivedAll.Add(1)
	if err := m.Ack(); err != nil {
		c.ackErrs.Add(1)
		c.noteErr(fmt.Errorf("ack: %w", err))
	}
}

func (c *consumer) noteErr(err error) { c.firstErr.CompareAndSwap(nil, &err) }

// firstError is the first error seen, or nil.
func (c *consumer) firstError() error {
	if p := c.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

// catchUp waits until the consumer has received want messages, or
// timeout. A lagging consumer is a result, not a failure: the caller
// reports what arrived.
func (c *consumer) catchUp(want int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for c.receivedAll.Load() < want {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func (c *consumer) close() {
	c.cc.Stop()
	c.nc.Close()
}
