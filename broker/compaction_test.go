package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsaradmin "github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
)

// keyed is one message a compaction test sends.
type keyed struct{ key, value string }

func sendKeyed(t *testing.T, c pulsar.Client, topic string, batching bool, msgs []keyed) []pulsar.MessageID {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching,
		BatchingMaxPublishDelay: 50 * time.Millisecond, BatchingMaxMessages: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids := make([]pulsar.MessageID, len(msgs))
	errs := make(chan error, len(msgs))
	for i, m := range msgs {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Key: m.key, Payload: []byte(m.value)},
			func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				ids[i] = id
				errs <- err
			})
	}
	for range msgs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// readAll reads a topic from the earliest message until nothing is left.
func readAll(t *testing.T, c pulsar.Client, topic string, compacted bool) []pulsar.Message {
	t.Helper()
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: compacted})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []pulsar.Message
	for r.HasNext() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := r.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %d messages: %v", len(out), err)
		}
		out = append(out, m)
	}
	return out
}

// latestByKey is what a compacted read must give: each key's last value,
// keys whose last message is empty gone, unkeyed messages all kept.
func latestByKey(msgs []keyed) (keyedLast map[string]string, unkeyed []string) {
	keyedLast = map[string]string{}
	for _, m := range msgs {
		switch {
		case m.key == "":
			unkeyed = append(unkeyed, m.value)
		case m.value == "":
			delete(keyedLast, m.key)
		default:
			keyedLast[m.key] = m.value
		}
	}
	return keyedLast, unkeyed
}

// checkCompactedRead checks a compacted read of what was sent, of which
// the last raw messages came after the compaction horizon: those come as
// they were sent; before them, each key's last value once (tombstoned
// keys gone), unkeyed messages all, in id order.
func checkCompactedRead(t *testing.T, got []pulsar.Message, sent []keyed, raw int) {
	t.Helper()
	var tail []keyed // what the Go client delivers: not empty messages
	for _, m := range sent[len(sent)-raw:] {
		if m.value != "" {
			tail = append(tail, m)
		}
	}
	if len(got) < len(tail) {
		t.Fatalf("compacted read: %d messages, fewer than the %d sent after the horizon", len(got), len(tail))
	}
	for i, m := range got[len(got)-len(tail):] {
		if want := tail[i]; m.Key() != want.key || string(m.Payload()) != want.value {
			t.Fatalf("message %d after the horizon: %s=%q, want %s=%q", i, m.Key(), m.Payload(), want.key, want.value)
		}
	}
	got, sent = got[:len(got)-len(tail)], sent[:len(sent)-raw]
	wantKeyed, wantUnkeyed := latestByKey(sent)
	gotKeyed := map[string]string{}
	var gotUnkeyed []string
	for _, m := range got {
		switch {
		case m.Key() == "":
			gotUnkeyed = append(gotUnkeyed, string(m.Payload()))
		case len(m.Payload()) == 0:
			// A compacted-out placeholder of a batch (this client delivers
			// them; Java's skips them): it must not hide a later value.
		default:
			if v, dup := gotKeyed[m.Key()]; dup {
				t.Fatalf("key %s read twice (%s, then %s)", m.Key(), v, m.Payload())
			}
			gotKeyed[m.Key()] = string(m.Payload())
		}
	}
	if fmt.Sprint(gotKeyed) != fmt.Sprint(wantKeyed) {
		t.Fatalf("compacted read: keyed %v, want %v", gotKeyed, wantKeyed)
	}
	sort.Strings(gotUnkeyed)
	sort.Strings(wantUnkeyed)
	if fmt.Sprint(gotUnkeyed) != fmt.Sprint(wantUnkeyed) {
		t.Fatalf("compacted read: unkeyed %v, want %v", gotUnkeyed, wantUnkeyed)
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID().LedgerID() < got[i-1].ID().LedgerID() ||
			(got[i].ID().LedgerID() == got[i-1].ID().LedgerID() && got[i].ID().EntryID() < got[i-1].ID().EntryID()) {
			t.Fatalf("message %d (%v) before message %d (%v)", i, got[i].ID(), i-1, got[i-1].ID())
		}
	}
}

