package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// activity records a consumer's BecameActive / BecameInactive events.
type activity struct {
	mu     sync.Mutex
	events []bool
}

func (a *activity) BecameActive(pulsar.Consumer, string, int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, true)
}

func (a *activity) BecameInactive(pulsar.Consumer, string, int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, false)
}

// waitFor waits until the last event is want.
func (a *activity) waitFor(t *testing.T, who string, want bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.mu.Lock()
		n := len(a.events)
		ok := n > 0 && a.events[n-1] == want
		events := append([]bool(nil), a.events...)
		a.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: events %v; want the last to be active=%v", who, events, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Failover consumers learn through ACTIVE_CONSUMER_CHANGE which one is
// active: on subscribing, when a consumer that sorts first joins, and when
// the active one leaves.
func TestActiveConsumerChange(t *testing.T) {
	_, url := startBroker(t)
	c := newClient(t, url)
	subscribe := func(name string, a *activity) pulsar.Consumer {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "failover-events", SubscriptionName: "s",
			Type: pulsar.Failover, Name: name, EventListener: a})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	var b, a activity
	consB := subscribe("b", &b)
	defer consB.Close()
	b.waitFor(t, "b alone", true)
	consA := subscribe("a", &a) // sorts first: becomes the active one
	a.waitFor(t, "a after joining", true)
	b.waitFor(t, "b after a joined", false)
	consA.Close()
	b.waitFor(t, "b after a left", true)
}
