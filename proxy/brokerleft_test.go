package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/metadata"
)

// When a broker's registration goes (its session expired: it died, was
// stopped or cut off), the proxy closes the client connections it
// forwards to that broker, so the clients look their topics up again
// instead of waiting on a silent connection for their keep-alive (the
// fault suite's pause-broker: proxied producers waited as long as the
// broker was stopped, 7-12 s, though its bundles were free after 4 s).
func TestProxyClosesClientsOfABrokerThatLeft(t *testing.T) {
	e := newEnv(t, 1)
	px := e.startProxy(Config{})
	client := e.client(px.url)
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/left", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	const closed = "a broker left the registry; closed the client connections forwarded to it"
	if n := e.log.count(closed); n != 0 {
		t.Fatalf("closed %d times before any broker left", n)
	}
	admin := e.meta.NewSession()
	defer admin.Close()
	if err := admin.Delete(ctx, ownership.BrokersPath+"/"+e.brokers[0].own.ID(), metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.log.count(closed) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the proxy kept the client's connection to a broker that left the registry")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leftBrokers names both service addresses of every broker that went.
func TestLeftBrokers(t *testing.T) {
	a := brokerInfo{service: "a:6650", serviceTLS: "a:6651"}
	b := brokerInfo{service: "b:6650"}
	got := leftBrokers([]brokerInfo{a, b}, []brokerInfo{b})
	if len(got) != 2 || !got["a:6650"] || !got["a:6651"] {
		t.Fatalf("left: %v", got)
	}
	if got := leftBrokers([]brokerInfo{a}, []brokerInfo{a, b}); len(got) != 0 {
		t.Fatalf("a broker that joined counted as left: %v", got)
	}
}
