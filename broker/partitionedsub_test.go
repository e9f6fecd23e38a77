package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestSubscriptionOnAPartitionedTopic: creating a subscription on a
// partitioned topic creates it on every partition, as Pulsar does and
// pulsaradmin's own TestPeekMessageForPartitionedTopic expects; creating
// it again is 409. (The partitioned name was not a topic: 404.)
func TestSubscriptionOnAPartitionedTopic(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	base := topicName(t, "persistent://public/default/parted-sub")
	if err := env.admin.Topics().Create(base, 3); err != nil {
		t.Fatal(err)
	}
	if err := env.admin.Subscriptions().Create(base, "s", utils.Earliest); err != nil {
		t.Fatalf("create on the partitioned topic: %v", err)
	}
	for i := range 3 {
		p, err := base.GetPartition(i)
		if err != nil {
			t.Fatal(err)
		}
		subs, err := env.admin.Subscriptions().List(*p)
		if err != nil || !slices.Contains(subs, "s") {
			t.Fatalf("partition %d subscriptions %v %v, want s", i, subs, err)
		}
	}
	var re rest.Error
	if err := env.admin.Subscriptions().Create(base, "s", utils.Earliest); !errors.As(err, &re) || re.Code != http.StatusConflict {
		t.Fatalf("creating it again: %v, want 409", err)
	}
}

// TestSubscriptionOnAPartitionedTopicAcrossBrokers: in a cluster the
// partitions are served by several brokers; the one asked creates the
// subscription on its own partitions and through the others' admin API.
func TestSubscriptionOnAPartitionedTopicAcrossBrokers(t *testing.T) {
	c := startCluster(t, 3)
	adm, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: c.brokers[1].web.URL})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	base := topicName(t, "persistent://public/default/parted-sub-cluster")
	if err := adm.Topics().Create(base, n); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for i := range n {
		p, _ := base.GetPartition(i)
		parts = append(parts, p.String())
	}
	if err := adm.Subscriptions().Create(base, "s", utils.Earliest); err != nil {
		t.Fatalf("create on the partitioned topic: %v", err)
	}
	if c.servingBrokers(parts) < 2 {
		t.Fatalf("%d partitions served by one broker: the test needs several", n)
	}
	for _, name := range parts {
		p := topicName(t, name)
		subs, err := adm.Subscriptions().List(p)
		if err != nil || !slices.Contains(subs, "s") {
			t.Fatalf("%s subscriptions %v %v, want s", name, subs, err)
		}
	}
}

// TestPeekCreatesAMissingSubscription: peeking a subscription the topic
// does not have creates it at the earliest position and answers from
// there, as Pulsar's broker does (it was 404).
func TestPeekCreatesAMissingSubscription(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	const topic = "persistent://public/default/peek-missing"
	client := newClient(t, env.url)
	p := newProducer(t, client, topic, pulsar.ProducerOptions{DisableBatching: true})
	for i := range 3 {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	tn := topicName(t, topic)
	msgs, err := env.admin.Subscriptions().PeekMessages(tn, "never-made", 2)
	if err != nil || len(msgs) != 2 || string(msgs[0].Payload) != "m0" || string(msgs[1].Payload) != "m1" {
		t.Fatalf("peek of a missing subscription: %v %v, want m0, m1", msgs, err)
	}
	if subs, err := env.admin.Subscriptions().List(tn); err != nil || !slices.Contains(subs, "never-made") {
		t.Fatalf("subscriptions after the peek: %v %v", subs, err)
	}
}
