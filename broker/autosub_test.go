package broker

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
)

// TestAutoSubscriptionCreation: with allowAutoSubscriptionCreation=false a
// SUBSCRIBE may not create the durable subscription it names
// (SubscriptionNotFound, as Pulsar answers), while existing subscriptions
// and readers work; a namespace's autoSubscriptionCreation override, and
// the dynamic setting, turn it back on.
func TestAutoSubscriptionCreation(t *testing.T) {
	sb := startSecuredBroker(t, func(c *Config) { c.AutoSubscriptionCreationDisabled = true })
	super := sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": "super"})
	subscribe := func(arg string) string {
		t.Helper()
		r := sb.connectWithToken(t, super, false)
		defer r.conn.Close()
		return r.answer(t, "SUBSCRIBE", arg)
	}
	eventually := func(what, arg, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second) // policies and overrides reach the broker through watches
		for got := subscribe(arg); got != want; got = subscribe(arg) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: SUBSCRIBE %s answered %s, want %s", what, arg, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if got := subscribe("t/ns/a#new"); got != "SubscriptionNotFound" {
		t.Fatalf("a new subscription with auto-creation off: %s, want SubscriptionNotFound", got)
	}
	ctx := context.Background()
	if err := sb.b.CreateSubscription(ctx, "persistent://t/ns/a", "made", admin.MessageID{LedgerID: -1, EntryID: -1}); err != nil {
		t.Fatal(err)
	}
	if got := subscribe("t/ns/a#made"); got != "ok" {
		t.Fatalf("an existing subscription: %s", got)
	}
	if _, err := sb.res.UpdateNamespace(ctx, "t", "ns", func(p *resources.Policies) error {
		p.AutoSubscriptionCreationOverride = &resources.AutoSubscriptionCreationOverride{AllowAutoSubscriptionCreation: true}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually("the namespace allows it", "t/ns/a#new", "ok")
	if _, err := sb.res.UpdateNamespace(ctx, "t", "ns", func(p *resources.Policies) error {
		p.AutoSubscriptionCreationOverride = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually("the override removed", "t/ns/a#other", "SubscriptionNotFound")
	if err := sb.b.SetDynamic(ctx, "allowAutoSubscriptionCreation", "true"); err != nil {
		t.Fatal(err)
	}
	eventually("the dynamic setting on", "t/ns/a#other", "ok")
}

// TestAutoSubscriptionCreationOffRefusesBrokerCursors: with
// allowAutoSubscriptionCreation=false, a cursor the broker keeps for
// itself (here deduplication's, pulsar.dedup) is not a subscription a
// client may attach to: the check asks for subscriptions, not for any
// durable cursor. (Asking for any cursor let a consumer take over the
// deduplication snapshot cursor.)
func TestAutoSubscriptionCreationOffRefusesBrokerCursors(t *testing.T) {
	sb := startSecuredBroker(t, func(c *Config) {
		c.AutoSubscriptionCreationDisabled = true
		c.BrokerDeduplicationEnabled = true
	})
	super := sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": "super"})
	r := sb.connectWithToken(t, super, false)
	defer r.conn.Close()
	if got := r.answer(t, "PRODUCER", "t/ns/deduped"); got != "ok" { // loads the topic and its dedup cursor
		t.Fatalf("PRODUCER: %s", got)
	}
	r2 := sb.connectWithToken(t, super, false)
	defer r2.conn.Close()
	if got := r2.answer(t, "SUBSCRIBE", "t/ns/deduped#"+dedupCursor); got != "SubscriptionNotFound" {
		t.Fatalf("SUBSCRIBE to the broker's %s cursor: %s, want SubscriptionNotFound", dedupCursor, got)
	}
}
