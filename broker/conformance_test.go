package broker

// Broker behaviours the official Go client's own integration suite
// checks (make compat), each as a test of ours: Pulsar's broker is the
// spec, and these failed against Magnetar before the fix named in each.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/log"
)

// Two live producers of one topic cannot share a name (Pulsar's
// NamingException, answered ProducerBusy); the suite's
// TestProducerDuplicateNameOnSameTopic and
// TestExactlyOnceWithProducerNameSpecified. Once the first closes, the
// name is free again.
func TestProducerNameIsUniquePerTopic(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	p1, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "named", Name: "p-name"})
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "named", Name: "p-name"}); err == nil {
		p2.Close()
		t.Fatal("a second producer with the same name was accepted")
	} else if !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("second producer with the same name: %v, want ProducerBusy", err)
	}
	other, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "named-other", Name: "p-name"})
	if err != nil {
		t.Fatalf("the same name on another topic: %v", err)
	}
	other.Close()
	p1.Close()
	again, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "named", Name: "p-name"})
	if err != nil {
		t.Fatalf("the name after its producer closed: %v", err)
	}
	again.Close()
}

// A second Exclusive producer is refused with ProducerFenced, a Shared one
// next to an exclusive producer with ProducerBusy (the suite's
// TestExclusiveProducer).
func TestExclusiveProducerRefusals(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "excl-go", ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: "excl-go", ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if err == nil || !strings.Contains(err.Error(), "ProducerFenced") {
		t.Fatalf("second exclusive producer: %v, want ProducerFenced", err)
	}
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: "excl-go"})
	if err == nil || !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("shared producer next to an exclusive one: %v, want ProducerBusy", err)
	}
}

// Terminating a topic disconnects its producers, as Pulsar does: a
// producer sending in a loop sees ErrTopicTerminated (or, closed by its
// client for that reason, ErrProducerClosed) within seconds, not a send
// timeout (the suite's TestTopicTermination).
func TestTerminateDisconnectsProducers(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	const name = "persistent://public/default/term-loop"
	client := newClient(t, env.url)
	p := newProducer(t, client, name, pulsar.ProducerOptions{SendTimeout: 2 * time.Second})
	sendN(t, p, 3)
	result := make(chan error, 1)
	go func() {
		for {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: make([]byte, 1024)}); err != nil {
				result <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if _, err := env.admin.Topics().Terminate(topicName(t, name)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		if !errors.Is(err, pulsar.ErrTopicTerminated) && !errors.Is(err, pulsar.ErrProducerClosed) {
			t.Fatalf("send after terminate failed with %v, want ErrTopicTerminated or ErrProducerClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sends still succeed 10 s after terminate")
	}
}

// A NonDurable consumer without a start message id starts where its
// initial position says (Latest by default), and its subscription does not
// outlive it: a new one after the first closed sees only what is sent
// after it (the suite's TestConsumerNonDurable; it got the first message
// again).
func TestNonDurableConsumerStartsAtLatest(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "nondurable", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(s string) {
		t.Helper()
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(s)}); err != nil {
			t.Fatal(err)
		}
	}
	subscribe := func() pulsar.Consumer {
		t.Helper()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "nondurable", SubscriptionName: "nd", Type: pulsar.Shared,
			SubscriptionMode: pulsar.NonDurable})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	send("before")
	cons := subscribe()
	send("m1")
	if got := receive(t, cons, 1, true); got[0] != "m1" {
		t.Fatalf("first non-durable consumer got %q, want m1", got[0])
	}
	cons.Close()
	send("m2")
	cons = subscribe()
	defer cons.Close()
	send("m3")
	if got := receive(t, cons, 1, true); got[0] != "m3" {
		t.Fatalf("second non-durable consumer got %q, want m3", got[0])
	}
}

