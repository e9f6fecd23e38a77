package broker

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// startPolicyBroker is a broker with namespace policies in a memory
// store, tenant "t" and namespace "t/ns" created.
func startPolicyBroker(t *testing.T, mutate func(*resources.Policies)) (*Broker, string) {
	t.Helper()
	return startPolicyBrokerWith(t, mutate, 0, Config{})
}

// startPolicyBrokerWith is startPolicyBroker with ledgers of maxPerLedger
// entries and the broker settings of cfg.
func startPolicyBrokerWith(t *testing.T, mutate func(*resources.Policies), maxPerLedger int64, cfg Config) (*Broker, string) {
	t.Helper()
	return startPolicyBrokerOn(t, mutate, testLedgers(t, maxPerLedger), cfg)
}

// startPolicyBrokerOn is startPolicyBrokerWith over the given storage.
func startPolicyBrokerOn(t *testing.T, mutate func(*resources.Policies), ledgers managedledger.Factory, cfg Config) (*Broker, string) {
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
	p := resources.NewPolicies()
	mutate(&p)
	if _, err := res.CreateNamespace(ctx, "t", "ns", p); err != nil {
		t.Fatal(err)
	}
	cfg.ClusterName, cfg.Metadata, cfg.Resources = "test", store, res
	cfg.BacklogQuotaCheckInterval = 50 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	b := New(cfg, ledgers)
	return b, serveTestBroker(t, b)
}

// A namespace's message_ttl_in_seconds expires its topics' messages; a
// topic of another namespace (no TTL anywhere) keeps them.
func TestNamespaceMessageTTL(t *testing.T) {
	ttl := 1
	b, url := startPolicyBroker(t, func(p *resources.Policies) { p.MessageTTLInSeconds = &ttl })
	c := newClient(t, url)
	for _, topic := range []string{"t/ns/ttl", "public/default/no-ttl"} {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		cons.Close()
		produce(t, c, topic, 5, false)
	}
	b.expireByPolicy(context.Background(), time.Now().Add(2*time.Second))
	for topic, want := range map[string]int64{"persistent://t/ns/ttl": 0, "persistent://public/default/no-ttl": 5} {
		tp, err := b.getTopic(context.Background(), mustTopic(t, topic))
		if err != nil {
			t.Fatal(err)
		}
		if got := tp.durableSubs()[0].cursor.Backlog(); got != want {
			t.Errorf("%s: backlog %d after expiry, want %d", topic, got, want)
		}
	}
}

// A namespace's destination_storage backlog quota applies with its own
// policy although the broker has no default quota.
func TestNamespaceBacklogQuota(t *testing.T) {
	_, url := startPolicyBroker(t, func(p *resources.Policies) {
		p.BacklogQuotaMap[resources.DestinationStorage] = resources.BacklogQuota{LimitSize: 4 << 10,
			Policy: resources.ProducerException}
	})
	client := newClient(t, url)
	fillBacklog(t, client, "t/ns/quota")
	waitProducerRefused(t, client, "t/ns/quota", "ProducerBlockedQuotaExceededException")
}

