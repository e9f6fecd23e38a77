package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/netio"
)

// geoCluster is one in-process cluster of a geo-replicated instance: its
// own broker and topic storage, the instance's shared configuration store.
type geoCluster struct {
	name    string
	store   metadata.Store
	res     *resources.Resources
	ledgers *managedledger.MemoryFactory
	addr    string        // kept across restarts
	tweak   func(*Config) // a test's settings over the defaults below (nil: none)

	mu  sync.Mutex
	b   *Broker
	srv *netio.Server
}

func (c *geoCluster) url() string { return "pulsar://" + c.addr }

func (c *geoCluster) start(t *testing.T) {
	t.Helper()
	cfg := Config{ClusterName: c.name, Metadata: c.store, Resources: c.res, BrokerDeduplicationEnabled: true,
		ReplicationPolicyCheckInterval: 100 * time.Millisecond, StatsUpdateFrequency: 100 * time.Millisecond,
		ReplicatedSubscriptionsSnapshotFrequency: 50 * time.Millisecond, ReplicatedSubscriptionsSnapshotMaxCached: 100,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	b := New(cfg, c.ledgers)
	addr := c.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var srv *netio.Server
	var err error
	for range 50 { // the port of a stopped broker may take a moment to free
		if srv, err = b.Serve(addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	c.addr = srv.Addr().String()
	c.mu.Lock()
	c.b, c.srv = b, srv
	c.mu.Unlock()
}

func (c *geoCluster) stop() {
	c.mu.Lock()
	b, srv := c.b, c.srv
	c.b, c.srv = nil, nil
	c.mu.Unlock()
	if b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Close(ctx)
	b.Close(ctx)
}

func (c *geoCluster) broker() *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b
}

// newGeoInstance starts clusters sharing one configuration store, each
// registered with its broker URL, and the tenant "geo" allowed on all.
func newGeoInstance(t *testing.T, names ...string) map[string]*geoCluster {
	t.Helper()
	return newGeoInstanceWith(t, nil, names...)
}

// newGeoInstanceWith is newGeoInstance with tweak applied to every
// cluster's broker configuration.
func newGeoInstanceWith(t *testing.T, tweak func(*Config), names ...string) map[string]*geoCluster {
	t.Helper()
	ctx := context.Background()
	config := metadata.NewMemoryServer()
	out := map[string]*geoCluster{}
	for _, n := range names {
		store := config.NewSession()
		res, err := resources.New(ctx, store, resources.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(res.Close)
		c := &geoCluster{name: n, store: store, res: res, ledgers: managedledger.NewMemoryFactory(managedledger.MemoryOptions{}),
			tweak: tweak}
		c.start(t)
		t.Cleanup(c.stop)
		if err := res.CreateCluster(ctx, n, resources.ClusterData{ServiceURL: "http://" + c.addr, BrokerServiceURL: c.url()}); err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	if err := out[names[0]].res.CreateTenant(ctx, "geo", resources.TenantInfo{AllowedClusters: names}); err != nil {
		t.Fatal(err)
	}
	return out
}

func geoNamespace(t *testing.T, res *resources.Resources, ns string, clusters ...string) {
	t.Helper()
	p := resources.NewPolicies()
	p.ReplicationClusters = clusters
	if _, err := res.CreateNamespace(context.Background(), "geo", ns, p); err != nil {
		t.Fatal(err)
	}
}

// geoConsumer subscribes at the earliest position and collects values.
type geoConsumer struct {
	mu   sync.Mutex
	got  []string
	from []string // replicated_from of each
}

func subscribeGeo(t *testing.T, url, topic string) *geoConsumer {
	t.Helper()
	c := newClient(t, url)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	g := &geoConsumer{}
	go func() {
		for msg := range cons.Chan() {
			g.mu.Lock()
			g.got = append(g.got, string(msg.Payload()))
			g.from = append(g.from, msg.GetReplicatedFrom())
			g.mu.Unlock()
			_ = cons.Ack(msg)
		}
	}()
	t.Cleanup(cons.Close)
	return g
}

func (g *geoConsumer) values() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.got)
}

// waitFor waits until the consumer has n messages, then a little more
// to catch duplicates, and checks each value came once and each
// producer's (prefix before '#') in order.
func (g *geoConsumer) waitFor(t *testing.T, what string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(g.values()) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	got := g.values()
	if len(got) != n {
		t.Fatalf("%s: got %d messages, want %d", what, len(got), n)
	}
	seen := map[string]bool{}
	last := map[string]int{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("%s: %q received twice", what, v)
		}
		seen[v] = true
		prod, idx, _ := strings.Cut(v, "#")
		var i int
		fmt.Sscan(idx, &i)
		if l, ok := last[prod]; ok && i <= l {
			t.Fatalf("%s: producer %s out of order: %d after %d", what, prod, i, l)
		}
		last[prod] = i
	}
	return got
}

func geoProduce(t *testing.T, url, topic, producer string, from, n int, opts func(i int, m *pulsar.ProducerMessage)) {
	t.Helper()
	c := newClient(t, url)
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: producer, BatchingMaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	for i := from; i < from+n; i++ {
		m := &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("%s#%d", producer, i)), Key: "k",
			Properties: map[string]string{"i": fmt.Sprint(i)}, EventTime: time.UnixMilli(1_700_000_000_000)}
		if opts != nil {
			// One at a time: the client sends messages with replicate_to
			// outside its batches, which reorders them against batched ones.
			opts(i, m)
			if _, err := p.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			continue
		}
		sendAsync(t, p, m, &wg)
	}
	wg.Wait()
}

