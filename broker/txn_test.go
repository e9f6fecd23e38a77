package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
)

// startTxnBroker starts a broker with transactions over ledgers (a
// memory-backed configuration store, so the assign topic is recorded as
// on a standalone).
func startTxnBroker(t *testing.T, ledgers managedledger.Factory) (*Broker, string) {
	t.Helper()
	return startPolicyBrokerOn(t, func(*resources.Policies) {}, ledgers, Config{TransactionCoordinatorEnabled: true,
		TransactionBufferSnapshotMinTime: 50 * time.Millisecond})
}

func newTxnClient(t *testing.T, url string) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 10 * time.Second,
		ConnectionTimeout: 5 * time.Second, Logger: log.DefaultNopLogger(), EnableTransaction: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { time.Sleep(50 * time.Millisecond); c.Close() })
	return c
}

func newTxn(t *testing.T, c pulsar.Client, timeout time.Duration) pulsar.Transaction {
	t.Helper()
	tx, err := c.NewTransaction(timeout)
	if err != nil {
		t.Fatalf("new transaction: %v", err)
	}
	return tx
}

func sendIn(t *testing.T, p pulsar.Producer, tx pulsar.Transaction, payloads ...string) {
	t.Helper()
	for _, s := range payloads {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(s), Transaction: tx}); err != nil {
			t.Fatalf("send %q: %v", s, err)
		}
	}
}

