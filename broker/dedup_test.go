package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

func startDedupBroker(t *testing.T, ledgers managedledger.Factory, enabled bool) (*Broker, string) {
	t.Helper()
	b := New(Config{ClusterName: "test", BrokerDeduplicationEnabled: enabled, DeduplicationEntriesInterval: 5,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ledgers)
	return b, serveTestBroker(t, b)
}

// Every DeduplicationEntriesInterval stored entries the state is
// snapshotted in the pulsar.dedup cursor; a reload starts from the
// snapshot (replaying only what follows it) and still rejects resends of
// sequence ids stored before and after it. The cursor is no
// subscription, and a broker with deduplication off deletes it.
func TestDeduplicationSnapshot(t *testing.T) {
	ledgers := testLedgers(t, 4) // rollovers: the snapshot must cross ledgers
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b1, url1 := startDedupBroker(t, ledgers, true)
	c1 := newClient(t, url1)
	// The subscription keeps what is published (without it the entries
	// before the snapshot would be trimmed: retention is 0).
	sub, err := c1.Subscribe(pulsar.ConsumerOptions{Topic: "snap", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	p, err := c1.CreateProducer(pulsar.ProducerOptions{Topic: "snap", Name: "w", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for seq := range int64(12) {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m-%05d", seq)), SequenceID: &seq}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	tp := b1.loadedTopic(mustTopicName(t, "snap"))
	snap := tp.dedup.cursor.Properties()
	if snap["w"] != 9 {
		t.Fatalf("snapshot %v after 12 entries with an interval of 5; want w at 9 (the 10th entry)", snap)
	}
	if _, ok := tp.subscriptionStats()[dedupCursor]; ok {
		t.Fatal("the deduplication cursor is listed as a subscription")
	}
	b1.UnloadAll(ctx)

	b2, url2 := startDedupBroker(t, ledgers, true)
	c2 := newClient(t, url2)
	if n := b2.loadedTopic(mustTopicName(t, "snap")); n != nil {
		t.Fatal("topic loaded before use")
	}
	p2, err := c2.CreateProducer(pulsar.ProducerOptions{Topic: "snap", Name: "w", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := b2.loadedTopic(mustTopicName(t, "snap")).dedup.replayed; n != 2 {
		t.Fatalf("the reload replayed %d entries; want the 2 after the snapshot", n)
	}
	for _, seq := range []int64{3, 11} { // one before the snapshot, one replayed after it
		if _, err := p2.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("resent"), SequenceID: &seq}); err != nil {
			t.Fatal(err)
		}
	}
	next := int64(12)
	if _, err := p2.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m-00012"), SequenceID: &next}); err != nil {
		t.Fatal(err)
	}
	p2.Close()
	if n := b2.loadedTopic(mustTopicName(t, "snap")).ml.Entries(); n > 13 {
		t.Fatalf("%d entries stored; resends must not be", n)
	}
	cons, err := c2.Subscribe(pulsar.ConsumerOptions{Topic: "snap", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	expectOrdered(t, receive(t, cons, 13, true), 13)
	if more := receiveFor(t, cons, 0); len(more) != 0 {
		t.Fatalf("a resend was stored: %q", more[0].Payload())
	}
	cons.Close()
	b2.UnloadAll(ctx)

	b3, _ := startDedupBroker(t, ledgers, false)
	if _, err := b3.getTopic(ctx, mustTopicName(t, "snap")); err != nil {
		t.Fatal(err)
	}
	for _, c := range b3.loadedTopic(mustTopicName(t, "snap")).ml.Cursors() {
		if c.Name() == dedupCursor {
			t.Fatal("a broker with deduplication off kept the deduplication cursor (it would pin ledgers)")
		}
	}
}

// A namespace's deduplicationEnabled policy wins over the broker's
// brokerDeduplicationEnabled, both ways, as on Pulsar; a namespace without
// the policy takes the broker's. Found by the fault suite (tools/chaos,
// rolling-restart seed 1): a namespace set to deduplicate stored a
// producer's resend after a broker restart, because only the broker
// setting was read.
func TestDeduplicationNamespacePolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := metadata.NewMemoryServer().NewSession()
	res, err := resources.New(ctx, store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	if err := res.CreateCluster(ctx, "test", resources.ClusterData{ServiceURL: "http://localhost:1"}); err != nil {
		t.Fatal(err)
	}
	if err := res.CreateTenant(ctx, "t", resources.TenantInfo{AllowedClusters: []string{"test"}}); err != nil {
		t.Fatal(err)
	}
	for ns, dedup := range map[string]*bool{"on": ptr(true), "off": ptr(false), "unset": nil} {
		p := resources.NewPolicies()
		p.DeduplicationEnabled = dedup
		if _, err := res.CreateNamespace(ctx, "t", ns, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, brokerDefault := range []bool{false, true} {
		b := New(Config{ClusterName: "test", Metadata: store, Resources: res, BrokerDeduplicationEnabled: brokerDefault,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, managedledger.NewMemoryFactory(managedledger.MemoryOptions{}))
		client := newClient(t, serveTestBroker(t, b))
		for ns, want := range map[string]bool{"on": true, "off": false, "unset": brokerDefault} {
			topic := fmt.Sprintf("persistent://t/%s/d-%v", ns, brokerDefault)
			p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "w", DisableBatching: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, seq := range []int64{0, 1, 1, 2} { // the second 1 is a resend
				if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m"), SequenceID: &seq}); err != nil {
					t.Fatal(err)
				}
			}
			p.Close()
			stored := b.loadedTopic(mustTopicName(t, topic)).ml.Entries()
			if got := stored == 3; got != want {
				t.Errorf("broker default %v, namespace %s: %d entries stored for 4 sends with one resend; deduplication want %v",
					brokerDefault, ns, stored, want)
			}
		}
		b.Close(ctx)
	}
}

// A resend that races its still-pending original is neither stored nor
// acknowledged as a duplicate: the original may yet fail, and then the
// resend must be stored. Found by the fault suite (tools/chaos, disk-full
// seed 1): with the bookies full, an add of sequence 54 was pending in a
// rollover when the client resent 54; the broker answered -1:-1 (a
// duplicate), the original then failed, and 54 was acknowledged but
// never stored.
func TestDeduplicationResendOfPendingSend(t *testing.T) {
	d := newDedup(1000, 0)
	ctx := context.Background()
	if got := d.admit("p", 53, 0); got != admitNew {
		t.Fatalf("first send: %v", got)
	}
	if err := d.stored(ctx, "p", 53, 0, managedledger.Position{}); err != nil {
		t.Fatal(err)
	}
	if got := d.admit("p", 54, 0); got != admitNew {
		t.Fatalf("54: %v", got)
	}
	// 54 is pending; the client resends it.
	if got := d.admit("p", 54, 0); got != admitUnknown {
		t.Fatalf("a resend of pending 54: %v, want admitUnknown (refused, retried later)", got)
	}
	if got := d.admit("p", 53, 0); got != admitDuplicate {
		t.Fatalf("a resend of stored 53: %v, want admitDuplicate", got)
	}
	// The original fails; the next resend is stored.
	d.failed("p")
	if got := d.admit("p", 54, 0); got != admitNew {
		t.Fatalf("a resend after the original failed: %v, want admitNew", got)
	}
	if err := d.stored(ctx, "p", 54, 0, managedledger.Position{}); err != nil {
		t.Fatal(err)
	}
	if got := d.admit("p", 54, 0); got != admitDuplicate {
		t.Fatalf("a resend after 54 was stored: %v, want admitDuplicate", got)
	}
	// Nothing stored yet for a producer: a racing resend is unknown too.
	if d.admit("q", 0, 0) != admitNew || d.admit("q", 0, 0) != admitUnknown {
		t.Fatal("a resend racing a producer's first send must be refused, not acknowledged")
	}
}

// TestDeduplicationSnapshotByTime: besides every interval entries, a
// snapshot is taken at the first entry stored once the snapshot interval
// has passed (deduplicationSnapshotInterval), so a slow topic does not
// replay up to interval entries at its next load.
func TestDeduplicationSnapshotByTime(t *testing.T) {
	ctx := context.Background()
	ml, err := managedledger.NewMemoryFactory(managedledger.MemoryOptions{}).Open(ctx, "t/ns/persistent/snap")
	if err != nil {
		t.Fatal(err)
	}
	d := newDedup(1000, time.Minute)
	if err := d.rebuild(ctx, ml); err != nil {
		t.Fatal(err)
	}
	store := func(seq int64) {
		t.Helper()
		type added struct {
			pos managedledger.Position
			err error
		}
		ch := make(chan added, 1)
		ml.AddEntry([]byte("m"), func(p managedledger.Position, err error) { ch <- added{p, err} })
		a := <-ch
		if a.err != nil {
			t.Fatal(a.err)
		}
		pos := a.pos
		d.admit("p", seq, 0)
		if err := d.stored(ctx, "p", seq, 0, pos); err != nil {
			t.Fatal(err)
		}
	}
	store(1)
	store(2)
	if got := d.cursor.Properties()["p"]; got != 0 {
		t.Fatalf("snapshot of %d within the interval and below the entry count", got)
	}
	d.mu.Lock()
	d.last = time.Now().Add(-time.Minute) // the interval has passed
	d.mu.Unlock()
	store(3)
	if got := d.cursor.Properties()["p"]; got != 3 {
		t.Fatalf("snapshot after the interval: %d, want 3", got)
	}
	store(4)
	if got := d.cursor.Properties()["p"]; got != 3 {
		t.Fatalf("a snapshot right after the last one: %d", got)
	}
}