// sendAsync sends m without waiting for it: wg is done once its receipt
// (or error, which fails the test) came.
func sendAsync(t *testing.T, p pulsar.Producer, m *pulsar.ProducerMessage, wg *sync.WaitGroup) {
	wg.Add(1)
	p.SendAsync(context.Background(), m, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		if err != nil {
			t.Errorf("send: %v", err)
		}
		wg.Done()
	})
}

// A full mesh of 3 clusters with a producer in each: every cluster's
// subscription gets every message once, each producer's in order, and
// what came by replication says where from.
func TestGeoFullMesh(t *testing.T) {
	cl := newGeoInstance(t, "a", "b", "c")
	geoNamespace(t, cl["a"].res, "mesh", "a", "b", "c")
	topic := "persistent://geo/mesh/orders"
	cons := map[string]*geoConsumer{}
	for _, n := range []string{"a", "b", "c"} {
		cons[n] = subscribeGeo(t, cl[n].url(), topic)
	}
	var wg sync.WaitGroup
	for _, n := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			geoProduce(t, cl[n].url(), topic, "p-"+n, 0, 100, nil)
		}()
	}
	wg.Wait()
	for _, n := range []string{"a", "b", "c"} {
		cons[n].waitFor(t, "cluster "+n, 300)
		g := cons[n]
		g.mu.Lock()
		for i, v := range g.got {
			want := ""
			if !strings.HasPrefix(v, "p-"+n+"#") {
				want = strings.TrimPrefix(strings.Split(v, "#")[0], "p-")
			}
			if g.from[i] != want {
				t.Errorf("cluster %s: %s replicated_from %q, want %q", n, v, g.from[i], want)
			}
		}
		g.mu.Unlock()
	}
	// Replicator cursors are no subscriptions.
	subs, err := cl["a"].broker().Subscriptions(context.Background(), topic)
	if err != nil || !slices.Equal(subs, []string{"sub"}) {
		t.Fatalf("subscriptions in a: %v, %v", subs, err)
	}
}

