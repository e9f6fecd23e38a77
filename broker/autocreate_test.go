package broker

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

// startAutoCreateBroker starts a broker with namespace t/ns (policies p)
// and the auto-creation settings of cfg.
func startAutoCreateBroker(t *testing.T, cfg Config, p resources.Policies) (*Broker, string) {
	t.Helper()
	store := metadata.NewMemoryServer().NewSession()
	res, err := resources.New(context.Background(), store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	ctx := context.Background()
	if err := res.CreateCluster(ctx, "test", resources.ClusterData{ServiceURL: "http://localhost:1"}); err != nil {
		t.Fatal(err)
	}
	if err := res.CreateTenant(ctx, "t", resources.TenantInfo{AllowedClusters: []string{"test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := res.CreateNamespace(ctx, "t", "ns", p); err != nil {
		t.Fatal(err)
	}
	cfg.ClusterName, cfg.Metadata, cfg.Resources = "test", store, res
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	b := New(cfg, testLedgers(t, 0))
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
		b.Close(ctx)
	})
	return b, "pulsar://" + srv.Addr().String()
}

// With auto creation off in a namespace, clients of a topic that does not
// exist are refused with TopicNotFound, while a topic created through the
// admin API serves them; other namespaces keep the broker's default.
func TestAutoTopicCreationOff(t *testing.T) {
	p := resources.NewPolicies()
	p.AutoTopicCreationOverride = &resources.AutoTopicCreationOverride{AllowAutoTopicCreation: false,
		TopicType: resources.TopicTypeNonPartitioned}
	b, url := startAutoCreateBroker(t, Config{}, p)
	c := newClient(t, url)
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/missing"}); err == nil || !strings.Contains(err.Error(), "auto topic creation is off") {
		t.Fatalf("producer on a missing topic: %v", err)
	}
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "t/ns/missing", SubscriptionName: "s"}); err == nil {
		t.Fatal("consumer on a missing topic was accepted")
	}
	if _, err := b.getTopic(context.Background(), mustTopic(t, "t/ns/made")); err != nil { // as the admin API creates it
		t.Fatal(err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/made"}); err != nil {
		t.Fatalf("producer on an existing topic: %v", err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "public/default/anything"}); err != nil {
		t.Fatalf("another namespace follows the broker default: %v", err)
	}
}

// With the partitioned type, a new topic's first client creates it with
// defaultNumPartitions partitions, and produces to them.
func TestAutoTopicCreationPartitioned(t *testing.T) {
	b, url := startAutoCreateBroker(t, Config{AutoTopicCreationType: resources.TopicTypePartitioned, DefaultNumPartitions: 3},
		resources.NewPolicies())
	c := newClient(t, url)
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/auto-parted"})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.partitions(context.Background(), mustTopic(t, "t/ns/auto-parted")); err != nil || n != 3 {
		t.Fatalf("partitions of the auto-created topic: %d, %v", n, err)
	}
	parts, err := c.TopicPartitions("persistent://t/ns/auto-parted")
	if err != nil || len(parts) != 3 {
		t.Fatalf("client sees partitions %v, %v", parts, err)
	}
}
