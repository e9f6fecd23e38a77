package broker

// Topic-level policies (topicpolicies.go) through pulsaradmin, as
// operators set them: a topic's value wins over its namespace's and is
// enforced; local and global scopes; unsupported policies and bad values
// answer errors that say so.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// policyAdmin serves b's admin API and returns a pulsaradmin client of it
// and its base URL.
func policyAdmin(t *testing.T, b *Broker) (pulsaradmin.Client, string) {
	t.Helper()
	web := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(web.Close)
	a, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: web.URL})
	if err != nil {
		t.Fatal(err)
	}
	return a, web.URL
}

func topicPolicies(t *testing.T, a pulsaradmin.Client, global bool) admin.TopicPolicies {
	t.Helper()
	tp, err := admin.TopicPoliciesOf(a, global)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// A topic's messageTTL wins over its namespace's: the topic with one
// expires its messages, its neighbour keeps them under the namespace's
// longer TTL; removed, the namespace's applies again.
func TestTopicMessageTTLWinsOverNamespace(t *testing.T) {
	hour := 3600
	b, url := startPolicyBroker(t, func(p *resources.Policies) { p.MessageTTLInSeconds = &hour })
	a, _ := policyAdmin(t, b)
	local := topicPolicies(t, a, false)
	ctx := context.Background()
	short := topicName(t, "persistent://t/ns/short-ttl")
	c := newClient(t, url)
	for _, topic := range []string{"t/ns/short-ttl", "t/ns/namespace-ttl"} {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		cons.Close()
		produce(t, c, topic, 5, false)
	}
	if v, err := local.GetMessageTTL(ctx, short, false); err != nil || v != nil {
		t.Fatalf("TTL before any is set: %v %v, want none", v, err)
	}
	if v, err := local.GetMessageTTL(ctx, short, true); err != nil || v == nil || *v != hour {
		t.Fatalf("applied TTL before any is set: %v %v, want the namespace's %d", v, err, hour)
	}
	if err := local.SetMessageTTL(ctx, short, 1); err != nil {
		t.Fatal(err)
	}
	if v, err := local.GetMessageTTL(ctx, short, true); err != nil || v == nil || *v != 1 {
		t.Fatalf("applied TTL: %v %v, want the topic's 1", v, err)
	}
	b.expireByPolicy(ctx, time.Now().Add(2*time.Second))
	for topic, want := range map[string]int64{"persistent://t/ns/short-ttl": 0, "persistent://t/ns/namespace-ttl": 5} {
		tp, err := b.getTopic(ctx, mustTopic(t, topic))
		if err != nil {
			t.Fatal(err)
		}
		if got := tp.durableSubs()[0].cursor.Backlog(); got != want {
			t.Errorf("%s: backlog %d after expiry, want %d", topic, got, want)
		}
	}
	if err := local.RemoveMessageTTL(ctx, short); err != nil {
		t.Fatal(err)
	}
	if v, err := local.GetMessageTTL(ctx, short, true); err != nil || v == nil || *v != hour {
		t.Fatalf("applied TTL after the topic's was removed: %v %v, want the namespace's", v, err)
	}
}

// The client limits set on a topic are enforced on it alone: producers,
// subscriptions, message size.
func TestTopicClientLimitPolicies(t *testing.T) {
	b, url := startPolicyBroker(t, func(*resources.Policies) {})
	a, _ := policyAdmin(t, b)
	local := topicPolicies(t, a, false)
	ctx := context.Background()
	limited := topicName(t, "persistent://t/ns/limited")
	for _, set := range []func() error{
		func() error { return local.SetMaxProducers(ctx, limited, 1) },
		func() error { return local.SetMaxSubscriptionsPerTopic(ctx, limited, 1) },
		func() error { return local.SetMaxMessageSize(ctx, limited, 100) },
	} {
		if err := set(); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, url)
	// A message refused with NotAllowed stays pending in the Go client
	// until its send timeout (as against Pulsar, which refuses it the same way).
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/limited", DisableBatching: true, SendTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/limited"}); err == nil {
		p2.Close()
		t.Fatal("a second producer was admitted past the topic's maxProducers 1")
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 50)}); err != nil {
		t.Fatalf("a 50-byte message under the topic's 100-byte limit: %v", err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 200)}); err == nil {
		t.Fatal("a 200-byte message was stored past the topic's maxMessageSize 100")
	}
	if st, err := a.Topics().GetStats(limited); err != nil || st.MsgCounterIn != 1 {
		t.Fatalf("stored after the refused message: %+v %v, want only the 50-byte one", st.MsgCounterIn, err)
	}
	sub := func(name string) error {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "t/ns/limited", SubscriptionName: name})
		if err == nil {
			cons.Close()
		}
		return err
	}
	if err := sub("first"); err != nil {
		t.Fatal(err)
	}
	if err := sub("second"); err == nil || !strings.Contains(err.Error(), "maxSubscriptionsPerTopic") {
		t.Fatalf("a second subscription past the topic's limit of 1: %v", err)
	}
	if err := sub("first"); err != nil {
		t.Fatalf("the existing subscription again: %v", err)
	}
	// Another topic of the namespace has none of these limits.
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/free"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "t/ns/free"}); err != nil {
		t.Fatalf("a second producer on a topic without limits: %v", err)
	}
}