// Active-active on a partitioned topic: producers in both clusters, each
// cluster's consumer gets all, partition by partition.
func TestGeoActiveActivePartitioned(t *testing.T) {
	cl := newGeoInstance(t, "east", "west")
	geoNamespace(t, cl["east"].res, "aa", "east", "west")
	topic := "persistent://geo/aa/p"
	if err := cl["east"].res.CreatePartitionedTopic(context.Background(), resources.TopicName{Domain: "persistent",
		Tenant: "geo", Namespace: "aa", Local: "p"}, resources.PartitionedTopicMetadata{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	east, west := subscribeGeo(t, cl["east"].url(), topic), subscribeGeo(t, cl["west"].url(), topic)
	geoProduce(t, cl["east"].url(), topic, "e", 0, 60, func(i int, m *pulsar.ProducerMessage) { m.Key = fmt.Sprint(i) })
	geoProduce(t, cl["west"].url(), topic, "w", 0, 60, func(i int, m *pulsar.ProducerMessage) { m.Key = fmt.Sprint(i) })
	for _, g := range []*geoConsumer{east, west} {
		deadline := time.Now().Add(30 * time.Second)
		for len(g.values()) < 120 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := g.values(); len(got) != 120 {
			t.Fatalf("got %d of 120", len(got))
		}
	}
}

// Aggregation: each edge's namespace replicates into the central
// cluster, which sees both edges' messages; edges see only their own.
func TestGeoAggregation(t *testing.T) {
	cl := newGeoInstance(t, "edge1", "edge2", "central")
	geoNamespace(t, cl["central"].res, "edge1", "edge1", "central")
	geoNamespace(t, cl["central"].res, "edge2", "edge2", "central")
	c1 := subscribeGeo(t, cl["central"].url(), "persistent://geo/edge1/readings")
	c2 := subscribeGeo(t, cl["central"].url(), "persistent://geo/edge2/readings")
	geoProduce(t, cl["edge1"].url(), "persistent://geo/edge1/readings", "s1", 0, 50, nil)
	geoProduce(t, cl["edge2"].url(), "persistent://geo/edge2/readings", "s2", 0, 70, nil)
	c1.waitFor(t, "central from edge1", 50)
	c2.waitFor(t, "central from edge2", 70)
}

// Selective replication: replicate_to limits where a message goes;
// DisableReplication keeps it local.
func TestGeoSelectiveReplication(t *testing.T) {
	cl := newGeoInstance(t, "a", "b", "c")
	geoNamespace(t, cl["a"].res, "sel", "a", "b", "c")
	topic := "persistent://geo/sel/t"
	ca, cb, cc := subscribeGeo(t, cl["a"].url(), topic), subscribeGeo(t, cl["b"].url(), topic), subscribeGeo(t, cl["c"].url(), topic)
	geoProduce(t, cl["a"].url(), topic, "p", 0, 30, func(i int, m *pulsar.ProducerMessage) {
		switch i % 3 {
		case 0:
			m.ReplicationClusters = []string{"b"}
		case 1:
			m.DisableReplication = true
		}
	})
	ca.waitFor(t, "a", 30)
	for _, v := range cb.waitFor(t, "b", 20) {
		var i int
		fmt.Sscan(strings.Split(v, "#")[1], &i)
		if i%3 == 1 {
			t.Fatalf("b got %s, which was not to be replicated", v)
		}
	}
	for _, v := range cc.waitFor(t, "c", 10) {
		var i int
		fmt.Sscan(strings.Split(v, "#")[1], &i)
		if i%3 != 2 {
			t.Fatalf("c got %s, which was only for b or local", v)
		}
	}
}

// A remote cut off during a stream: local publishing and consuming go
// on, the replication backlog shows and drains once the remote is back,
// with nothing lost and nothing twice.
func TestGeoRemoteOutage(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "out", "a", "b")
	topic := "persistent://geo/out/t"
	ca, cb := subscribeGeo(t, cl["a"].url(), topic), subscribeGeo(t, cl["b"].url(), topic)
	geoProduce(t, cl["a"].url(), topic, "p", 0, 50, nil)
	cb.waitFor(t, "b before the outage", 50)

	cl["b"].stop()
	geoProduce(t, cl["a"].url(), topic, "p", 50, 100, nil)
	ca.waitFor(t, "a during the outage", 150)
	ctx := context.Background()
	eventually(t, "backlog reported while b is down", func() error {
		st, err := cl["a"].broker().TopicStats(ctx, topic)
		if err != nil {
			return err
		}
		r, ok := st.Replication["b"]
		if !ok || r.ReplicationBacklog == 0 || r.Connected {
			return fmt.Errorf("replication to b: %+v", st.Replication)
		}
		return nil
	})
	metrics := scrapeMetrics(t, cl["a"].broker())
	if !strings.Contains(metrics, `pulsar_replication_backlog{cluster="a",namespace="geo/out",remote_cluster="b",topic="persistent://geo/out/t"}`) {
		t.Fatalf("no replication backlog metric:\n%s", metrics)
	}

	cl["b"].start(t)
	cb.waitFor(t, "b after the outage", 150)
	eventually(t, "backlog drained", func() error {
		st, err := cl["a"].broker().TopicStats(ctx, topic)
		if err != nil {
			return err
		}
		if r := st.Replication["b"]; r.ReplicationBacklog != 0 || !r.Connected || r.OutboundConnection == "" {
			return fmt.Errorf("replication to b: %+v", r)
		}
		return nil
	})
}

// A replication backlog expires as a subscription's does, as Pulsar's
// checkMessageExpiry expires its replicators: while b is down, the
// admin's expire-messages on the replicator cursor (pulsar.repl.b) and
// then the namespace's message TTL empty a's backlog to b, and b, back,
// gets only what was published after.
func TestGeoReplicationBacklogExpires(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "ttl", "a", "b")
	topic := "persistent://geo/ttl/t"
	cb := subscribeGeo(t, cl["b"].url(), topic)
	geoProduce(t, cl["a"].url(), topic, "p", 0, 10, nil)
	cb.waitFor(t, "b before the outage", 10)

	cl["b"].stop()
	ctx, a := context.Background(), cl["a"].broker()
	backlog := func(empty bool) { // in entries: batches are counted as one
		t.Helper()
		eventually(t, fmt.Sprintf("replication backlog empty: %v", empty), func() error {
			st, err := a.TopicStats(ctx, topic)
			if err != nil {
				return err
			}
			if r := st.Replication["b"]; (r.ReplicationBacklog == 0) != empty {
				return fmt.Errorf("replication to b: %+v", r)
			}
			return nil
		})
	}
	geoProduce(t, cl["a"].url(), topic, "p", 10, 50, nil)
	backlog(false)
	if err := a.ExpireMessages(ctx, topic, "pulsar.repl.b", time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	backlog(true)

	geoProduce(t, cl["a"].url(), topic, "p", 60, 50, nil)
	backlog(false)
	ttl := 1
	if _, err := cl["a"].res.UpdateNamespace(ctx, "geo", "ttl", func(p *resources.Policies) error {
		p.MessageTTLInSeconds = &ttl
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the TTL expired the replication backlog", func() error {
		a.expireByPolicy(ctx, time.Now().Add(2*time.Second)) // as a check a second after the TTL
		st, err := a.TopicStats(ctx, topic)
		if err != nil {
			return err
		}
		if r := st.Replication["b"]; r.ReplicationBacklog != 0 {
			return fmt.Errorf("replication to b: %+v", r)
		}
		return nil
	})

	cl["b"].start(t)
	geoProduce(t, cl["a"].url(), topic, "p", 110, 10, nil)
	cb.waitFor(t, "b after the outage", 20)
	time.Sleep(500 * time.Millisecond) // anything expired would come first
	if got := cb.values(); len(got) != 20 || got[10] != "p#110" {
		t.Fatalf("b received %d: %v, want p#0-9 then p#110-119", len(got), got)
	}
}

// A replication backlog counts against the namespace's backlog quota, as
// in Pulsar (whose quota is the managed ledger's slowest cursor, a
// replicator's included): with b down, 32 KiB waiting for it put the
// topic over a 4 KiB quota, so producers are refused (producer_exception);
// with consumer_backlog_eviction the replication backlog is trimmed to
// the quota instead.
func TestGeoReplicationBacklogCountsAgainstQuota(t *testing.T) {
	for _, policy := range []resources.RetentionPolicy{resources.ProducerException, resources.ConsumerBacklogEviction} {
		t.Run(string(policy), func(t *testing.T) {
			cl := newGeoInstance(t, "a", "b")
			geoNamespace(t, cl["a"].res, "quota", "a", "b")
			ctx := context.Background()
			if _, err := cl["a"].res.UpdateNamespace(ctx, "geo", "quota", func(p *resources.Policies) error {
				p.BacklogQuotaMap = map[resources.BacklogQuotaType]resources.BacklogQuota{resources.DestinationStorage: {LimitSize: 4 << 10, Policy: policy}}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			topic := "persistent://geo/quota/t"
			cl["b"].stop()
			client := newClient(t, cl["a"].url())
			prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 32 {
				if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 1<<10)}); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			prod.Close()
			tp, err := cl["a"].broker().getTopic(ctx, mustTopic(t, topic))
			if err != nil {
				t.Fatal(err)
			}
			if policy == resources.ProducerException {
				waitProducerRefused(t, client, topic, "ProducerBlockedQuotaExceededException")
				return
			}
			eventually(t, "the replication backlog evicted to the quota", func() error {
				cl["a"].broker().enforceBacklogQuotas(ctx)
				if tp.overQuota() {
					return fmt.Errorf("still over quota")
				}
				st, err := cl["a"].broker().TopicStats(ctx, topic)
				if err != nil {
					return err
				}
				if r := st.Replication["b"]; r.ReplicationBacklog == 0 || r.ReplicationBacklog > 5 {
					return fmt.Errorf("replication to b: %+v, want a backlog of 1-5 entries", r)
				}
				return nil
			})
		})
	}
}

// The source cluster's broker fails over in the middle of replication: a
// new broker on the same storage takes the topic and its replicator
// resumes from the durable replication cursor, re-sending what was not
// yet acknowledged there. With deduplication on in the remote, every
// message arrives there exactly once and in order.
func TestGeoSourceBrokerFailover(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "fail", "a", "b")
	topic := "persistent://geo/fail/t"
	cb := subscribeGeo(t, cl["b"].url(), topic)
	geoProduce(t, cl["a"].url(), topic, "p", 0, 300, nil)
	// Replication is still under way (B has some, not all): the broker goes.
	eventually(t, "replication under way", func() error {
		if n := len(cb.values()); n == 0 {
			return fmt.Errorf("b has nothing yet")
		}
		return nil
	})
	t.Logf("b had %d of 300 when a's broker stopped", len(cb.values()))
	cl["a"].stop()
	cl["a"].start(t) // the new broker: same storage, same address
	geoProduce(t, cl["a"].url(), topic, "p", 300, 100, nil)
	cb.waitFor(t, "b after the source failed over", 400)
}

