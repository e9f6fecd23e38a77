package perfclient

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// subscribe opens cfg.Consumers consumers on each topic, all on the one
// subscription. They start at the latest message: in e2e they subscribe
// before anything is sent, and a subscription that exists resumes from
// its own position whatever is asked.
func (r *runner) subscribe(client pulsar.Client) ([]pulsar.Consumer, error) {
	var out []pulsar.Consumer
	for _, topic := range r.cfg.Topics {
		for range r.cfg.Consumers {
			c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: r.cfg.Subscription,
				Type: r.cfg.SubscriptionType, ReceiverQueueSize: r.cfg.ReceiverQueue,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest})
			if err != nil {
				closeConsumers(out)
				return nil, fmt.Errorf("subscribe %s to %s: %w", r.cfg.Subscription, topic, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func closeConsumers(cs []pulsar.Consumer) {
	for _, c := range cs {
		c.Close()
	}
}

// startConsumers receives on every consumer until the returned stop is
// called, which waits for the receive loops to end.
func (r *runner) startConsumers(consumers []pulsar.Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, c := range consumers {
		wg.Go(func() { r.consumeLoop(ctx, c, i) })
	}
	return func() { cancel(); wg.Wait() }
}

func (r *runner) consumeLoop(ctx context.Context, c pulsar.Consumer, client int) {
	for {
		msg, err := c.Receive(ctx)
		if err != nil {
			if !errors.Is(ctx.Err(), context.Canceled) {
				r.warnOnce("receive", err) // a closed consumer: nothing more will come
			}
			return
		}
		r.received(client, msg.Payload(), time.Now())
		if err := c.AckID(msg.ID()); err != nil {
			r.warnOnce("ack", err)
		}
	}
}

// received counts one message and, when it carries its send time, its
// end-to-end latency.
func (r *runner) received(client int, payload []byte, now time.Time) {
	r.n.conOps.Add(1)
	r.n.conBytes.Add(int64(len(payload)))
	sentAt := sendTime(payload, now)
	measured := r.measuredReceipt(now, sentAt)
	if sentAt != 0 {
		r.e2e.record(client, time.Duration(now.UnixNano()-sentAt), measured)
	}
	if measured {
		r.n.consumed.Add(1)
		r.n.conWindowBytes.Add(int64(len(payload)))
	}
}

// sendTime is the send time a payload carries, or 0 if it is too short or
// the time is implausible (a day before now, or a minute after): a
// message from another producer carries none.
func sendTime(payload []byte, now time.Time) int64 {
	if len(payload) < TimestampBytes {
		return 0
	}
	t := int64(binary.BigEndian.Uint64(payload))
	if t < now.Add(-24*time.Hour).UnixNano() || t > now.Add(time.Minute).UnixNano() {
		return 0
	}
	return t
}

// measuredReceipt says whether a message received at now belongs to the
// window. In e2e a message belongs to it if its producer counted it: sent
// at or after the window's start, so that Consumed can be set against
// Published. Consuming alone, what arrives within the window counts.
func (r *runner) measuredReceipt(now time.Time, sentAt int64) bool {
	if r.cfg.Mode == ModeE2E {
		return sentAt >= r.windowStartNanos
	}
	return !now.Before(r.windowStart) && !r.pastWindow(now) && r.receipts.take()
}