// Failover: when the active consumer closes after acknowledging the first
// half, the standby that takes over starts at the first unacknowledged
// message, not at the start (reported by a user: it got message 0 again).
func TestFailoverTakeoverSkipsAcknowledged(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	opts := func(name string) pulsar.ConsumerOptions {
		// Acks with a receipt: a's close follows its acknowledgements'
		// arrival at the broker, not a guess at how long they take.
		return pulsar.ConsumerOptions{Topic: "failover-takeover", SubscriptionName: "s", Type: pulsar.Failover, Name: name,
			AckWithResponse: true}
	}
	a, err := c.Subscribe(opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Subscribe(opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	produce(t, c, "failover-takeover", 100, false)
	expectOrdered(t, receive(t, a, 50, true), 50)
	a.Close()
	got := receive(t, b, 50, true)
	for i, m := range got {
		if want := fmt.Sprintf("m-%05d", 50+i); m != want {
			t.Fatalf("after the takeover message %d is %q, want %q", i, m, want)
		}
	}
}

// A pattern consumer subscribed right after partitioned topics are
// created finds their partitions, though nothing was written to them yet:
// Pulsar creates the partitions with the partitioned topic, so the
// namespace's topic list has them (the suite's
// TestRegexTopicGetLastMessageIDs and TestRegexConsumerReconsumeLater;
// the list had none, and the consumer found them only at its next
// discovery, a minute later).
func TestPatternConsumerFindsNewPartitions(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	for _, name := range []string{"rx-a", "rx-b"} {
		if err := env.admin.Topics().Create(topicName(t, "persistent://public/default/"+name), 2); err != nil {
			t.Fatal(err)
		}
	}
	client := newClient(t, env.url)
	cons, err := client.Subscribe(pulsar.ConsumerOptions{TopicsPattern: "persistent://public/default/rx-.*",
		SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ids, err := cons.GetLastMessageIDs()
	if err != nil || len(ids) != 4 {
		t.Fatalf("pattern consumer sees %d partitions (%v), want 4", len(ids), err)
	}
	produce(t, client, "persistent://public/default/rx-b", 10, false)
	if got := receive(t, cons, 10, true); len(got) != 10 {
		t.Fatalf("received %d", len(got))
	}
}

// A producer naming an initial subscription creates it at the earliest
// position: the Go client's dead-letter producer does, so a DLQ consumer
// that subscribes later finds every dead-lettered message (the suite's
// TestDeadLetterTopicWithInitialSubscription; the subscription was not
// created and the consumer, starting at the latest, found none).
func TestProducerInitialSubscription(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	const topic, dlq = "dlq-init", "dlq-init-my-sub-DLQ"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "my-sub", Type: pulsar.Shared,
		NackRedeliveryDelay: 100 * time.Millisecond,
		DLQ:                 &pulsar.DLQPolicy{MaxDeliveries: 1, DeadLetterTopic: dlq, InitialSubscriptionName: "init-sub"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produce(t, c, topic, 10, false)
	for range 20 { // each message is nacked until it is dead-lettered
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			break
		}
		cons.Nack(m)
	}
	dlqCons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: dlq, SubscriptionName: "init-sub"})
	if err != nil {
		t.Fatal(err)
	}
	defer dlqCons.Close()
	got := receive(t, dlqCons, 10, true)
	sort.Strings(got)
	expectOrdered(t, got, 10)
}

// Topic stats show each producer's and consumer's client version (as its
// CONNECT said, with the client's description) and the metadata it was
// created with, as Pulsar's do (the suite's TestClientVersion,
// TestProducerMetadata and TestConsumerMetadata; neither was shown).
func TestStatsShowClientVersionAndMetadata(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	const name = "persistent://public/default/client-info"
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: env.url, Description: "stats-test",
		Logger: log.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p := newProducer(t, client, name, pulsar.ProducerOptions{Properties: map[string]string{"role": "writer"}})
	defer p.Close()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s",
		Properties: map[string]string{"team": "a", "tier": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	st, err := env.admin.Topics().GetStats(topicName(t, name))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Publishers) != 1 {
		t.Fatalf("publishers: %+v", st.Publishers)
	}
	pub := st.Publishers[0]
	if !strings.HasPrefix(pub.ClientVersion, "Pulsar-Go-version") || !strings.HasSuffix(pub.ClientVersion, "-stats-test") ||
		pub.Metadata["role"] != "writer" || pub.ConnectedSince == "" {
		t.Fatalf("publisher stats: version %q, metadata %v, connected since %q", pub.ClientVersion, pub.Metadata, pub.ConnectedSince)
	}
	cs := st.Subscriptions["s"].Consumers
	if len(cs) != 1 || !strings.HasSuffix(cs[0].ClientVersion, "-stats-test") || len(cs[0].Metadata) != 2 ||
		cs[0].Metadata["team"] != "a" || cs[0].Metadata["tier"] != "1" {
		t.Fatalf("consumer stats: %+v", cs)
	}
}

// On a partitioned topic a Failover subscription's partitions spread over
// its consumers: partition i's active consumer is the (i mod n)-th in name
// order, as Pulsar picks it (the suite's
// TestPartitionTopic_ActiveConsumerChanged; the first consumer was active
// on every partition). When one leaves, the rest cover all partitions.
func TestFailoverSpreadsPartitions(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	const name = "persistent://public/default/fo-parts"
	if err := env.admin.Topics().Create(topicName(t, name), 3); err != nil {
		t.Fatal(err)
	}
	client := newClient(t, env.url)
	var consumers []pulsar.Consumer
	for i := range 3 {
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s", Type: pulsar.Failover,
			Name: fmt.Sprintf("consumer-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		consumers = append(consumers, c)
	}
	active := func(partition int) string {
		t.Helper()
		st, err := env.admin.Topics().GetStats(topicName(t, fmt.Sprintf("%s-partition-%d", name, partition)))
		if err != nil {
			t.Fatal(err)
		}
		return st.Subscriptions["s"].ActiveConsumerName
	}
	for p := range 3 {
		if got, want := active(p), fmt.Sprintf("consumer-%d", p); got != want {
			t.Fatalf("partition %d: active %q, want %q", p, got, want)
		}
	}
	consumers[0].Close()
	eventually(t, "the others cover every partition", func() error {
		for p := range 3 {
			if got, want := active(p), fmt.Sprintf("consumer-%d", 1+p%2); got != want {
				return fmt.Errorf("partition %d: active %q, want %q", p, got, want)
			}
		}
		return nil
	})
	produce(t, client, name, 30, false)
	n := 0
	for _, c := range consumers[1:] {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		for {
			m, err := c.Receive(ctx)
			if err != nil {
				break
			}
			_ = c.Ack(m)
			n++
		}
		cancel()
	}
	if n != 30 {
		t.Fatalf("the remaining consumers received %d of 30", n)
	}
}

// A reader that seeks by time to now reads only what is sent afterwards:
// the SEEK disconnects it and its client subscribes again with its
// original start id (earliest here), which must not restart it
// (the suite's TestReaderWithSeekByTime; it read everything again).
func TestReaderSeekByTimeResumesAtTheSeek(t *testing.T) {
	for _, start := range []pulsar.MessageID{pulsar.EarliestMessageID(), pulsar.LatestMessageID()} {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			_, url := startBroker(t)
			c := newClient(t, url)
			const topic = "seek-time-reader"
			produce(t, c, topic, 10, false)
			r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: start})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			// Publish times are milliseconds: a seek to the very
			// millisecond the last messages were published in finds
			// them, as it should (publish time >= target).
			time.Sleep(2 * time.Millisecond)
			if err := r.SeekByTime(time.Now()); err != nil {
				t.Fatal(err)
			}
			// (The suite also asks HasNext here; the Go client answers it
			// from a GET_LAST_MESSAGE_ID that can race its own reconnect
			// after the seek, in about 1 of 10 runs in-process on either
			// order of the broker's answers, so this test checks what the
			// reader reads instead.)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if m, err := r.Next(ctx); err == nil {
				t.Fatalf("read %q after seeking to now", m.Payload())
			}
			cancel()
			produce(t, c, topic, 5, false)
			for i := range 5 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				m, err := r.Next(ctx)
				cancel()
				if err != nil || string(m.Payload()) != fmt.Sprintf("m-%05d", i) {
					t.Fatalf("message %d after the seek: %v %v", i, m, err)
				}
			}
		})
	}
}