// Splitting an owned bundle records the halves in the namespace policies
// and unloads it; lookups then use the new boundaries.
func TestBundleSplitRecordedInPolicies(t *testing.T) {
	b, _ := startPolicyBroker(t, func(*resources.Policies) {})
	svc, err := b.EnableOwnership(context.Background(), ownership.Config{Store: b.cfg.Metadata,
		BrokerID: "127.0.0.1:1", WebServiceURL: "http://127.0.0.1:1", PulsarServiceURL: "pulsar://127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	ctx := context.Background()
	name := mustTopic(t, "t/ns/split-me")
	if _, err := b.lookup(ctx, name, false); err != nil {
		t.Fatal(err)
	}
	before, ok := svc.OwnedBundleOf("t/ns", name.String())
	if !ok {
		t.Fatal("lookup did not take the bundle")
	}
	if err := svc.Split(ctx, before); err != nil {
		t.Fatal(err)
	}
	bundles, err := b.cfg.Resources.Bundles(ctx, "t", "ns")
	if err != nil || bundles.NumBundles != 5 || len(bundles.Boundaries) != 6 {
		t.Fatalf("policies after the split: %+v %v", bundles, err)
	}
	if svc.OwnsTopic("t/ns", name.String()) {
		t.Fatal("the split bundle is still owned")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, err := svc.BundleOf(ctx, "t/ns", name.String())
		if err == nil && after.Upper-after.Lower < before.Upper-before.Lower {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lookups still use the old bundle %s: %s %v", before, after, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A namespace's retention_policies keep consumed ledgers that the broker
// default (zero: delete once consumed) lets go, and a changed policy
// applies to a loaded topic without a reload.
func TestNamespaceRetention(t *testing.T) {
	b, url := startPolicyBrokerWith(t, func(p *resources.Policies) {
		p.RetentionPolicies = &resources.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}
	}, 5, Config{})
	c := newClient(t, url)
	ctx := context.Background()
	stored := func(topic string) int64 {
		tp, err := b.getTopic(ctx, mustTopic(t, topic))
		if err != nil {
			t.Fatal(err)
		}
		return tp.ml.Entries()
	}
	waitStored := func(topic string, ok func(int64) bool, want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			b.applyRetention(ctx)
			if ok(stored(topic)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d entries stored, want %s", topic, stored(topic), want)
			}
		}
	}
	for _, topic := range []string{"t/ns/kept", "public/default/trimmed"} {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		produce(t, c, topic, 30, false)
		consumeAll(t, []pulsar.Consumer{cons}, 30, func(_ int, m pulsar.Message) { _ = cons.Ack(m) })
		tp, _ := b.getTopic(ctx, mustTopic(t, topic))
		for deadline := time.Now().Add(10 * time.Second); tp.durableSubs()[0].cursor.Backlog() > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: acknowledgements never arrived", topic)
			}
		}
	}
	// Ledgers roll over in the background, so the current one may hold
	// more than 5 entries: "trimmed" is fewer than were written.
	waitStored("public/default/trimmed", func(n int64) bool { return n < 30 }, "consumed ledgers trimmed")
	time.Sleep(200 * time.Millisecond)
	b.applyRetention(ctx)
	if n := stored("t/ns/kept"); n != 30 {
		t.Fatalf("t/ns/kept: %d entries stored under unlimited retention, want 30", n)
	}
	if _, err := b.cfg.Resources.UpdateNamespace(ctx, "t", "ns", func(p *resources.Policies) error {
		p.RetentionPolicies = &resources.RetentionPolicies{RetentionTimeInMinutes: 0, RetentionSizeInMB: 0}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitStored("t/ns/kept", func(n int64) bool { return n < 30 }, "consumed ledgers trimmed once retention is off")
}

// Namespace limits: a second producer on a topic limited to one is
// refused (ProducerBusy), and so is a consumer past the subscription's
// limit (ConsumerBusy); a topic of another namespace has neither limit.
func TestNamespaceClientLimits(t *testing.T) {
	one := 1
	_, url := startPolicyBroker(t, func(p *resources.Policies) {
		p.MaxProducersPerTopic, p.MaxConsumersPerSubscription = &one, &one
	})
	c := newClient(t, url)
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/limited"}); err != nil {
		t.Fatal(err)
	}
	if p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/limited"}); err == nil || !strings.Contains(err.Error(), "maxProducersPerTopic") {
		t.Fatalf("second producer: %v %v", p, err)
	}
	sub := func(topic string) error {
		_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
		return err
	}
	if err := sub("t/ns/limited"); err != nil {
		t.Fatal(err)
	}
	if err := sub("t/ns/limited"); err == nil || !strings.Contains(err.Error(), "maxConsumersPerSubscription") {
		t.Fatalf("second consumer: %v", err)
	}
	for range 2 {
		if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "public/default/unlimited"}); err != nil {
			t.Fatal(err)
		}
		if err := sub("public/default/unlimited"); err != nil {
			t.Fatal(err)
		}
	}
}