// Removing a cluster from the namespace stops its replicator and deletes
// its cursor.
func TestGeoRemoveClusterDropsReplicator(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "rm", "a", "b")
	topic := "persistent://geo/rm/t"
	cb := subscribeGeo(t, cl["b"].url(), topic)
	geoProduce(t, cl["a"].url(), topic, "p", 0, 10, nil)
	cb.waitFor(t, "b", 10)
	hasCursor := func() bool {
		st, err := cl["a"].broker().InternalStats(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		_, ok := st.Cursors["pulsar.repl.b"]
		return ok
	}
	if !hasCursor() {
		t.Fatal("no pulsar.repl.b cursor")
	}
	if _, err := cl["a"].res.SetReplicationClusters(context.Background(), "geo", "rm", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replicator gone", func() error {
		if hasCursor() {
			return fmt.Errorf("cursor still there")
		}
		return nil
	})
}

// Topic-level replication clusters (through the admin API) override the
// namespace's: a namespace local to a replicates one topic to b.
func TestGeoTopicLevelReplicationClusters(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "tl", "a")
	_, adm := geoAdmin(t, cl["a"])
	topic := "persistent://geo/tl/t"
	tn := topicName(t, topic)
	expectStatus(t, "unknown cluster", adm.Topics().SetReplicationClusters(tn, []string{"a", "mars"}), 403)
	if err := adm.Topics().SetReplicationClusters(tn, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Topics().GetReplicationClusters(tn); err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("get: %v %v", got, err)
	}
	cb := subscribeGeo(t, cl["b"].url(), topic)
	geoProduce(t, cl["a"].url(), topic, "p", 0, 20, nil)
	cb.waitFor(t, "b", 20)
	if err := adm.Topics().RemoveReplicationClusters(tn); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Topics().GetReplicationClusters(tn); err != nil || len(got) != 0 {
		t.Fatalf("get after remove: %v %v", got, err)
	}
}

