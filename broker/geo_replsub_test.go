package broker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/markers"
)

// loadedTopic is the cluster's loaded topic named name (nil if none).
func (c *geoCluster) loadedTopic(name string) *topic {
	for _, t := range c.broker().loadedTopics() {
		if t.name.String() == name {
			return t
		}
	}
	return nil
}

// cursorOf is the cluster's cursor of the topic named sub, if any.
func (c *geoCluster) cursorOf(topicName, sub string) managedledger.Cursor {
	t := c.loadedTopic(topicName)
	if t == nil {
		return nil
	}
	for _, cur := range t.ml.Cursors() {
		if cur.Name() == sub {
			return cur
		}
	}
	return nil
}

// waitSnapshotCovering waits until a snapshot that started after the
// topic's last stored message has completed in the cluster.
func (c *geoCluster) waitSnapshotCovering(t *testing.T, topicName string) {
	t.Helper()
	eventually(t, "a snapshot after the last message", func() error {
		tp := c.loadedTopic(topicName)
		if tp == nil {
			return fmt.Errorf("topic not loaded")
		}
		tp.rsubs.mu.Lock()
		defer tp.rsubs.mu.Unlock()
		if data := tp.rsubs.lastDataNs.Load(); tp.rsubs.lastCompletedStartNs <= data {
			return fmt.Errorf("last snapshot started at %d, last data at %d", tp.rsubs.lastCompletedStartNs, data)
		}
		return nil
	})
}

// waitUpdatesApplied waits until every subscription update written in
// from has been applied in to: both replicators between them have nothing
// left to read (an update is applied as to's replicator back to from reads
// it) and sub's position in both clusters held still over three checks
// 50 ms apart (the update for the last acknowledgement may be written a
// moment after it).
func waitUpdatesApplied(t *testing.T, from, to *geoCluster, topicName, sub string) {
	t.Helper()
	state := func() (string, error) {
		out := ""
		for _, c := range []struct {
			in     *geoCluster
			remote string
		}{{from, to.name}, {to, from.name}} {
			repl := c.in.cursorOf(topicName, "pulsar.repl."+c.remote)
			if repl == nil {
				return "", fmt.Errorf("%s: no replicator to %s", c.in.name, c.remote)
			}
			if n := repl.Backlog(); n > 0 {
				return "", fmt.Errorf("%s: replicator to %s has %d entries to read", c.in.name, c.remote, n)
			}
			cur := c.in.cursorOf(topicName, sub)
			if cur == nil {
				return "", fmt.Errorf("%s: no subscription %s", c.in.name, sub)
			}
			out += fmt.Sprint(cur.MarkDeletePosition())
		}
		return out, nil
	}
	last, still := "", 0
	eventually(t, "subscription updates applied in "+to.name, func() error {
		cur, err := state()
		if err != nil {
			still = 0
			return err
		}
		if cur == last {
			still++
		} else {
			last, still = cur, 0
		}
		if still < 3 {
			time.Sleep(30 * time.Millisecond) // with eventually's 20 ms: checks 50 ms apart
			return fmt.Errorf("positions %s held for %d checks", cur, still)
		}
		return nil
	})
}

// subscribeOnce creates a subscription (at the earliest entry) and closes
// its consumer without consuming.
func subscribeOnce(t *testing.T, url, topic, sub string, replicated bool) {
	t.Helper()
	cons, err := newClient(t, url).Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub,
		Type: pulsar.Shared, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReplicateSubscriptionState: replicated})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
}

// geoConsumeAndAck receives n messages on sub and acknowledges each, then
// closes the consumer; it returns their values.
func geoConsumeAndAck(t *testing.T, url, topic, sub string, replicated bool, n int) []string {
	t.Helper()
	cons, err := newClient(t, url).Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub,
		Type: pulsar.Shared, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReplicateSubscriptionState: replicated})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msg, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: received %d of %d: %v", sub, len(got), n, err)
		}
		got = append(got, string(msg.Payload()))
		if err := cons.Ack(msg); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// geoCollect subscribes and gathers every value until last has arrived,
