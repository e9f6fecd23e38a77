package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/netio"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// testCluster is n brokers in cluster mode sharing one metadata server
// and one topic storage, each with its binary and HTTP listeners.
type testCluster struct {
	meta    *metadata.MemoryServer
	brokers []*clusterBroker
	logs    *failureLog
}

type clusterBroker struct {
	b     *Broker
	srv   *netio.Server
	web   *httptest.Server
	store metadata.Store
	own   *ownership.Service
}

func (cb *clusterBroker) url() string { return "pulsar://" + cb.srv.Addr().String() }

func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return startClusterWith(t, n, Config{})
}

// startClusterWith is startCluster with the brokers' settings of cfg.
func startClusterWith(t *testing.T, n int, cfg Config) *testCluster {
	t.Helper()
	c := &testCluster{meta: metadata.NewMemoryServer(), logs: newFailureLog(t)}
	ledgers := testClusterLedgers(t, 50)
	for i := range n {
		logger := c.logs.logger().With("broker", i)
		c.brokers = append(c.brokers, startClusterBrokerWith(t, c.meta, ledgers(), logger, cfg))
	}
	return c
}

func startClusterBrokerWith(t *testing.T, meta *metadata.MemoryServer, ledgers managedledger.Factory, logger *slog.Logger, cfg Config) *clusterBroker {
	t.Helper()
	store := meta.NewSession()
	cfg.ClusterName, cfg.Metadata, cfg.StatsUpdateFrequency, cfg.Logger = "test", store, 100*time.Millisecond, logger
	b := New(cfg, ledgers)
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(b.HTTPHandler())
	own, err := b.EnableOwnership(context.Background(), ownership.Config{Store: store,
		BrokerID: strings.TrimPrefix(web.URL, "http://"), WebServiceURL: web.URL,
		PulsarServiceURL: "pulsar://" + srv.Addr().String(), ReportInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cb := &clusterBroker{b: b, srv: srv, web: web, store: store, own: own}
	t.Cleanup(cb.close)
	return cb
}

// close stops the broker as its process exiting would (again is a no-op).
func (cb *clusterBroker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cb.own.Close(ctx)
	cb.web.Close()
	cb.srv.Close(ctx)
	cb.b.Close(ctx)
}

// servingBrokers counts the brokers that have one of the topics loaded.
func (c *testCluster) servingBrokers(topics []string) int {
	n := 0
	for _, cb := range c.brokers {
		for _, t := range cb.b.loadedTopics() {
			if containsTopic(topics, t.name.String()) {
				n++
				break
			}
		}
	}
	return n
}

func containsTopic(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestClusterSpreadsTopicsAndUnloadMovesThem: one service URL reaches
// topics on every broker; unloading the namespace moves its bundles while
// producers and consumers keep going, and nothing is lost.
func TestClusterSpreadsTopicsAndUnloadMovesThem(t *testing.T) {
	c := startCluster(t, 3)
	client := c.newClient(t)
	var topics []string
	for i := range 12 {
		topics = append(topics, fmt.Sprintf("persistent://public/default/spread-%d", i))
	}
	producers, consumers := attachAll(t, client, topics)
	if n := c.servingBrokers(topics); n < 2 {
		t.Fatalf("12 topics in 4 bundles served by %d of 3 brokers", n)
	}
	send := func(round int) {
		for i, p := range producers {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("%d-%d", i, round))})
			cancel()
			if err != nil {
				t.Fatalf("send to %s round %d: %v", topics[i], round, err)
			}
		}
	}
	send(0)
	// Unload through another broker's admin API: every bundle moves.
	before := c.logs.count(producerReconnected)
	req, _ := http.NewRequest(http.MethodPut, c.brokers[1].web.URL+"/admin/v2/namespaces/public/default/unload", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("unload: %v %v", resp, err)
	}
	resp.Body.Close()
	c.waitReconnected(t, topics, before, len(topics)) // the unload moved every bundle
	for round := 1; round < 3; round++ {
		send(round)
	}
	receiveRounds(t, consumers, 3)
}

// producerReconnected is the Go client's log line once a producer's
// reconnection is complete, its new connection's state written.
const producerReconnected = "Reconnected producer to broker"

