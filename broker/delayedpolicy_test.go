package broker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// TestDelayedDeliveryPolicies: a topic's delayedDelivery policy (taken
// with pulsaradmin's maxDelayInMillis name too) refuses a SEND asking a
// longer delay than its maximum, in Pulsar's words; inactive, it delivers
// delayed messages at once; without one, the namespace's applies, and the
// applied value says so.
func TestDelayedDeliveryPolicies(t *testing.T) {
	b, url := startPolicyBrokerWith(t, func(p *resources.Policies) {}, 0, Config{})
	c := newClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "persistent://t/ns/delayed-policy"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	set := func(v string) {
		t.Helper()
		var raw json.RawMessage
		if v != "" {
			raw = json.RawMessage(v)
		}
		if err := b.SetTopicPolicy(ctx, topic, "delayedDelivery", false, raw); err != nil {
			t.Fatal(err)
		}
		time.Sleep(sizeLimitRefresh + 100*time.Millisecond) // the topic reads its policy at most once a second
	}
	if err := b.SetTopicPolicy(ctx, topic, "delayedDelivery", false, json.RawMessage(`{"active":true,"tickTime":-1}`)); err == nil {
		t.Fatal("a negative tick time was accepted")
	}

	set(`{"active":true,"tickTime":0,"maxDelayInMillis":60000}`)
	// A message refused with NotAllowed stays pending in the Go client
	// until its send timeout, and the client forgets the producer on that
	// connection (as against Pulsar, which refuses it the same way): the
	// refused one gets a producer of its own.
	refused, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	if _, err := refused.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("too late"), DeliverAfter: 2 * time.Minute}); err == nil {
		t.Fatal("a 2 min delay past a 60 s maximum was stored")
	}
	a, _ := policyAdmin(t, b)
	if st, err := a.Topics().GetStats(topicName(t, topic)); err != nil || st.MsgCounterIn != 0 {
		t.Fatalf("stored after the refused message: %+v %v, want nothing", st.MsgCounterIn, err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("soon"), DeliverAfter: 300 * time.Millisecond}); err != nil {
		t.Fatalf("a delay within the maximum: %v", err)
	}
	if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "soon" {
		t.Fatalf("the message within the maximum: %v %v", m, err)
	} else {
		cons.Ack(m)
	}

	set(`{"active":false,"tickTime":1000}`)
	receivedAtOnce := func(payload string) {
		t.Helper()
		sent := time.Now()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload), DeliverAfter: time.Minute}); err != nil {
			t.Fatal(err)
		}
		m, err := cons.Receive(ctx)
		if err != nil || string(m.Payload()) != payload || time.Since(sent) > 10*time.Second {
			t.Fatalf("%s: %v %v after %v, want it at once", payload, m, err, time.Since(sent))
		}
		cons.Ack(m)
	}
	receivedAtOnce("inactive on the topic")

	// Without the topic's own, the namespace's applies.
	if _, err := b.cfg.Resources.UpdateNamespace(ctx, "t", "ns", func(p *resources.Policies) error {
		p.DelayedDeliveryPolicies = &resources.DelayedDeliveryPolicies{Active: false, TickTime: 1000}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	set("")
	applied, err := b.TopicPolicy(ctx, topic, "delayedDelivery", false, true)
	if got, ok := applied.(resources.DelayedDeliveryPolicies); err != nil || !ok || got.Active || got.TickTime != 1000 {
		t.Fatalf("applied without a topic policy: %#v %v, want the namespace's", applied, err)
	}
	receivedAtOnce("inactive on the namespace")
}