func scrapeMetrics(t *testing.T, b *Broker) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(b))
	var sb strings.Builder
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&sb, f); err != nil {
			t.Fatal(err)
		}
	}
	return sb.String()
}

// A cluster added to a topic's replication clusters gets what is
// published from then on (replicationStartAt=latest, Pulsar's default),
// not what the topic stored before.
func TestGeoReplicationStartsAtLatest(t *testing.T) {
	got := testReplicationStartAt(t, "")
	if len(got) != 10 || got[0] != "p#20" {
		t.Fatalf("b got %d messages from %v, want the 10 sent after it was added (p#20 on)", len(got), got)
	}
}

// replicationStartAt=earliest: the new replicator sends what the topic
// still stores.
func TestGeoReplicationStartsAtEarliest(t *testing.T) {
	got := testReplicationStartAt(t, "earliest")
	if len(got) != 30 || got[0] != "p#0" {
		t.Fatalf("b got %d messages from %v, want all 30", len(got), got)
	}
}

// testReplicationStartAt stores 20 messages in a topic that replicates
// nowhere, adds cluster b, sends 10 more and returns what b received.
func testReplicationStartAt(t *testing.T, startAt string) []string {
	cl := newGeoInstanceWith(t, func(c *Config) { c.ReplicationStartAt = startAt }, "a", "b")
	geoNamespace(t, cl["a"].res, "start", "a")
	topic := "persistent://geo/start/t"
	geoProduce(t, cl["a"].url(), topic, "p", 0, 20, nil)
	cb := subscribeGeo(t, cl["b"].url(), topic)
	if _, err := cl["a"].res.SetReplicationClusters(context.Background(), "geo", "start", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replicator to b connected", func() error {
		st, err := cl["a"].broker().TopicStats(context.Background(), topic)
		if err != nil {
			return err
		}
		if r, ok := st.Replication["b"]; !ok || !r.Connected {
			return fmt.Errorf("replication: %+v", st.Replication)
		}
		return nil
	})
	geoProduce(t, cl["a"].url(), topic, "p", 20, 10, nil)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(cb.values(), "p#29") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // anything more on its way
	return cb.values()
}

