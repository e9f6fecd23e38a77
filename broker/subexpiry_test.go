package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
)

// TestSubscriptionExpiry: with the namespace's
// subscription_expiration_time_minutes, subscriptions without consumers
// for longer are deleted; connected ones, and topics of namespaces
// without the policy, keep theirs.
func TestSubscriptionExpiry(t *testing.T) {
	one := 1
	b, url := startPolicyBroker(t, func(p *resources.Policies) { p.SubscriptionExpirationTimeMinutes = &one })
	c := newClient(t, url)
	ctx := context.Background()
	const topic, other = "persistent://t/ns/expiry", "persistent://public/default/no-expiry"
	for _, tp := range []string{topic, other} {
		idle, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "idle"})
		if err != nil {
			t.Fatal(err)
		}
		idle.Close()
	}
	busy, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := b.CreateSubscription(ctx, topic, "made", admin.MessageID{LedgerID: admin.LatestLedger}); err != nil {
		t.Fatal(err)
	}
	subs := func(tp string) []string {
		t.Helper()
		tt, err := b.getTopic(ctx, mustTopic(t, tp))
		if err != nil {
			t.Fatal(err)
		}
		return tt.durableSubNames()
	}
	b.expireSubscriptions(ctx, time.Now().Add(30*time.Second))
	if got := subs(topic); !slices.Equal(got, []string{"busy", "idle", "made"}) {
		t.Fatalf("before the expiration time: %v", got)
	}
	b.expireSubscriptions(ctx, time.Now().Add(2*time.Minute))
	if got := subs(topic); !slices.Equal(got, []string{"busy"}) {
		t.Fatalf("after it: %v, want only the connected one", got)
	}
	if got := subs(other); !slices.Equal(got, []string{"idle"}) {
		t.Fatalf("a namespace without the policy: %v", got)
	}
}

// The compaction's cursor is no subscription a consumer comes back to:
// expiring it would drop the topic's compacted view and leak its ledger.
func TestSubscriptionExpirySparesCompaction(t *testing.T) {
	one := 1
	b, url := startPolicyBroker(t, func(p *resources.Policies) { p.SubscriptionExpirationTimeMinutes = &one })
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	ctx := context.Background()
	const topic = "persistent://t/ns/expiry-compacted"
	sendKeyed(t, c, topic, false, rounds(3, 2))
	compactAndWait(t, a, topicName(t, topic))
	b.expireSubscriptions(ctx, time.Now().Add(2*time.Minute))
	tt, err := b.getTopic(ctx, mustTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	if got := tt.durableSubNames(); !slices.Contains(got, compactionCursor) {
		t.Fatalf("after the expiration time: %v, want %s kept", got, compactionCursor)
	}
}