// then a little longer to catch extras.
func geoCollect(t *testing.T, url, topic, sub string, replicated bool, last string) []string {
	t.Helper()
	return geoCollectOpts(t, url, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub,
		Type: pulsar.Shared, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReplicateSubscriptionState: replicated}, last)
}

func geoCollectOpts(t *testing.T, url string, opts pulsar.ConsumerOptions, last string) []string {
	t.Helper()
	cons, err := newClient(t, url).Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	seenLast := false
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		wait := 20 * time.Second
		if seenLast {
			wait = 500 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		msg, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			break
		}
		got = append(got, string(msg.Payload()))
		_ = cons.Ack(msg)
		if string(msg.Payload()) == last {
			seenLast = true
		}
	}
	if !seenLast {
		t.Fatalf("%s: %s never arrived (got %d)", opts.SubscriptionName, last, len(got))
	}
	return got
}

func geoIndex(v string) int {
	var i int
	fmt.Sscan(strings.TrimPrefix(v, "p#"), &i)
	return i
}

// Replicated subscriptions, active-active: a consumer group that acked
// the first half of 200 messages in a resumes in b near message 100, not
// at the start, and loses nothing. A subscription without the flag is
// not moved, and markers reach no consumer.
func TestGeoReplicatedSubscription(t *testing.T) {
	testReplicatedSubscriptionMove(t, []string{"a", "b"}, "b", true)
}

// The same in a full mesh of three (snapshots take two rounds), the group
// moving from a to c.
func TestGeoReplicatedSubscriptionMesh(t *testing.T) {
	testReplicatedSubscriptionMove(t, []string{"a", "b", "c"}, "c", true)
}

// A replicated subscription that does not exist in the other cluster is
// created there by the first update, at the mapped position (Pulsar
// creates it at the latest entry).
func TestGeoReplicatedSubscriptionCreatedByUpdate(t *testing.T) {
	testReplicatedSubscriptionMove(t, []string{"a", "b"}, "b", false)
}