func TestParseReplicationStartAt(t *testing.T) {
	for in, want := range map[string]managedledger.InitialPosition{"": managedledger.Latest,
		"latest": managedledger.Latest, "Earliest": managedledger.Earliest} {
		if got, err := ParseReplicationStartAt(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	if _, err := ParseReplicationStartAt("-1:-1"); err == nil {
		t.Error("-1:-1 accepted")
	}
}

// geoAdmin serves a cluster's broker's admin API and returns its URL and
// a pulsaradmin client of it.
func geoAdmin(t *testing.T, c *geoCluster) (*httptest.Server, pulsaradmin.Client) {
	t.Helper()
	web := httptest.NewServer(c.broker().HTTPHandler())
	t.Cleanup(web.Close)
	adm, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: web.URL})
	if err != nil {
		t.Fatal(err)
	}
	return web, adm
}

// A replicator dispatch rate (namespace policy replicatorDispatchRate,
// set through the admin API as pulsar-admin does) holds a replicator to
// that rate, and removing it lifts the limit. Batching is off, so each
// message is one entry, which is what Pulsar's replicator limit counts.
func TestGeoReplicatorDispatchRate(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "rate", "a", "b")
	web, adm := geoAdmin(t, cl["a"])
	ns, err := utils.GetNamespaceName("geo/rate")
	if err != nil {
		t.Fatal(err)
	}
	rate := utils.DispatchRate{DispatchThrottlingRateInMsg: geoRateLimit, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}
	if err := adm.Namespaces().SetReplicatorDispatchRate(*ns, rate); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Namespaces().GetReplicatorDispatchRate(*ns); err != nil || got != rate {
		t.Fatalf("get: %+v %v, want %+v", got, err, rate)
	}
	testReplicatorRateLimited(t, cl, "persistent://geo/rate/t", func() {
		// pulsaradmin has no call for it: DELETE as pulsar-admin sends it.
		req, err := http.NewRequest(http.MethodDelete, web.URL+"/admin/v2/namespaces/geo/rate/replicatorDispatchRate", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("remove: %s", resp.Status)
		}
		if got, err := adm.Namespaces().GetReplicatorDispatchRate(*ns); err != nil || got != (utils.DispatchRate{}) {
			t.Fatalf("get after remove: %+v %v, want nothing", got, err)
		}
	})
}