// waitReconnected waits until every topic is served with its producer and
// consumer attached again, and the client logged moved more producer
// reconnections than before (the count before the fault). Sends wait for
// it because the Go client (v0.19) races with itself when a send meets a
// producer reconnection (it rewrites the producer's encryptor unlocked
// after the broker answered, so the broker's view alone is too early): a
// client bug, not what we test.
func (c *testCluster) waitReconnected(t *testing.T, topics []string, before, moved int) {
	t.Helper()
	// Longer than the clients' longest reconnect backoff would need if
	// their first attempts failed while the bundles were unowned.
	const patience = 45 * time.Second
	deadline := time.Now().Add(patience)
	for _, name := range topics {
		for !c.attached(name) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: producer and consumer not back after %v", name, patience)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for c.logs.count(producerReconnected) < before+moved {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d producers logged their reconnection after %v", c.logs.count(producerReconnected)-before, moved, patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *testCluster) attached(name string) bool {
	for _, cb := range c.brokers {
		for _, lt := range cb.b.loadedTopics() {
			if lt.name.String() == name {
				producers, consumers, _, _ := lt.counts()
				return producers > 0 && consumers > 0
			}
		}
	}
	return false
}

// attachAll subscribes to and opens a producer on every topic.
func attachAll(t *testing.T, client pulsar.Client, topics []string) ([]pulsar.Producer, []pulsar.Consumer) {
	t.Helper()
	var producers []pulsar.Producer
	var consumers []pulsar.Consumer
	for _, topic := range topics {
		cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, cons)
		p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		producers = append(producers, p)
	}
	return producers, consumers
}

func receiveRounds(t *testing.T, consumers []pulsar.Consumer, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	for i, cons := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := map[string]bool{}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for len(seen) < rounds {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Errorf("consumer %d: %d of %d messages: %v", i, len(seen), rounds, err)
					return
				}
				seen[string(m.Payload())] = true
				_ = cons.Ack(m)
			}
		}()
	}
	wg.Wait()
}

// TestClusterBrokerLossMovesTopics: a broker whose metadata session is
// lost stops serving; its topics move to the others and the clients carry
// on without losing acknowledged messages.
func TestClusterBrokerLossMovesTopics(t *testing.T) {
	c := startCluster(t, 3)
	client := c.newClient(t)
	var topics []string
	for i := range 8 {
		topics = append(topics, fmt.Sprintf("persistent://public/default/loss-%d", i))
	}
	producers, consumers := attachAll(t, client, topics)
	// The victim is a broker serving some topic, but not the one the
	// client bootstraps through.
	var victim *clusterBroker
	for _, cb := range c.brokers[1:] {
		if len(cb.b.loadedTopics()) > 0 {
			victim = cb
		}
	}
	if victim == nil {
		t.Fatal("placement put every topic on the bootstrap broker: 4 bundles over 3 brokers must spread")
	}
	for i, p := range producers {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("%d-0", i))}); err != nil {
			t.Fatal(err)
		}
	}
	moved := len(victim.b.loadedTopics())
	before := c.logs.count(producerReconnected)
	c.meta.ExpireSession(victim.store)
	deadline := time.Now().Add(10 * time.Second)
	for len(victim.b.loadedTopics()) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the broker that lost its session still serves topics")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Pulsar's zookeeperSessionExpiredPolicy=shutdown: the process exits.
	victim.close()
	c.waitReconnected(t, topics, before, moved)
	for i, p := range producers {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("%d-1", i))})
		cancel()
		if err != nil {
			t.Fatalf("send after the broker loss: %v", err)
		}
	}
	receiveRounds(t, consumers, 2)
	for _, topic := range topics {
		for _, cb := range []*clusterBroker{victim} {
			for _, lt := range cb.b.loadedTopics() {
				if lt.name.String() == topic {
					t.Fatalf("%s still loaded on the lost broker", topic)
				}
			}
		}
	}
}

