package broker

import (
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestTopicMetrics(t *testing.T) {
	b, url := startBroker(t)
	c := newClient(t, url)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "metered", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produce(t, c, "metered", 10, false)
	receive(t, cons, 10, true)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(b))
	labels := `cluster="test",namespace="public/default",topic="persistent://public/default/metered"`
	want := `
# HELP pulsar_in_messages_total Messages published to the topic.
# TYPE pulsar_in_messages_total counter
pulsar_in_messages_total{` + labels + `} 10
# HELP pulsar_out_messages_total Messages dispatched from the topic.
# TYPE pulsar_out_messages_total counter
pulsar_out_messages_total{` + labels + `} 10
# HELP pulsar_consumers_count Connected consumers.
# TYPE pulsar_consumers_count gauge
pulsar_consumers_count{` + labels + `} 1
# HELP pulsar_subscriptions_count Subscriptions.
# TYPE pulsar_subscriptions_count gauge
pulsar_subscriptions_count{` + labels + `} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pulsar_in_messages_total",
		"pulsar_out_messages_total", "pulsar_consumers_count", "pulsar_subscriptions_count"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "pulsar_rate_in", "pulsar_storage_size", "pulsar_msg_backlog"); err != nil || n != 3 {
		t.Fatalf("rate, storage and backlog series: %d %v", n, err)
	}
}