// receiveWithin returns what the consumer gets within d (acknowledging
// each plainly when ack).
func receiveWithin(t *testing.T, cons pulsar.Consumer, d time.Duration, ack bool) []string {
	t.Helper()
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		m, err := cons.Receive(ctx)
		if err != nil {
			return got
		}
		got = append(got, string(m.Payload()))
		if ack {
			_ = cons.Ack(m)
		}
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// Messages of a transaction are delivered once it commits and never if
// it aborts; plain messages before them are not held back; a
// transaction's messages do not let the ones after them through early.
func TestTxnMessagesVisibleOnlyAfterCommit(t *testing.T) {
	b, url := startTxnBroker(t, testLedgers(t, 4))
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-visible"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	committed, aborted := newTxn(t, c, time.Minute), newTxn(t, c, time.Minute)
	sendIn(t, p, nil, names("plain", 3)...)
	sendIn(t, p, committed, names("c", 5)...)
	sendIn(t, p, aborted, names("a", 5)...)
	sendIn(t, p, nil, "after")
	if got := receiveWithin(t, cons, time.Second, true); fmt.Sprint(got) != fmt.Sprint(names("plain", 3)) {
		t.Fatalf("before the transactions end got %v, want only the plain messages before them", got)
	}
	if err := aborted.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := receiveWithin(t, cons, 500*time.Millisecond, true); len(got) != 0 {
		t.Fatalf("after the abort, with the other transaction open, got %v", got)
	}
	if err := committed.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := append(names("c", 5), "after")
	if got := receiveWithin(t, cons, time.Second, true); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the commit got %v, want %v (no aborted message)", got, want)
	}
	if err := committed.Commit(context.Background()); err == nil {
		t.Fatal("second commit succeeded")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(b))
	wantMetrics := `
# HELP pulsar_txn_committed_count Transactions the coordinator committed since it loaded here.
# TYPE pulsar_txn_committed_count counter
pulsar_txn_committed_count{cluster="test",coordinator_id="0"} 1
# HELP pulsar_txn_aborted_count Transactions the coordinator aborted since it loaded here (timeouts included).
# TYPE pulsar_txn_aborted_count counter
pulsar_txn_aborted_count{cluster="test",coordinator_id="0"} 1
# HELP pulsar_txn_tb_active_total Transactions with messages in the topic that have not ended.
# TYPE pulsar_txn_tb_active_total gauge
pulsar_txn_tb_active_total{cluster="test",namespace="t/ns",topic="` + topic + `"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantMetrics), "pulsar_txn_committed_count",
		"pulsar_txn_aborted_count", "pulsar_txn_tb_active_total"); err != nil {
		t.Fatal(err)
	}
}

// Acknowledgements in a transaction hold their messages: an abort gives
// them out again, a commit acknowledges them for good, also across a
// topic reload between the acknowledgement and the commit.
func TestTxnAcknowledgements(t *testing.T) {
	b, url := startTxnBroker(t, testLedgers(t, 4))
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-acks"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, c, topic, 4, false)
	ackAll := func(tx pulsar.Transaction, n int) {
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			m, err := cons.Receive(ctx)
			cancel()
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			if err := cons.AckWithTxn(m, tx); err != nil {
				t.Fatalf("ack in transaction: %v", err)
			}
		}
	}
	tx := newTxn(t, c, time.Minute)
	ackAll(tx, 4)
	if err := tx.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	tx = newTxn(t, c, time.Minute)
	ackAll(tx, 4) // given out again after the abort
	cons.Close()
	b.UnloadAll(context.Background())
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatalf("commit after the topic reloaded: %v", err)
	}
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveWithin(t, cons, time.Second, false); len(got) != 0 {
		t.Fatalf("after the commit the subscription still delivered %v", got)
	}
}

// Two transactions cannot acknowledge one message.
func TestTxnAckConflict(t *testing.T) {
	_, url := startTxnBroker(t, testLedgers(t, 0))
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-conflict"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, c, topic, 1, false)
	m, err := cons.Receive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first, second := newTxn(t, c, time.Minute), newTxn(t, c, time.Minute)
	if err := cons.AckWithTxn(m, first); err != nil {
		t.Fatal(err)
	}
	err = cons.AckWithTxn(m, second)
	if err == nil || !strings.Contains(err.Error(), "TransactionConflict") {
		t.Fatalf("second transaction's ack answered %v, want a transaction conflict", err)
	}
}

// A transaction its client forgot is aborted at its timeout: its
// messages are never delivered and what comes after them is.
func TestTxnTimeoutAborts(t *testing.T) {
	_, url := startTxnBroker(t, testLedgers(t, 0))
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-timeout"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	tx := newTxn(t, c, time.Second)
	sendIn(t, p, tx, "forgotten")
	sendIn(t, p, nil, "plain")
	if got := receiveWithin(t, cons, 4*time.Second, true); fmt.Sprint(got) != "[plain]" {
		t.Fatalf("got %v, want only the plain message once the transaction timed out", got)
	}
}

// Open transactions survive a reload of their topic: the buffer's
// snapshot and the entries after it bring them back, still hidden, and
// they commit afterwards.
func TestTxnBufferRecovery(t *testing.T) {
	b, url := startTxnBroker(t, testLedgers(t, 3))
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-recover"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close() // its cursor keeps the ledgers
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	done, open := newTxn(t, c, time.Minute), newTxn(t, c, time.Minute)
	sendIn(t, p, done, "d1")
	if err := done.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // past the snapshot interval: the next end saves one
	sendIn(t, p, open, "o1", "o2")
	sendIn(t, p, nil, "plain")
	p.Close()
	b.UnloadAll(context.Background())
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveWithin(t, cons, time.Second, true); len(got) != 0 {
		t.Fatalf("after the reload, before the commit, got %v", got)
	}
	if err := open.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := receiveWithin(t, cons, time.Second, true); fmt.Sprint(got) != "[o1 o2 plain]" {
		t.Fatalf("after the commit got %v, want [o1 o2 plain] (the aborted d1 never)", got)
	}
}

// Without transactions the client is told so at once.
func TestTxnDisabled(t *testing.T) {
	_, url := startPolicyBroker(t, func(*resources.Policies) {})
	_, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, EnableTransaction: true, Logger: log.DefaultNopLogger(),
		OperationTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("a client with transactions connected to a broker without them")
	}
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// The transactions admin API: a transaction's metadata with its
// partitions and subscriptions, coordinator, buffer and pending-ack stats,
// and an operator's abort.
func TestTxnAdmin(t *testing.T) {
	b, url := startTxnBroker(t, testLedgers(t, 0))
	web := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(web.Close)
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-admin"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	sendIn(t, p, nil, "plain")
	tx := newTxn(t, c, time.Minute)
	sendIn(t, p, tx, "in")
	m, err := cons.Receive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.AckWithTxn(m, tx); err != nil {
		t.Fatal(err)
	}
	id := tx.GetTxnID()
	base := web.URL + "/admin/v3/transactions/"
	var meta struct {
		TxnID              string                    `json:"txnId"`
		Status             string                    `json:"status"`
		ProducedPartitions map[string]map[string]any `json:"producedPartitions"`
		AckedPartitions    map[string]map[string]any `json:"ackedPartitions"`
	}
	if code := getJSON(t, fmt.Sprintf("%stransactionMetadata/%d/%d", base, id.MostSigBits, id.LeastSigBits), &meta); code != 200 ||
		meta.Status != "OPEN" || meta.ProducedPartitions[topic]["startPosition"] == nil || meta.AckedPartitions[topic]["s"] == nil {
		t.Fatalf("transaction metadata: %d %+v", code, meta)
	}
	var coord map[string]struct {
		Ongoing int `json:"ongoingTxnSize"`
	}
	if code := getJSON(t, base+"coordinatorStats", &coord); code != 200 || coord["0"].Ongoing != 1 {
		t.Fatalf("coordinator stats: %d %+v", code, coord)
	}
	var buf struct {
		Ongoing int64  `json:"ongoingTxnSize"`
		MaxRead string `json:"maxReadPosition"`
	}
	if code := getJSON(t, base+"transactionBufferStats/persistent/t/ns/txn-admin", &buf); code != 200 || buf.Ongoing != 1 {
		t.Fatalf("buffer stats: %d %+v", code, buf)
	}
	var pend struct {
		Ongoing int64 `json:"ongoingTxnSize"`
	}
	if code := getJSON(t, base+"pendingAckStats/persistent/t/ns/txn-admin/s", &pend); code != 200 || pend.Ongoing != 1 {
		t.Fatalf("pending-ack stats: %d %+v", code, pend)
	}
	var slow map[string]any
	if code := getJSON(t, base+"slowTransactions/0", &slow); code != 200 || slow[fmt.Sprintf("(%d,%d)", id.MostSigBits, id.LeastSigBits)] == nil {
		t.Fatalf("slow transactions: %d %v", code, slow)
	}
	var inBuf struct {
		Start string `json:"startPosition"`
	}
	if code := getJSON(t, fmt.Sprintf("%stransactionInBufferStats/persistent/t/ns/txn-admin/%d/%d", base, id.MostSigBits, id.LeastSigBits),
		&inBuf); code != 200 || inBuf.Start == "" {
		t.Fatalf("transaction in buffer: %d %+v", code, inBuf)
	}
	if code := getJSON(t, fmt.Sprintf("%stransactionInPendingAckStats/persistent/t/ns/txn-admin/s/%d/%d", base, id.MostSigBits,
		id.LeastSigBits), nil); code != 200 {
		t.Fatalf("transaction in pending ack: %d", code)
	}
	resp, err := http.Post(fmt.Sprintf("%sabortTransaction/%d/%d", base, id.MostSigBits, id.LeastSigBits), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("abort: %s", resp.Status)
	}
	if code := getJSON(t, fmt.Sprintf("%stransactionMetadata/%d/%d", base, id.MostSigBits, id.LeastSigBits), nil); code != 404 {
		t.Fatalf("metadata of the aborted transaction: %d, want 404", code)
	}
	for _, tc := range []struct {
		body string
		want int
	}{{"4", http.StatusNoContent}, {"2", http.StatusBadRequest}, {"x", http.StatusBadRequest}} {
		body, want := tc.body, tc.want
		resp, err := http.Post(base+"transactionCoordinator/replicas", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("scale coordinators to %s: %s, want %d", body, resp.Status, want)
		}
	}
	if code := getJSON(t, base+"coordinatorStats?coordinatorId=3", nil); code != 200 {
		t.Fatalf("coordinator 3 after scaling to 4: %d", code)
	}
	// The abort gave the acknowledged message out again.
	if got := receiveWithin(t, cons, time.Second, true); fmt.Sprint(got) != "[plain]" {
		t.Fatalf("after the abort got %v, want the message acknowledged in it again", got)
	}
}

// A transaction over topics owned by two brokers: the coordinator ends
// it on the other broker's topics with END_TXN_ON_PARTITION and
// END_TXN_ON_SUBSCRIPTION, and everything commits together.
func TestTxnAcrossBrokers(t *testing.T) {
	c := startClusterWith(t, 2, Config{TransactionCoordinatorEnabled: true})
	client := newTxnClient(t, c.brokers[0].url())
	var topics []string
	for i := range 8 {
		topics = append(topics, fmt.Sprintf("persistent://public/default/txn-spread-%d", i))
	}
	producers, consumers := attachAll(t, client, topics)
	if n := c.servingBrokers(topics); n != 2 {
		t.Fatalf("topics on %d brokers, want both (the test needs a remote end)", n)
	}
	for i, p := range producers {
		sendIn(t, p, nil, fmt.Sprint("plain-", i))
	}
	tx := newTxn(t, client, time.Minute)
	for i, cons := range consumers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("topic %d: %v", i, err)
		}
		if err := cons.AckWithTxn(m, tx); err != nil {
			t.Fatalf("topic %d: ack in the transaction: %v", i, err)
		}
		sendIn(t, producers[i], tx, fmt.Sprint("txn-", i))
	}
	for i, cons := range consumers {
		if got := receiveWithin(t, cons, 50*time.Millisecond, false); len(got) != 0 {
			t.Fatalf("topic %d delivered %v before the commit", i, got)
		}
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatalf("commit across brokers: %v", err)
	}
	for i, cons := range consumers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil || string(m.Payload()) != fmt.Sprint("txn-", i) {
			t.Fatalf("topic %d after the commit: %v %v", i, m, err)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	// The acknowledgements in the transaction were applied on both
	// brokers: nothing is left in any backlog.
	deadline := time.Now().Add(5 * time.Second)
	for _, name := range topics {
		for backlogOf(c, name) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s keeps a backlog of %d after the commit", name, backlogOf(c, name))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// backlogOf is the backlog of subscription "s" of the topic, wherever it
// is loaded (-1 if nowhere).
func backlogOf(c *testCluster, name string) int64 {
	for _, cb := range c.brokers {
		if t := cb.b.loadedTopicNamed(name); t != nil {
			t.mu.Lock()
			s := t.subs["s"]
			t.mu.Unlock()
			if s != nil {
				return s.cursor.Backlog()
			}
		}
	}
	return -1
}

// Geo-replication of a transactional topic: the remote cluster gets the
// committed messages, once each and only after the commit, never the
// aborted ones nor the markers.
func TestTxnGeoReplication(t *testing.T) {
	cs := newGeoInstanceWith(t, func(c *Config) { c.TransactionCoordinatorEnabled = true }, "a", "b")
	geoNamespace(t, cs["a"].res, "txn", "a", "b")
	const topic = "persistent://geo/txn/t"
	remote := subscribeGeo(t, cs["b"].url(), topic)
	c := newTxnClient(t, cs["a"].url())
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	committed, aborted := newTxn(t, c, time.Minute), newTxn(t, c, time.Minute)
	sendIn(t, p, committed, "c#0", "c#1", "c#2")
	sendIn(t, p, aborted, "x#0", "x#1")
	sendIn(t, p, nil, "plain#0")
	time.Sleep(300 * time.Millisecond)
	if got := remote.values(); len(got) != 0 {
		t.Fatalf("replicated before the transactions ended: %v", got)
	}
	if err := aborted.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := committed.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := remote.waitFor(t, "remote", 4)
	if fmt.Sprint(got) != "[c#0 c#1 c#2 plain#0]" {
		t.Fatalf("remote got %v, want the committed messages and the plain one", got)
	}
}

// The coordinators move (pulsar/system unloaded) between transactions:
// the brokers close the client's coordinator connections, the Go client
// looks the coordinators up again, and the next transactions work. Before
// the fix the client kept asking the old broker, which answered
// TransactionCoordinatorNotFound for ever (found by the fault suite,
// txn-pipeline seed 2: 1,142 transactions failed in a row).
func TestTxnCoordinatorsMove(t *testing.T) {
	c := startClusterWith(t, 2, Config{TransactionCoordinatorEnabled: true, TransactionCoordinators: 4})
	client := newTxnClient(t, c.brokers[0].url())
	const topic = "persistent://public/default/txn-move"
	// The producer is a client's without transactions, so its connection
	// is not one the coordinators' move closes (the broker closes a
	// coordinator's connections: the Go client reconnects its coordinator
	// handler only when its connection closes). The Go client's producer
	// reconnect races with its own sends (v0.19.0: grabCnx writes the
	// producer name while internalSend marshals it; it failed CI under
	// -race twice, once with the producer on a second client with
	// transactions enabled, whose coordinator handlers share the
	// connection), which this test is not about. Its transactional sends
	// register with the transaction's own client's coordinators.
	p, err := newClient(t, c.brokers[0].url()).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	// A transaction whose commit failed while the coordinators moved is
	// aborted, or else times out (5 s): an open one holds every later
	// message back from readers, as in Pulsar.
	commitOne := func(payload string) error {
		tx, err := client.NewTransaction(5 * time.Second)
		if err != nil {
			return err
		}
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(payload), Transaction: tx}); err != nil {
			_ = tx.Abort(context.Background())
			return err
		}
		if err := tx.Commit(context.Background()); err != nil {
			_ = tx.Abort(context.Background())
			return err
		}
		return nil
	}
	for i := range 4 {
		if err := commitOne(fmt.Sprint("before-", i)); err != nil {
			t.Fatalf("before the move: %v", err)
		}
	}
	for _, cb := range c.brokers {
		req, _ := http.NewRequest(http.MethodPut, cb.web.URL+"/admin/v2/namespaces/pulsar/system/unload", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// Every coordinator is asked (NEW_TXN goes round the coordinators);
	// a few attempts cover those reconnecting at that moment.
	committed := 0
	for i := 0; i < 40 && committed < 8; i++ {
		if err := commitOne(fmt.Sprint("after-", i)); err == nil {
			committed++
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if committed < 8 {
		t.Fatalf("after the coordinators moved only %d of 40 transactions committed", committed)
	}
	// The consumer subscribes only now, from the earliest message: closing
	// a coordinator's connection closes every consumer on it too, and the
	// Go client's consumer reconnect has a data race of its own (v0.19.0,
	// in runEventsLoop's reconnectToBroker; it failed one CI run under
	// -race), which this test is not about.
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for deadline := time.Now().Add(20 * time.Second); len(got) < 12 && time.Now().Before(deadline); {
		got = append(got, receiveWithin(t, cons, time.Second, true)...)
	}
	if len(got) < 12 {
		t.Fatalf("got %d messages, want the 4 before and at least 8 after: %v", len(got), got)
	}
}

// Compaction of a transactional topic: an aborted transaction's messages
// never reach the compacted ledger; while a transaction is open nothing is
// compacted (its messages and what follows are not readable yet).
func TestTxnCompaction(t *testing.T) {
	b, url := startTxnBroker(t, testLedgers(t, 0))
	if _, ok := b.sideLedgers(); !ok {
		t.Skip("this storage keeps no compacted ledgers")
	}
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-compact"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	send := func(tx pulsar.Transaction, key, value string) {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: key, Payload: []byte(value), Transaction: tx}); err != nil {
			t.Fatal(err)
		}
	}
	aborted, open := newTxn(t, c, time.Minute), newTxn(t, c, time.Minute)
	send(nil, "k1", "v1")
	send(aborted, "k1", "bad")
	if err := aborted.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	send(open, "k2", "open")
	send(nil, "k3", "v3")
	tp, err := b.getTopic(context.Background(), mustTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	compacted := func() string {
		if _, err := tp.compact(context.Background()); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range readAll(t, c, topic, true) {
			out = append(out, m.Key()+"="+string(m.Payload()))
		}
		return fmt.Sprint(out)
	}
	if got := compacted(); got != "[k1=v1]" {
		t.Fatalf("read compacted with a transaction open: %s, want [k1=v1] (nothing aborted, nothing from the open one on)", got)
	}
	if err := open.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := compacted(); got != "[k1=v1 k2=open k3=v3]" {
		t.Fatalf("compacted after the commit: %s", got)
	}
}

// A reader's HasNext is false once it read the last message it can be
// given: not an open transaction's, nor an aborted one's or a marker
// (Pulsar's last dispatchable position).
func TestTxnReaderHasNext(t *testing.T) {
	_, url := startTxnBroker(t, testLedgers(t, 0))
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-hasnext"
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	aborted, open := newTxn(t, c, time.Minute), newTxn(t, c, time.Minute)
	sendIn(t, p, nil, "a")
	sendIn(t, p, aborted, "x")
	if err := aborted.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	sendIn(t, p, open, "o")
	sendIn(t, p, nil, "b")
	got := readAll(t, c, topic, false) // fails on a HasNext that promises a message never given
	if len(got) != 1 || string(got[0].Payload()) != "a" {
		t.Fatalf("reader got %d messages, want only a", len(got))
	}
}

// Transactional batches large enough for storage to take their checksum
// from the producer's (wire.Entry.WithMetadata) are stored with the
// transaction id and read back intact: a wrong checksum would fail the
// read as corrupt (and the invariants build's in-place append check).
func TestTxnLargeBatchesReadBackIntact(t *testing.T) {
	_, url := startTxnBroker(t, testLedgers(t, 4))
	c := newTxnClient(t, url)
	const topic = "persistent://t/ns/txn-large"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 64,
		BatchingMaxPublishDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tx := newTxn(t, c, time.Minute)
	var want []string
	var wg sync.WaitGroup
	for i := range 48 {
		s := fmt.Sprintf("%03d:%s", i, strings.Repeat(string(rune('a'+i%26)), 1024+i))
		want = append(want, s)
		wg.Add(1)
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(s), Transaction: tx},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send in a transaction: %v", err)
				}
				wg.Done()
			})
	}
	wg.Wait()
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := receiveWithin(t, cons, 2*time.Second, true)
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d: got %q..., want %q...", i, got[i][:12], want[i][:12])
		}
	}
}