// A cluster broker's ports open before its ownership service starts (it
// registers its real addresses, known only once listening). A client that
// reaches it in between, such as one reconnecting to a broker restarted
// after it lost its session, must not get a topic loaded there: the
// bundle's real owner may be writing it. The chaos suite found two brokers
// fencing each other's ledgers through this window.
func TestNoTopicServedBeforeOwnershipStarts(t *testing.T) {
	meta := metadata.NewMemoryServer()
	store := meta.NewSession()
	b := New(Config{ClusterName: "test", Metadata: store, OwnershipRequired: true}, testLedgers(t, 0))
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(b.HTTPHandler())
	defer web.Close()
	const topic = "persistent://public/default/before-ownership"
	r := dialRaw(t, "pulsar://"+srv.Addr().String())
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: ptr(topic), RequestId: ptr(uint64(1))}})
	if cmd, err := r.readAnswer(); err != nil || cmd.GetLookupTopicResponse().GetResponse() != pb.CommandLookupTopicResponse_Failed ||
		cmd.GetLookupTopicResponse().GetError() != pb.ServerError_ServiceNotReady {
		t.Fatalf("lookup before ownership: %v %v, want Failed/ServiceNotReady", cmd, err)
	}
	if cmd := r.openProducer(topic, 1, 2, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_ERROR ||
		cmd.GetError().GetError() != pb.ServerError_ServiceNotReady {
		t.Fatalf("producer before ownership: %v, want ServiceNotReady", cmd)
	}
	if n := len(b.loadedTopics()); n != 0 {
		t.Fatalf("%d topics loaded before the ownership service started", n)
	}
	own, err := b.EnableOwnership(context.Background(), ownership.Config{Store: store,
		BrokerID: strings.TrimPrefix(web.URL, "http://"), WebServiceURL: web.URL,
		PulsarServiceURL: "pulsar://" + srv.Addr().String(), ReportInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		own.Close(ctx)
		srv.Close(ctx)
		b.Close(ctx)
	}()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: ptr(topic), RequestId: ptr(uint64(4))}})
	if cmd, err := r.readAnswer(); err != nil || cmd.GetLookupTopicResponse().GetResponse() != pb.CommandLookupTopicResponse_Connect {
		t.Fatalf("lookup once ownership runs: %v %v", cmd, err)
	}
	if cmd := r.openProducer(topic, 2, 5, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("producer once ownership runs: %v", cmd)
	}
}

// An unloaded bundle's clients are told where to reconnect
// (CLOSE_PRODUCER's assignedBrokerServiceUrl) and that broker serves them
// without a lookup: it takes the bundle over once the old owner let go.
func TestUnloadSendsClientsToTheNextOwner(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "persistent://public/default/handed-over"
	var owner, next *clusterBroker
	for _, cb := range c.brokers {
		res, err := cb.own.Lookup(context.Background(), "public/default", topic, false)
		if err == nil && res.Self {
			owner = cb
		}
	}
	if owner == nil { // the lookup redirected: take it on the first broker
		owner = c.brokers[0]
		if res, err := owner.own.Lookup(context.Background(), "public/default", topic, true); err != nil || !res.Self {
			t.Fatalf("broker 0 takes the bundle: %+v %v", res, err)
		}
	}
	for _, cb := range c.brokers {
		if cb != owner {
			next = cb
		}
	}
	r := dialRaw(t, owner.url())
	r.connect()
	if ans := r.openProducer(topic, 1, 1, pb.ProducerAccessMode_Shared); ans.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER on the owner: %v", ans)
	}
	bundle, err := owner.own.BundleOf(context.Background(), "public/default", topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.own.Unload(context.Background(), bundle); err != nil {
		t.Fatal(err)
	}
	closed, err := r.readAnswer()
	if err != nil || closed.GetType() != pb.BaseCommand_CLOSE_PRODUCER {
		t.Fatalf("after the unload the client got %v (%v), want CLOSE_PRODUCER", closed, err)
	}
	if got := closed.GetCloseProducer().GetAssignedBrokerServiceUrl(); got != next.url() {
		t.Fatalf("CLOSE_PRODUCER sends the client to %q, want the other broker %s", got, next.url())
	}
	again := dialRaw(t, next.url())
	again.connect()
	if ans := again.openProducer(topic, 1, 1, pb.ProducerAccessMode_Shared); ans.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER on the broker named, without a lookup: %v", ans)
	}
}