func testReplicatedSubscriptionMove(t *testing.T, clusters []string, to string, existsInTarget bool) {
	cl := newGeoInstance(t, clusters...)
	geoNamespace(t, cl["a"].res, "rsub", clusters...)
	topic := "persistent://geo/rsub/t"
	// The plain subscription exists everywhere from the start; the
	// replicated one in a, and elsewhere if existsInTarget.
	for _, n := range clusters {
		if n == "a" || existsInTarget {
			subscribeOnce(t, cl[n].url(), topic, "group", true)
		}
		subscribeOnce(t, cl[n].url(), topic, "plain", false)
	}
	if cur := cl["a"].cursorOf(topic, "group"); cur == nil || cur.Properties()[replicatedSubProperty] != 1 {
		t.Fatalf("group's cursor not flagged replicated: %v", cur)
	}
	if cur := cl["a"].cursorOf(topic, "plain"); cur == nil || cur.Properties()[replicatedSubProperty] != 0 {
		t.Fatal("plain's cursor flagged replicated")
	}
	if st, err := cl["a"].broker().TopicStats(context.Background(), topic); err != nil ||
		!st.Subscriptions["group"].IsReplicated || st.Subscriptions["plain"].IsReplicated {
		t.Fatalf("isReplicated in stats: %+v %v", st.Subscriptions, err)
	}

	// 20 rounds of 10 messages in a, with a snapshot completed after each
	// (as one would be within the snapshot interval under steady traffic).
	prod, err := newClient(t, cl["a"].url()).CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "p",
		DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for round := range 20 {
		for i := round * 10; i < round*10+10; i++ {
			if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("p#%d", i))}); err != nil {
				t.Fatal(err)
			}
		}
		cl["a"].waitSnapshotCovering(t, topic)
	}

	startB := managedledger.Position{LedgerID: -1, EntryID: -1}
	if existsInTarget {
		startB = cl[to].cursorOf(topic, "group").MarkDeletePosition()
	}
	// Half consumed in a, on both subscriptions.
	for _, sub := range []string{"group", "plain"} {
		got := geoConsumeAndAck(t, cl["a"].url(), topic, sub, sub == "group", 100)
		for i, v := range got {
			if v != fmt.Sprintf("p#%d", i) {
				t.Fatalf("%s in a: message %d is %q", sub, i, v)
			}
		}
	}

	// The update reaches b: its group cursor moves off the start.
	// Snapshots, markers and the remote's update each run on their own
	// period: under a full CI run this took past 10 s once (12.3 s).
	eventuallyWithin(t, 30*time.Second, "group moved in "+to, func() error {
		cur := cl[to].cursorOf(topic, "group")
		if cur == nil || cur.MarkDeletePosition().Compare(startB) <= 0 {
			// The state of both sides, so that a failure says which step
			// (the update written in a, carried, or applied) did not happen.
			return fmt.Errorf("group in %s not moved; %s; %s", to, replSubState(cl["a"], topic), replSubState(cl[to], topic))
		}
		return nil
	})
	waitUpdatesApplied(t, cl["a"], cl[to], topic, "group") // any later update lands too

	// The group moved to b: the second half, at most one round again.
	got := geoCollect(t, cl[to].url(), topic, "group", true, "p#199")
	seen := map[int]int{}
	again := 0
	for _, v := range got {
		if !strings.HasPrefix(v, "p#") {
			t.Fatalf("group in %s got %q, which is no user message", to, v)
		}
		i := geoIndex(v)
		seen[i]++
		if i < 100 {
			again++
		}
	}
	for i := 100; i < 200; i++ {
		if seen[i] == 0 {
			t.Fatalf("group in %s: p#%d lost", to, i)
		}
	}
	// One snapshot per round and the consumer stopped at a round's end:
	// the newest snapshot it passed is at most a round (10) behind.
	if again > 10 {
		t.Fatalf("group in %s: %d of the first 100 delivered again (more than one round); got %v", to, again, got)
	}
	t.Logf("group in %s: %d messages, %d of the first half again", to, len(got), again)

	// The plain subscription did not move: all 200, and only messages.
	plain := geoCollect(t, cl[to].url(), topic, "plain", false, "p#199")
	if len(plain) != 200 {
		t.Fatalf("plain in %s: %d messages, want 200", to, len(plain))
	}
	for i, v := range plain {
		if v != fmt.Sprintf("p#%d", i) {
			t.Fatalf("plain in %s: message %d is %q", to, i, v)
		}
	}
	// Markers are counted as no message, here or there.
	for _, n := range clusters {
		st, err := cl[n].broker().TopicStats(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if st.MsgInCounter != 200 {
			t.Errorf("cluster %s: msgInCounter %d, want 200", n, st.MsgInCounter)
		}
	}
	if slices.Contains(got, "") {
		t.Fatal("empty message delivered")
	}
}