func compactAndWait(t *testing.T, a pulsaradmin.Client, tn utils.TopicName) {
	t.Helper()
	if err := a.Topics().Compact(tn); err != nil {
		t.Fatal(err)
	}
	waitCompaction(t, a, tn)
}

func waitCompaction(t *testing.T, a pulsaradmin.Client, tn utils.TopicName) {
	t.Helper()
	eventually(t, "compaction finished", func() error {
		st, err := a.Topics().CompactStatus(tn)
		if err != nil {
			return err
		}
		switch st.Status {
		case utils.SUCCESS:
			return nil
		case utils.ERROR:
			t.Fatalf("compaction failed: %s", st.LastError)
		}
		return fmt.Errorf("status %s", st.Status)
	})
}

func rounds(keys, n int, extra ...keyed) []keyed {
	var out []keyed
	for r := range n {
		for k := range keys {
			out = append(out, keyed{fmt.Sprintf("k%d", k), fmt.Sprintf("k%d-r%d", k, r)})
		}
	}
	return append(out, extra...)
}

// TestCompactionKeepsEachKeysLastMessage: after a compaction a compacted
// reader gets each key's last value (tombstoned keys gone, unkeyed
// messages kept) in id order, then what was added since; a plain reader
// still gets everything; a second compaction reads only what is new and
// replaces the compacted ledger.
func TestCompactionKeepsEachKeysLastMessage(t *testing.T) {
	b, url := startPolicyBroker(t, func(*resources.Policies) {})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	topic := "persistent://t/ns/compact-plain"
	tn := topicName(t, topic)
	sent := rounds(10, 4, keyed{"", "loose-1"}, keyed{"k3", ""}, keyed{"", "loose-2"})
	sendKeyed(t, c, topic, false, sent)
	if st, err := a.Topics().CompactStatus(tn); err != nil || st.Status != utils.NOTRUN {
		t.Fatalf("before any compaction: %+v %v, want NOT_RUN", st, err)
	}
	compactAndWait(t, a, tn)
	checkCompactedRead(t, readAll(t, c, topic, true), sent, 0)
	// The Go client does not deliver messages with an empty payload.
	nonEmpty := 0
	for _, m := range sent {
		if m.value != "" {
			nonEmpty++
		}
	}
	if all := readAll(t, c, topic, false); len(all) != nonEmpty {
		for i, m := range all {
			t.Logf("%d %v %s=%q", i, m.ID(), m.Key(), m.Payload())
		}
		t.Fatalf("a plain reader read %d messages, want all %d", len(all), nonEmpty)
	}
	first := compactedLedgerOf(t, b, topic)
	internal, err := a.Topics().GetInternalStats(tn)
	if err != nil || internal.CompactedLedger.LedgerID != first || internal.CompactedLedger.Entries != 11 {
		// 9 keys left (k3 tombstoned) and 2 unkeyed messages, one entry each
		t.Fatalf("internal stats' compacted ledger %+v %v, want ledger %d with 11 entries", internal.CompactedLedger, err, first)
	}
	// 43 messages: 40 keyed (4 rounds of 10 keys), a tombstone of k3 and
	// 2 unkeyed; 11 kept, so 32 left out (k3's 4 values and its tombstone
	// among them).
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(b))
	labels := `cluster="test",namespace="t/ns",topic="` + topic + `"`
	want := `
# HELP pulsar_compaction_compacted_entries_count Entries of the topic's compacted ledger.
# TYPE pulsar_compaction_compacted_entries_count gauge
pulsar_compaction_compacted_entries_count{` + labels + `} 11
# HELP pulsar_compaction_removed_event_count Messages compactions of the topic left out (superseded or deleted keys).
# TYPE pulsar_compaction_removed_event_count counter
pulsar_compaction_removed_event_count{` + labels + `} 32
# HELP pulsar_compaction_succeed_count Compactions of the topic that succeeded.
# TYPE pulsar_compaction_succeed_count counter
pulsar_compaction_succeed_count{` + labels + `} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pulsar_compaction_compacted_entries_count",
		"pulsar_compaction_removed_event_count", "pulsar_compaction_succeed_count"); err != nil {
		t.Fatal(err)
	}

	// (A last message of an empty payload would never come: the Go
	// client drops those, and a reader waits for the last id.)
	more := []keyed{{"k0", "k0-late"}, {"k3", "k3-back"}, {"k9", ""}, {"k5", "k5-late"}}
	sendKeyed(t, c, topic, false, more)
	sent = append(sent, more...)
	checkCompactedRead(t, readAll(t, c, topic, true), sent, len(more)) // compacted part, then the new entries
	compactAndWait(t, a, tn)
	checkCompactedRead(t, readAll(t, c, topic, true), sent, 0)
	if second := compactedLedgerOf(t, b, topic); second == first {
		t.Fatalf("the second compaction kept compacted ledger %d", first)
	}
	side := b.ledgers.(managedledger.SideLedgers)
	if _, err := side.OpenSideLedger(context.Background(), first); err == nil {
		t.Fatalf("the first compacted ledger %d is still there after the second compaction", first)
	}
}

func compactedLedgerOf(t *testing.T, b *Broker, topic string) int64 {
	t.Helper()
	tp, err := b.existingAdminTopic(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tp.compactedView(context.Background())
	if err != nil || v == nil {
		t.Fatalf("compacted view: %v %v", v, err)
	}
	return v.ledgerID
}

// TestCompactionOfBatches: a batch that lost some messages is written
// again with compacted_out placeholders, so every kept message keeps its
// id (ledger, entry and batch index) and value.
func TestCompactionOfBatches(t *testing.T) {
	b, url := startPolicyBroker(t, func(*resources.Policies) {})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	topic := "persistent://t/ns/compact-batches"
	sent := []keyed{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"c", "c1"}, {"b", ""}, {"", "loose"}}
	ids := sendKeyed(t, c, topic, true, sent)
	compactAndWait(t, a, topicName(t, topic))
	got := readAll(t, c, topic, true)
	checkCompactedRead(t, got, sent, 0)
	for _, m := range got {
		if len(m.Payload()) == 0 {
			continue
		}
		var want pulsar.MessageID
		for i, s := range sent {
			if s.key == m.Key() && s.value == string(m.Payload()) {
				want = ids[i]
			}
		}
		if want == nil || want.LedgerID() != m.ID().LedgerID() || want.EntryID() != m.ID().EntryID() || want.BatchIdx() != m.ID().BatchIdx() {
			t.Fatalf("message %s=%s has id %v, the producer was given %v", m.Key(), m.Payload(), m.ID(), want)
		}
	}
}

// TestCompactedReadAfterTrim: once the compaction horizon lets the topic's
// ledgers go, a new compacted reader and a new durable compacted
// subscription at the earliest message still get every key's last value
// (from the compacted ledger, whose positions are before the first stored
// entry); a plain reader gets only what is still stored.
func TestCompactedReadAfterTrim(t *testing.T) {
	// A compaction threshold (never reached) keeps what is sent before
	// the first compaction: with no subscription and no retention, a
	// topic without one may trim its full ledgers before the compaction
	// reads them, as Pulsar's does.
	b, url := startPolicyBrokerWith(t, func(p *resources.Policies) {
		never := int64(1) << 40
		p.CompactionThreshold = &never
	}, 10, Config{})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	topic := "persistent://t/ns/compact-trimmed"
	sent := rounds(5, 10)
	sendKeyed(t, c, topic, false, sent)
	b.applyRetention(context.Background()) // a retention check: it trims what no cursor holds, in the background
	compactAndWait(t, a, topicName(t, topic))
	// Trimming runs when acknowledgements or retention checks let it:
	// more entries roll ledgers over.
	tail := rounds(2, 15)
	for i := range tail {
		tail[i].value = "tail-" + tail[i].value
	}
	sendKeyed(t, c, topic, false, tail)
	eventually(t, "ledgers before the horizon trimmed", func() error {
		if n := len(readAll(t, c, topic, false)); n >= len(sent)+len(tail) {
			return fmt.Errorf("a plain reader still reads %d messages", n)
		}
		return nil
	})
	all := append(append([]keyed(nil), sent...), tail...)
	read := readAll(t, c, topic, true)
	if len(read) <= len(tail) {
		logCompactedState(t, b, topic, read)
	}
	checkCompactedRead(t, read, all, len(tail))

	// A durable compacted subscription, in two sessions: the progress
	// acknowledged in the first (positions of ledgers no longer stored)
	// is where the second starts.
	subscribe := func() pulsar.Consumer {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "durable-compacted", Type: pulsar.Exclusive,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReadCompacted: true})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	wantKeyed, _ := latestByKey(all)
	got := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	consume := func(cons pulsar.Consumer, n int) {
		for range n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("durable compacted subscription: after %v: %v", got, err)
			}
			if v, ok := got[m.Key()]; ok && !strings.HasPrefix(string(m.Payload()), "tail-") {
				t.Fatalf("key %s came again (%s, then %s) after its cumulative ack", m.Key(), v, m.Payload())
			}
			got[m.Key()] = string(m.Payload())
			if err := cons.AckCumulative(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := subscribe()
	consume(first, 3)
	first.Close()
	second := subscribe()
	defer second.Close()
	consume(second, 2+len(tail)) // the other compacted keys, then the tail as sent
	if fmt.Sprint(got) != fmt.Sprint(wantKeyed) {
		t.Fatalf("durable compacted subscription read %v, want %v", got, wantKeyed)
	}
}

// TestReadCompactedRefusedOnShared: as Pulsar, only exclusive and
// failover subscriptions may read compacted.
func TestReadCompactedRefusedOnShared(t *testing.T) {
	_, url := startPolicyBroker(t, func(*resources.Policies) {})
	c := newClient(t, url)
	_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "persistent://t/ns/compact-shared", SubscriptionName: "s",
		Type: pulsar.Shared, ReadCompacted: true})
	if err == nil || !strings.Contains(err.Error(), "exclusive or failover") {
		t.Fatalf("a shared compacted subscription: %v, want refused", err)
	}
}

// TestCompactionThresholdStartsCompaction: the namespace's
// compactionThreshold makes the monitor compact a topic on its own; a
// topic policy of 0 turns it off for one topic.
func TestCompactionThresholdStartsCompaction(t *testing.T) {
	b, url := startPolicyBrokerWith(t, func(p *resources.Policies) {
		one := int64(1)
		p.CompactionThreshold = &one
	}, 0, Config{CompactionMonitorInterval: 50 * time.Millisecond})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	off := topicName(t, "persistent://t/ns/compact-off")
	if err := a.Topics().SetCompactionThreshold(off, 0); err != nil {
		t.Fatal(err)
	}
	sendKeyed(t, c, "persistent://t/ns/compact-auto", false, rounds(3, 3))
	sendKeyed(t, c, off.String(), false, rounds(3, 3))
	waitCompaction(t, a, topicName(t, "persistent://t/ns/compact-auto"))
	time.Sleep(200 * time.Millisecond) // several monitor checks
	if st, err := a.Topics().CompactStatus(off); err != nil || st.Status != utils.NOTRUN {
		t.Fatalf("a topic whose threshold policy is 0: %+v %v, want NOT_RUN", st, err)
	}
}

// TestCompactionOfPartitionedTopic: compacting a partitioned topic
// compacts each partition, as Pulsar does; compacted readers of the
// partitions get each key's last value once.
func TestCompactionOfPartitionedTopic(t *testing.T) {
	b, url := startPolicyBroker(t, func(*resources.Policies) {})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	topic := "persistent://t/ns/compact-partitioned"
	tn := topicName(t, topic)
	if err := a.Topics().Create(tn, 2); err != nil {
		t.Fatal(err)
	}
	sent := rounds(6, 3)
	sendKeyed(t, c, topic, false, sent)
	if err := a.Topics().Compact(tn); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		waitCompaction(t, a, topicName(t, fmt.Sprintf("%s-partition-%d", topic, i)))
	}
	want, _ := latestByKey(sent)
	got := map[string]string{}
	// Partition by partition: the Go client's reader of a partitioned
	// topic races with itself in HasNext (v0.19).
	for i := range 2 {
		for _, m := range readAll(t, c, fmt.Sprintf("%s-partition-%d", topic, i), true) {
			if _, dup := got[m.Key()]; dup {
				t.Fatalf("key %s read twice from the compacted partitions", m.Key())
			}
			got[m.Key()] = string(m.Payload())
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("compacted read of the partitions: %v, want %v", got, want)
	}
}

// hookCursor runs before once, on the first IsAcknowledged call.
type hookCursor struct {
	managedledger.Cursor
	once   sync.Once
	before func()
}

func (h *hookCursor) IsAcknowledged(pos managedledger.Position) bool {
	h.once.Do(h.before)
	return h.Cursor.IsAcknowledged(pos)
}

// TestCompactedReadRacingTrim: the ledgers holding the compacted entries
// are trimmed while a compacted read is under way (after it looked up the
// first stored entry, before it asked the cursor about an entry). The
// cursor counts trimmed positions acknowledged; the read must still give
// every key, as no progress of this reader covers them. CI saw the race
// as TestCompactedReadAfterTrim missing its first keys.
func TestCompactedReadRacingTrim(t *testing.T) {
	// In-memory ledgers of exactly 10 entries, whatever the storage pass:
	// the race is the broker's, and it needs the horizon's ledger to end at
	// the horizon, which a bookie-backed ledger's rollover timing decides.
	ledgers := managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: 10})
	b, url := startPolicyBrokerOn(t, func(*resources.Policies) {}, ledgers, Config{})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	topic := "persistent://t/ns/compact-racing-trim"
	tn := topicName(t, topic)
	// A subscription at the start holds every ledger until the race is
	// set up; the hook deletes it.
	hold, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "hold",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	hold.Close()
	sent := rounds(5, 10)
	sendKeyed(t, c, topic, false, sent)
	compactAndWait(t, a, tn)
	name, err := ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	tp := b.loadedTopic(name)
	if tp == nil {
		t.Fatal("topic not loaded")
	}
	v, err := tp.compactedView(context.Background())
	if err != nil || v == nil {
		t.Fatalf("compacted view %v, %v", v, err)
	}
	if tp.beforeFirstStored(v.horizon) {
		t.Fatalf("horizon %v already trimmed: the race needs it stored when the read starts", v.horizon)
	}
	start := managedledger.Position{LedgerID: -1, EntryID: -1}
	cur, err := tp.ml.NewNonDurableCursor(start)
	if err != nil {
		t.Fatal(err)
	}
	trim := func() {
		tail := rounds(2, 15)
		for i := range tail {
			tail[i].value = "tail-" + tail[i].value
		}
		sendKeyed(t, c, topic, false, tail) // the horizon's ledger is closed, if it was not
		if err := a.Subscriptions().Delete(tn, "hold"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the compacted entries' ledgers trimmed", func() error {
			if !tp.beforeFirstStored(v.horizon) {
				var md []string
				for _, x := range tp.ml.Cursors() {
					md = append(md, x.Name()+"@"+x.MarkDeletePosition().String())
				}
				first, _ := tp.firstStored()
				return fmt.Errorf("first stored %v, horizon %v (last %v, %d stored, cursors %v)", first, v.horizon, tp.ml.LastConfirmed(), tp.ml.Entries(), md)
			}
			return nil
		})
	}
	cc, err := tp.readCompactedCursor(context.Background(), &hookCursor{Cursor: cur, before: trim}, &start)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := cc.ReadEntries(context.Background(), 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		var got []string
		for _, e := range entries {
			got = append(got, e.Position.String())
		}
		t.Fatalf("compacted read racing a trim gave %d entries %v, want the 5 keys' last values", len(entries), got)
	}
}

// logCompactedState says what a compacted read that gave nothing before
// the horizon saw: the ids read, the compacted view, the first stored
// entry and the cursors.
func logCompactedState(t *testing.T, b *Broker, topic string, got []pulsar.Message) {
	t.Helper()
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID().String())
	}
	t.Logf("compacted read gave %d messages: %v", len(got), ids)
	name, err := ParseTopicName(topic)
	if err != nil {
		return
	}
	tp := b.loadedTopic(name)
	if tp == nil {
		t.Logf("topic not loaded")
		return
	}
	v, err := tp.compactedView(context.Background())
	if v != nil {
		t.Logf("compacted view: ledger %d, horizon %v, last %d (err %v)", v.ledgerID, v.horizon, v.last, err)
	} else {
		t.Logf("no compacted view (err %v)", err)
	}
	first, ok := tp.firstStored()
	t.Logf("first stored %v (%v), last %v, %d stored", first, ok, tp.ml.LastConfirmed(), tp.ml.Entries())
	for _, x := range tp.ml.Cursors() {
		t.Logf("cursor %s: mark-delete %v, read %v, properties %v", x.Name(), x.MarkDeletePosition(), x.ReadPosition(), x.Properties())
	}
}

// closedReaderML is a managed ledger that refuses new readers (closed or
// fenced under a compacted read).
type closedReaderML struct{ managedledger.ManagedLedger }

func (closedReaderML) NewNonDurableCursor(managedledger.Position) (managedledger.Cursor, error) {
	return nil, managedledger.ErrClosed
}

// trimmedCursor counts every position acknowledged, as a cursor does for
// positions in trimmed ledgers, and has no compacted progress stored.
type trimmedCursor struct{ managedledger.Cursor }

func (trimmedCursor) IsAcknowledged(managedledger.Position) bool { return true }
func (trimmedCursor) Properties() map[string]int64               { return nil }

// When the first stored entry cannot be looked up (the managed ledger
// refuses a reader), a compacted entry counts as not acknowledged: it is
// delivered (at least once), never skipped. The lookup used to answer
// position 0:0, before which no entry is, so every compacted entry
// counted as acknowledged and a compacted read skipped them all.
func TestCompactedAckWhenFirstStoredUnknown(t *testing.T) {
	tp := &topic{ml: closedReaderML{}}
	c := &compactedCursor{Cursor: trimmedCursor{}, t: tp, idxOf: -1}
	for _, pos := range []managedledger.Position{{LedgerID: 3, EntryID: 0}, {LedgerID: 12, EntryID: 7}} {
		if c.acknowledged(pos) {
			t.Fatalf("compacted entry %v counted acknowledged with the first stored entry unknown", pos)
		}
	}
}

// flakySideReader serves a compacted ledger and fails once, the first
// time entry failAt is read right after the entry before it (a bookie
// timing out in the middle of a compacted read).
type flakySideReader struct {
	entries [][]byte
	failAt  int64
	prev    int64
	failed  bool
}

func (r *flakySideReader) LastEntryID() int64 { return int64(len(r.entries)) - 1 }

func (r *flakySideReader) Read(_ context.Context, first, last int64) ([][]byte, error) {
	if first == r.failAt && r.prev == r.failAt-1 && !r.failed {
		r.failed = true
		return nil, errors.New("injected: bookie read timed out")
	}
	r.prev = last
	return r.entries[first : last+1], nil
}

// atCursor is a trimmedCursor that reads nothing of its own.
type atCursor struct{ trimmedCursor }

func (atCursor) ReadPosition() managedledger.Position {
	return managedledger.Position{LedgerID: 9, EntryID: 0}
}
func (atCursor) Seek(managedledger.Position) {}

// A compacted read that fails part-way hands out what it read before the
// failure; the failed entry is read again next time. It used to return
// the entries with the error, which the subscription drops, while its
// position had moved past them: they were never delivered.
func TestCompactedReadFailingMidwayLosesNothing(t *testing.T) {
	var entries [][]byte
	for i := range 5 {
		entries = append(entries, encodeCompacted(managedledger.Entry{
			Position: managedledger.Position{LedgerID: 3, EntryID: int64(i * 2)}, Data: []byte{byte(i)}}))
	}
	tp := &topic{ml: closedReaderML{}}
	tp.compaction.view = &compactedView{ledgerID: 7, horizon: managedledger.Position{LedgerID: 3, EntryID: 9},
		reader: &flakySideReader{entries: entries, failAt: 2, prev: -1}, last: 4}
	tp.compaction.loaded = true
	c := &compactedCursor{Cursor: atCursor{}, t: tp, idxOf: -1, next: &managedledger.Position{LedgerID: -1, EntryID: 0}}
	var got []string
	for range 10 {
		out, done, err := c.readCompacted(context.Background(), 100, 1<<20)
		if err != nil {
			continue // as the subscription: the read's entries are dropped, the read retried
		}
		for _, e := range out {
			got = append(got, e.Position.String())
		}
		if !done {
			break
		}
	}
	if want := "[3:0 3:2 3:4 3:6 3:8]"; fmt.Sprint(got) != want {
		t.Fatalf("compacted read with one failed entry read delivered %v, want %s", got, want)
	}
}

// TestCompactionCursorCreatedWithThreshold: a topic whose compaction
// threshold is set gets the compaction cursor as it loads, before any
// publish, so what it is sent stays until a compaction has read it (with
// no subscription and no retention the topic would otherwise let its
// full ledgers go before the first compaction, which then compacts
// nothing: Pulsar's #11672). A threshold set later creates the cursor at
// the next retention check.
func TestCompactionCursorCreatedWithThreshold(t *testing.T) {
	b, url := startPolicyBrokerWith(t, func(p *resources.Policies) {
		never := int64(1) << 40 // the monitor never starts one by itself
		p.CompactionThreshold = &never
	}, 10, Config{})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	topic := "persistent://t/ns/compact-precreated"
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if !hasCursor(t, b, topic, compactionCursor) {
		t.Fatal("no compaction cursor after the topic loaded with a compaction threshold")
	}
	sent := rounds(5, 10)
	sendKeyed(t, c, topic, false, sent)
	b.applyRetention(context.Background()) // a retention check: it trims what no cursor holds, in the background
	compactAndWait(t, a, topicName(t, topic))
	checkCompactedRead(t, readAll(t, c, topic, true), sent, 0)

	// A threshold set on a topic already loaded without one.
	later := "persistent://t/ns/compact-later"
	if err := a.Topics().SetCompactionThreshold(topicName(t, later), 0); err != nil {
		t.Fatal(err)
	}
	sendKeyed(t, c, later, false, rounds(1, 1))
	b.applyRetention(context.Background())
	if hasCursor(t, b, later, compactionCursor) {
		t.Fatal("a compaction cursor on a topic whose threshold is 0")
	}
	if err := a.Topics().SetCompactionThreshold(topicName(t, later), 1<<40); err != nil {
		t.Fatal(err)
	}
	eventually(t, "compaction cursor created once the threshold is set", func() error {
		b.applyRetention(context.Background())
		if !hasCursor(t, b, later, compactionCursor) {
			return errors.New("no compaction cursor yet")
		}
		return nil
	})
}

func hasCursor(t *testing.T, b *Broker, topic, name string) bool {
	t.Helper()
	tp, err := b.existingAdminTopic(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tp.ml.Cursors() {
		if c.Name() == name {
			return true
		}
	}
	return false
}
