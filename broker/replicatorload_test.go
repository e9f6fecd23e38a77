package broker

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// A failover loads, at once, every topic a remote cluster's replicators
// reconnect to, and the topics local clients wait for loaded among them
// (the fault suite's kill-broker seed 4 of 5 Dec: 6.6 s against its 6 s
// bound, about 25 ledgers of replicated topics recovered first). Topic
// loads for replicators go through a gate of their own: with it held, a
// replicator's producer waits while a client's producer on another topic
// is created.
func TestReplicatorLoadsDoNotHoldClientLoads(t *testing.T) {
	b, url := startBroker(t)
	c := newClient(t, url)
	ctx := context.Background()
	if err := b.replicatorLoads.Acquire(ctx, replicatorTopicLoads); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			b.replicatorLoads.Release(replicatorTopicLoads)
		}
	}
	defer release()
	repl := make(chan error, 1)
	go func() {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/replicated",
			Name: "pulsar.repl.c2"})
		if err == nil {
			p.Close()
		}
		repl <- err
	}()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/local"})
	if err != nil {
		t.Fatalf("a client's producer while replicator loads wait: %v", err)
	}
	p.Close()
	select {
	case err := <-repl:
		t.Fatalf("the replicator's producer did not wait for its load gate (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case err := <-repl:
		if err != nil {
			t.Fatalf("the replicator's producer after the gate opened: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replicator's producer was not created once its gate opened")
	}
}