// The replicated flag lives in the cursor: it outlives a broker restart,
// and a later SUBSCRIBE without the flag does not clear it.
func TestGeoReplicatedSubscriptionFlagSurvivesReload(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "rflag", "a", "b")
	topic := "persistent://geo/rflag/t"
	subscribeOnce(t, cl["a"].url(), topic, "group", true)
	cl["a"].stop()
	cl["a"].start(t)
	subscribeOnce(t, cl["a"].url(), topic, "group", false)
	tp := cl["a"].loadedTopic(topic)
	if tp == nil {
		t.Fatal("topic not loaded")
	}
	tp.mu.Lock()
	s := tp.subs["group"]
	tp.mu.Unlock()
	if s == nil || !s.replicated.Load() || s.cursor.Properties()[replicatedSubProperty] != 1 {
		t.Fatal("the subscription lost its replicated flag")
	}

	// The admin API turns it off and on again (Pulsar's
	// replicatedSubscriptionStatus).
	web := httptest.NewServer(cl["a"].broker().HTTPHandler())
	t.Cleanup(web.Close)
	post := func(sub, body string) int {
		resp, err := http.Post(web.URL+"/admin/v2/persistent/geo/rflag/t/subscription/"+sub+"/replicatedSubscriptionStatus",
			"application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	replicated := func() bool {
		st, err := cl["a"].broker().TopicStats(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		return st.Subscriptions["group"].IsReplicated
	}
	if code := post("group", "false"); code != http.StatusNoContent || replicated() || s.cursor.Properties()[replicatedSubProperty] != 0 {
		t.Fatalf("off: %d, replicated %v", code, replicated())
	}
	if code := post("group", "true"); code != http.StatusNoContent || !replicated() || s.cursor.Properties()[replicatedSubProperty] != 1 {
		t.Fatalf("on: %d, replicated %v", code, replicated())
	}
	if code := post("group", "maybe"); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
	if code := post("nosuch", "true"); code != http.StatusNotFound {
		t.Fatalf("unknown subscription: %d", code)
	}
}

// Past the cache limit, snapshots are thinned where they are closest
// together (the one whose neighbours are nearest goes); the oldest and
// newest stay.
func TestThinSnapshots(t *testing.T) {
	var snaps []markers.SnapshotData
	for _, e := range []uint64{10, 20, 22, 40, 50, 51, 80} {
		snaps = append(snaps, markers.SnapshotData{Local: markers.MessageID{LedgerID: 1, EntryID: e}})
	}
	snaps = append(snaps, markers.SnapshotData{Local: markers.MessageID{LedgerID: 2, EntryID: 0}})
	got := thinSnapshots(slices.Clone(snaps), 5)
	var at []uint64
	for _, s := range got {
		at = append(at, s.Local.LedgerID*1000+s.Local.EntryID)
	}
	if want := []uint64{1010, 1022, 1051, 1080, 2000}; !slices.Equal(at, want) {
		t.Fatalf("kept %v, want %v", at, want)
	}
	if got := thinSnapshots(slices.Clone(snaps), 1); len(got) != 2 {
		t.Fatalf("limit 1 kept %d, want the oldest and newest", len(got))
	}
}

// The test as users see it, with snapshots left to their timer:
// messages stream into a at about 200/s (batched by the client) while
// snapshots run every 50 ms; a Failover consumer acknowledges half in a
// and the group moves to b. It must not start from the beginning: with
// about 10 messages per snapshot interval and an in-process round trip
// of a few milliseconds, the newest snapshot passed is some 10 to 20
// messages behind; 50 leaves room for a slow (race-detector) run. And
// nothing after the mapped position is lost.
func TestGeoReplicatedSubscriptionContinuous(t *testing.T) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "rcont", "a", "b")
	topic := "persistent://geo/rcont/t"
	opts := func(url string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "group", Type: pulsar.Failover,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReplicateSubscriptionState: true}
	}
	for _, n := range []string{"a", "b"} {
		cons, err := newClient(t, cl[n].url()).Subscribe(opts(cl[n].url()))
		if err != nil {
			t.Fatal(err)
		}
		cons.Close()
	}
	prod, err := newClient(t, cl["a"].url()).CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "p",
		BatchingMaxMessages: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var wg sync.WaitGroup
	for i := range 200 {
		sendAsync(t, prod, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("p#%d", i))}, &wg)
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	cl["a"].waitSnapshotCovering(t, topic)

	startB := cl["b"].cursorOf(topic, "group").MarkDeletePosition()
	cons, err := newClient(t, cl["a"].url()).Subscribe(opts(cl["a"].url()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msg, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("a: received %d of 100: %v", i, err)
		}
		if want := fmt.Sprintf("p#%d", i); string(msg.Payload()) != want {
			t.Fatalf("a: message %d is %q", i, msg.Payload())
		}
		if err := cons.Ack(msg); err != nil {
			t.Fatal(err)
		}
	}
	cons.Close()

	eventually(t, "group moved in b", func() error {
		if cl["b"].cursorOf(topic, "group").MarkDeletePosition().Compare(startB) <= 0 {
			return fmt.Errorf("not moved")
		}
		return nil
	})
	waitUpdatesApplied(t, cl["a"], cl["b"], topic, "group")
	got := geoCollectOpts(t, cl["b"].url(), opts(cl["b"].url()), "p#199")
	again, seen := 0, map[int]bool{}
	for _, v := range got {
		i := geoIndex(v)
		seen[i] = true
		if i < 100 {
			again++
		}
	}
	for i := 100; i < 200; i++ {
		if !seen[i] {
			t.Fatalf("b: p#%d lost", i)
		}
	}
	if again >= 50 {
		t.Fatalf("b: %d of the first 100 delivered again: not close to where a stopped", again)
	}
	t.Logf("b: %d messages, %d of the first half again", len(got), again)
}