// A topic-level replicator dispatch rate (pulsaradmin's
// TopicPolicies().SetReplicatorDispatchRate) holds the topic's replicator
// to it over its namespace's (none here: unlimited); GET answers it, with
// applied the one in force; removing it lifts the limit.
func TestGeoTopicReplicatorDispatchRate(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "trate", "a", "b")
	_, adm := geoAdmin(t, cl["a"])
	const topic = "persistent://geo/trate/t"
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	// The client has the call, its interface does not list it.
	withPolicies, ok := adm.(interface {
		TopicPolicies(bool) admin.TopicPolicies
	})
	if !ok {
		t.Fatal("pulsaradmin client without TopicPolicies")
	}
	ctx, policies := context.Background(), withPolicies.TopicPolicies(false)
	if got, err := policies.GetReplicatorDispatchRate(ctx, *tn, false); err != nil || got != nil {
		t.Fatalf("unset: %+v %v, want nothing", got, err)
	}
	unlimited := utils.DispatchRateData{DispatchThrottlingRateInMsg: 0, DispatchThrottlingRateInByte: 0, RatePeriodInSecond: 1}
	if got, err := policies.GetReplicatorDispatchRate(ctx, *tn, true); err != nil || got == nil || *got != unlimited {
		t.Fatalf("applied, unset: %+v %v, want the broker's %+v", got, err, unlimited)
	}
	rate := utils.DispatchRateData{DispatchThrottlingRateInMsg: geoRateLimit, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}
	if err := policies.SetReplicatorDispatchRate(ctx, *tn, rate); err != nil {
		t.Fatal(err)
	}
	for _, applied := range []bool{false, true} {
		if got, err := policies.GetReplicatorDispatchRate(ctx, *tn, applied); err != nil || got == nil || *got != rate {
			t.Fatalf("get (applied %v): %+v %v, want %+v", applied, got, err, rate)
		}
	}
	// A local topic policy, as Pulsar's: b's replicators are not limited
	// by the rate set through a; a global one (isGlobal) reaches b.
	_, admB := geoAdmin(t, cl["b"])
	inB := admB.(interface {
		TopicPolicies(bool) admin.TopicPolicies
	})
	if got, err := inB.TopicPolicies(false).GetReplicatorDispatchRate(ctx, *tn, true); err != nil || got == nil || *got != unlimited {
		t.Fatalf("in b, applied: %+v %v, want b's broker default %+v", got, err, unlimited)
	}
	testReplicatorRateLimited(t, cl, topic, func() {
		if err := policies.RemoveReplicatorDispatchRate(ctx, *tn); err != nil {
			t.Fatal(err)
		}
	})
	if got, err := policies.GetReplicatorDispatchRate(ctx, *tn, false); err != nil || got != nil {
		t.Fatalf("after remove: %+v %v, want nothing", got, err)
	}
	global := utils.DispatchRateData{DispatchThrottlingRateInMsg: 7, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}
	if err := inB.TopicPolicies(true).SetReplicatorDispatchRate(ctx, *tn, global); err != nil {
		t.Fatal(err)
	}
	if got, err := inB.TopicPolicies(false).GetReplicatorDispatchRate(ctx, *tn, true); err != nil || got == nil || *got != global {
		t.Fatalf("in b, applied after a global rate: %+v %v, want %+v", got, err, global)
	}
	if got, err := policies.GetReplicatorDispatchRate(ctx, *tn, true); err != nil || got == nil || *got != global {
		t.Fatalf("in a, applied after a global rate: %+v %v, want it (a has none of its own now) %+v", got, err, global)
	}
}