// A subscription without consumers takes the type of the next consumer, as
// Pulsar's replaces its dispatcher; while consumers of another type are
// connected the newcomer is refused with ConsumerBusy (the suite's
// TestCumulativeAckWithResponse reused a subscription name a Shared
// consumer had left; it was refused with SubscriptionNotFound).
func TestSubscriptionTypeChangesWhenIdle(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	sub := func(typ pulsar.SubscriptionType) (pulsar.Consumer, error) {
		return c.Subscribe(pulsar.ConsumerOptions{Topic: "type-change", SubscriptionName: "s", Type: typ,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	}
	shared, err := sub(pulsar.Shared)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub(pulsar.Exclusive); err == nil || !strings.Contains(err.Error(), "ConsumerBusy") {
		t.Fatalf("exclusive consumer next to a shared one: %v, want ConsumerBusy", err)
	}
	produce(t, c, "type-change", 5, false)
	receive(t, shared, 2, true)
	shared.Close()
	excl, err := sub(pulsar.Exclusive)
	if err != nil {
		t.Fatalf("exclusive consumer on the idle shared subscription: %v", err)
	}
	defer excl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last pulsar.Message
	for i := 2; i < 5; i++ {
		m, err := excl.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("m-%05d", i); string(m.Payload()) != want {
			t.Fatalf("the exclusive consumer got %q, want %q", m.Payload(), want)
		}
		last = m
	}
	if err := excl.AckCumulative(last); err != nil {
		t.Fatalf("cumulative ack on the subscription now exclusive: %v", err)
	}
}