// Replicated subscriptions on a partitioned topic (3 partitions): each
// partition is a topic with its own snapshots, so a group that acked
// about half of every partition in a resumes in b near that point on
// every partition, none from its beginning, and loses nothing.
func TestGeoReplicatedSubscriptionPartitioned(t *testing.T) {
	testReplicatedSubscriptionPartitioned(t, true)
}

// The same with the subscription not in b beforehand: the first update
// creates it on each partition.
func TestGeoReplicatedSubscriptionPartitionedCreatedByUpdate(t *testing.T) {
	testReplicatedSubscriptionPartitioned(t, false)
}

func testReplicatedSubscriptionPartitioned(t *testing.T, existsInB bool) {
	cl := newGeoInstance(t, "a", "b")
	geoNamespace(t, cl["a"].res, "rpart", "a", "b")
	const partitions = 3
	topic := "persistent://geo/rpart/t"
	if err := cl["a"].res.CreatePartitionedTopic(context.Background(), resources.TopicName{Domain: "persistent",
		Tenant: "geo", Namespace: "rpart", Local: "t"}, resources.PartitionedTopicMetadata{Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	partition := func(i int) string { return fmt.Sprintf("%s-partition-%d", topic, i) }
	subscribeOnce(t, cl["a"].url(), topic, "group", true)
	if existsInB {
		subscribeOnce(t, cl["b"].url(), topic, "group", true)
	}

	// 20 rounds of 10 messages, spread over the partitions (round robin,
	// no batching), with a snapshot completed on every partition after each.
	prod, err := newClient(t, cl["a"].url()).CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "p",
		DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	partOf := map[string]int{} // value -> partition
	for round := range 20 {
		for i := round * 10; i < round*10+10; i++ {
			v := fmt.Sprintf("p#%d", i)
			id, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(v)})
			if err != nil {
				t.Fatal(err)
			}
			partOf[v] = int(id.PartitionIdx())
		}
		for p := range partitions {
			cl["a"].waitSnapshotCovering(t, partition(p))
		}
	}
	perPartition := map[int]int{}
	for _, p := range partOf {
		perPartition[p]++
	}
	if len(perPartition) != partitions {
		t.Fatalf("messages went to %d partitions, want %d: %v", len(perPartition), partitions, perPartition)
	}

	startB := map[int]managedledger.Position{}
	for p := range partitions {
		startB[p] = managedledger.Position{LedgerID: -1, EntryID: -1}
		if !existsInB {
			continue
		}
		cur := cl["b"].cursorOf(partition(p), "group")
		if cur == nil {
			t.Fatalf("b: no group cursor on partition %d", p)
		}
		startB[p] = cur.MarkDeletePosition()
	}
	acked, ackedIn := consumeHalfOfEach(t, cl["a"].url(), topic, partOf, perPartition)
	for p := range partitions {
		eventually(t, fmt.Sprintf("group moved in b on partition %d", p), func() error {
			cur := cl["b"].cursorOf(partition(p), "group")
			if cur == nil || cur.MarkDeletePosition().Compare(startB[p]) <= 0 {
				return fmt.Errorf("not moved from %v", startB[p])
			}
			return nil
		})
	}
	for p := range partitions {
		waitUpdatesApplied(t, cl["a"], cl["b"], partition(p), "group") // any later update lands too
	}

	// In b: every message not acked in a, and few of those that were.
	cons, err := newClient(t, cl["b"].url()).Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "group",
		Type: pulsar.Shared, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReplicateSubscriptionState: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	missing := 200 - len(acked)
	seen := map[string]bool{}
	again := map[int]int{}
	for {
		wait := 20 * time.Second
		if missing == 0 {
			wait = 500 * time.Millisecond // then catch extras
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		msg, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			break
		}
		v := string(msg.Payload())
		_ = cons.Ack(msg)
		if _, ok := partOf[v]; !ok {
			t.Fatalf("b got %q, which is no message sent", v)
		}
		if acked[v] {
			again[partOf[v]]++
		} else if !seen[v] {
			missing--
		}
		seen[v] = true
	}
	if missing != 0 {
		t.Fatalf("b: %d messages not acked in a never arrived", missing)
	}
	total := 0
	for p := range partitions {
		total += again[p]
		// A round of 10 spreads about 4 over a partition; the newest
		// snapshot passed is at most a round behind. Starting from the
		// beginning would give all of ackedIn[p] again.
		if again[p] > 5 || again[p] >= ackedIn[p] {
			t.Errorf("b, partition %d: %d of the %d acked in a delivered again", p, again[p], ackedIn[p])
		}
	}
	t.Logf("b: acked in a per partition %v, delivered again %v (%d in all)", ackedIn, again, total)
}