// Without a namespace policy the broker's
// dispatchThrottlingRatePerReplicatorInMsg applies, and a dynamic
// configuration override of 0 lifts it.
func TestGeoReplicatorDispatchRateBrokerDefault(t *testing.T) {
	cl := newGeoInstanceWith(t, func(c *Config) { c.DispatchThrottlingRatePerReplicatorInMsg = geoRateLimit }, "a", "b")
	geoNamespace(t, cl["a"].res, "rated", "a", "b")
	testReplicatorRateLimited(t, cl, "persistent://geo/rated/t", func() {
		cl["a"].broker().applyOverrides(map[string]string{"dispatchThrottlingRatePerReplicatorInMsg": "0"})
	})
}

// geoRateLimit is the replicator limit of the rate tests, messages a second.
const geoRateLimit = 50

// testReplicatorRateLimited stores 600 messages in a while its replicator
// to b is limited to geoRateLimit a second, measures the rate b receives
// them at, lifts the limit with lift and checks the rest arrives at once.
func testReplicatorRateLimited(t *testing.T, cl map[string]*geoCluster, topic string, lift func()) {
	t.Helper()
	cb := subscribeGeo(t, cl["b"].url(), topic)
	prod, err := newClient(t, cl["a"].url()).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const total = 600
	var wg sync.WaitGroup
	for i := range total {
		sendAsync(t, prod, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("p#%d", i))}, &wg)
	}
	wg.Wait() // all stored in a: only the limit holds replication back

	// Over 3 s from the first arrival: about 50 a second (150); unlimited,
	// all 600 arrive well within that.
	eventually(t, "first message in b", func() error {
		if len(cb.values()) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	first := len(cb.values())
	const window = 3 * time.Second
	began := time.Now()
	time.Sleep(window)
	n := len(cb.values()) - first
	elapsed := time.Since(began) // a loaded machine wakes late: count over the real window
	perSec := float64(n) / elapsed.Seconds()
	t.Logf("limited to %d msg/s: %d messages in %v after the first %d (%.1f msg/s)", geoRateLimit, n, window, first, perSec)
	if perSec < 0.6*geoRateLimit || perSec > 1.5*geoRateLimit {
		t.Fatalf("replicated at %.1f msg/s, want about %d", perSec, geoRateLimit)
	}

	lift()
	lifted := time.Now()
	cb.waitFor(t, "b after the limit was lifted", total)
	d := time.Since(lifted)
	t.Logf("the other %d arrived within %v after the limit was lifted", total-first-n, d)
	if d > 3*time.Second {
		t.Fatalf("the rest took %v after the limit was lifted", d)
	}
}