// A global value applies in every cluster without a local one; each scope
// reads back its own.
func TestTopicPolicyScopes(t *testing.T) {
	b, _ := startPolicyBroker(t, func(*resources.Policies) {})
	a, _ := policyAdmin(t, b)
	local, global := topicPolicies(t, a, false), topicPolicies(t, a, true)
	ctx := context.Background()
	tn := topicName(t, "persistent://t/ns/scoped")
	if err := global.SetMaxConsumers(ctx, tn, 7); err != nil {
		t.Fatal(err)
	}
	if v, err := local.GetMaxConsumers(ctx, tn, false); err != nil || v != nil {
		t.Fatalf("local value with only a global one: %v %v, want none", v, err)
	}
	if v, err := global.GetMaxConsumers(ctx, tn, false); err != nil || v == nil || *v != 7 {
		t.Fatalf("global value: %v %v, want 7", v, err)
	}
	if v, err := local.GetMaxConsumers(ctx, tn, true); err != nil || v == nil || *v != 7 {
		t.Fatalf("applied value with only a global one: %v %v, want 7", v, err)
	}
	if err := local.SetMaxConsumers(ctx, tn, 3); err != nil {
		t.Fatal(err)
	}
	if v, err := local.GetMaxConsumers(ctx, tn, true); err != nil || v == nil || *v != 3 {
		t.Fatalf("applied value with a local one: %v %v, want 3", v, err)
	}
	if v, err := global.GetMaxConsumers(ctx, tn, false); err != nil || v == nil || *v != 7 {
		t.Fatalf("global value after a local one was set: %v %v, want 7", v, err)
	}
}

// A policy this broker does not enforce is refused with 501 naming it,
// and a bad value with 400; neither is stored.
func TestTopicPolicyErrors(t *testing.T) {
	b, web := startPolicyBroker(t, func(*resources.Policies) {})
	_ = web
	a, url := policyAdmin(t, b)
	local := topicPolicies(t, a, false)
	ctx := context.Background()
	tn := topicName(t, "persistent://t/ns/errors")
	resp, err := http.Post(url+"/admin/v2/persistent/t/ns/errors/inactiveTopicPolicies", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "inactiveTopicPolicies") {
		t.Fatalf("an unsupported policy: %s %s, want a 501 naming inactiveTopicPolicies", resp.Status, body)
	}
	resp, err = http.Get(url + "/admin/v2/persistent/t/ns/errors/backlogQuotaMap")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("GET backlogQuotaMap: %s, want 501", resp.Status)
	}
	if err := local.SetMaxProducers(ctx, tn, -1); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("maxProducers -1: %v, want 400", err)
	}
	if v, err := local.GetMaxProducers(ctx, tn, false); err != nil || v != nil {
		t.Fatalf("after a refused value: %v %v, want none", v, err)
	}
	if err := local.SetRetention(ctx, tn, utils.RetentionPolicies{RetentionTimeInMinutes: 0, RetentionSizeInMB: 10}); err == nil {
		t.Fatal("retention of 0 minutes and 10 MB was accepted")
	}
}

// A namespace's maxTopicsPerNamespace refuses topics past it, created by
// the admin API (412) or by a producer (NotAllowed), and not the topics
// it already has; pulsaradmin's own words for a bad value.
func TestMaxTopicsPerNamespace(t *testing.T) {
	two := 2
	b, url := startPolicyBroker(t, func(p *resources.Policies) { p.MaxTopicsPerNamespace = &two })
	a, web := policyAdmin(t, b)
	for _, name := range []string{"persistent://t/ns/one", "persistent://t/ns/two"} {
		if err := a.Topics().Create(topicName(t, name), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Topics().Create(topicName(t, "persistent://t/ns/three"), 0); err == nil ||
		!strings.Contains(err.Error(), "Exceed maximum number of topics in namespace") {
		t.Fatalf("a third topic past the limit of 2: %v", err)
	}
	if err := a.Topics().Create(topicName(t, "persistent://t/ns/parts"), 2); err == nil {
		t.Fatal("a partitioned topic of 2 partitions past the limit was created")
	}
	c := newClient(t, url)
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://t/ns/three"}); err == nil ||
		!strings.Contains(err.Error(), "Exceed maximum number of topics") {
		t.Fatalf("a producer creating a third topic: %v", err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://t/ns/one"}); err != nil {
		t.Fatalf("a producer on an existing topic at the limit: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPost, web+"/admin/v2/namespaces/t/ns/maxTopicsPerNamespace", strings.NewReader("-1"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(string(body), `"maxTopicsPerNamespace must be 0 or more"`) {
		t.Fatalf("maxTopicsPerNamespace -1: %s %s", resp.Status, body)
	}
}