// consumeHalfOfEach receives on a replicated subscription of a
// partitioned topic and acknowledges the first half of each partition's
// messages (a partitioned consumer drains one partition's queue before
// another's, so the first N received could all be from one partition).
// Each partition's messages arrive in order, so what it acknowledges is a
// prefix of every partition and its mark-delete position follows.
func consumeHalfOfEach(t *testing.T, url, topic string, partOf map[string]int, perPartition map[int]int) (map[string]bool, map[int]int) {
	t.Helper()
	cons, err := newClient(t, url).Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "group",
		Type: pulsar.Shared, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReplicateSubscriptionState: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	acked, ackedIn := map[string]bool{}, map[int]int{}
	want := 0
	for _, n := range perPartition {
		want += n / 2
	}
	for len(acked) < want {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msg, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("acked %d of %d: %v", len(acked), want, err)
		}
		v := string(msg.Payload())
		p := partOf[v]
		if ackedIn[p] >= perPartition[p]/2 {
			continue // past this partition's half: left unacknowledged
		}
		if err := cons.Ack(msg); err != nil {
			t.Fatal(err)
		}
		acked[v] = true
		ackedIn[p]++
	}
	return acked, ackedIn
}

// replSubState describes a cluster's side of a replicated subscription
// for a failure message: its cursors' positions, its replicators'
// connections and backlogs, and its completed snapshots.
func replSubState(c *geoCluster, topicName string) string {
	tp := c.loadedTopic(topicName)
	if tp == nil {
		return c.name + ": topic not loaded"
	}
	out := fmt.Sprintf("%s: last %v, snapshots completed %d, cursors", c.name, tp.ml.LastConfirmed(), tp.rsubs.completed.Load())
	for _, cur := range tp.ml.Cursors() {
		out += fmt.Sprintf(" %s@%v(backlog %d)", cur.Name(), cur.MarkDeletePosition(), cur.Backlog())
	}
	tp.repl.mu.Lock()
	defer tp.repl.mu.Unlock()
	for remote, r := range tp.repl.m {
		out += fmt.Sprintf(", replicator to %s connected %v", remote, r.connected.Load())
	}
	return out
}
