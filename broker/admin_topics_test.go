package broker

// The topic and subscription admin API driven by pulsaradmin (v0.19), with
// traffic from the official Go client.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

type adminEnv struct {
	b     *Broker
	url   string // pulsar://
	web   string // http://
	admin pulsaradmin.Client
}

// startAdminBroker serves a broker (with a metadata store, and a schema
// registry when schemas is set) over both protocols.
func startAdminBroker(t *testing.T, ledgers managedledger.Factory, schemas bool) *adminEnv {
	t.Helper()
	store := metadata.NewMemoryServer().NewSession()
	cfg := Config{ClusterName: "test", Metadata: store, StatsUpdateFrequency: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if schemas {
		reg, err := schema.New(schema.Config{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Schemas = reg
	}
	b := New(cfg, ledgers)
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		web.Close()
		srv.Close(ctx)
		b.Close(ctx)
	})
	admin, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: web.URL})
	if err != nil {
		t.Fatal(err)
	}
	return &adminEnv{b: b, url: "pulsar://" + srv.Addr().String(), web: web.URL, admin: admin}
}

func topicName(t *testing.T, s string) utils.TopicName {
	t.Helper()
	tn, err := utils.GetTopicName(s)
	if err != nil {
		t.Fatal(err)
	}
	return *tn
}

// adminStatus is the HTTP status of a pulsaradmin error (0: none).
func adminStatus(err error) int {
	var re rest.Error
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func expectStatus(t *testing.T, what string, err error, want int) {
	t.Helper()
	if adminStatus(err) != want {
		t.Fatalf("%s: %v, want HTTP %d", what, err, want)
	}
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	eventuallyWithin(t, 10*time.Second, what, check)
}

// eventuallyWithin is eventually with its own deadline, for a check that
// waits on periodic work (a replicated subscription's snapshots) which a
// loaded CI machine slows past 10 s.
func eventuallyWithin(t *testing.T, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sendN(t *testing.T, p pulsar.Producer, n int) []pulsar.MessageID {
	t.Helper()
	ids := make([]pulsar.MessageID, n)
	for i := range n {
		id, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m-%05d", i)),
			Properties: map[string]string{"Index": strconv.Itoa(i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

func newProducer(t *testing.T, c pulsar.Client, topic string, opts pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	opts.Topic = topic
	if opts.BatchingMaxPublishDelay == 0 {
		opts.DisableBatching = true
	}
	p, err := c.CreateProducer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestAdminTopicCreateListStatsDelete(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	topics := env.admin.Topics()
	const name = "persistent://public/default/adm-plain"
	tn := topicName(t, name)
	if _, err := topics.GetStats(tn); adminStatus(err) != http.StatusNotFound {
		t.Fatalf("stats of a topic never created: %v", err)
	}
	if err := topics.Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "second create", topics.Create(tn, 0), http.StatusConflict)
	ns, _ := utils.GetNamespaceName("public/default")
	partitioned, plain, err := topics.List(*ns)
	if err != nil || len(partitioned) != 0 || len(plain) != 1 || plain[0] != name {
		t.Fatalf("list = %v %v %v", partitioned, plain, err)
	}

	client := newClient(t, env.url)
	p := newProducer(t, client, name, pulsar.ProducerOptions{Name: "prod-1"})
	sendN(t, p, 5)
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "sub", Type: pulsar.Failover,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, Name: "cons-1"})
	if err != nil {
		t.Fatal(err)
	}
	receive(t, cons, 2, true)
	eventually(t, "stats", func() error {
		st, err := topics.GetStats(tn)
		switch {
		case err != nil:
			return err
		case st.MsgCounterIn != 5 || st.MsgCounterOut < 5 || st.StorageSize == 0:
			return fmt.Errorf("counters %+v", st)
		case len(st.Publishers) != 1 || st.Publishers[0].ProducerName != "prod-1":
			return fmt.Errorf("publishers %+v", st.Publishers)
		}
		sub := st.Subscriptions["sub"]
		if sub.MsgBacklog != 3 || sub.SubType != "Failover" || len(sub.Consumers) != 1 ||
			sub.Consumers[0].ConsumerName != "cons-1" || sub.ActiveConsumerName != "cons-1" || !sub.IsDurable {
			return fmt.Errorf("subscription %+v", sub)
		}
		return nil
	})

	expectStatus(t, "delete a topic never created", topics.Delete(topicName(t, "nothing-here"), false, true), http.StatusNotFound)
	expectStatus(t, "stats of a non-persistent topic nobody uses", func() error {
		_, err := topics.GetStats(topicName(t, "non-persistent://public/default/np"))
		return err
	}(), http.StatusNotFound)
}

func TestAdminDeleteTopic(t *testing.T) {
	env := startAdminBroker(t, managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: 50}), false)
	topics := env.admin.Topics()
	const name = "persistent://public/default/adm-delete"
	tn := topicName(t, name)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: env.url, Logger: log.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	sendN(t, p, 3)
	expectStatus(t, "delete with a producer connected", topics.Delete(tn, false, true), http.StatusPreconditionFailed)
	if err := topics.Delete(tn, true, true); err != nil {
		t.Fatalf("forced delete: %v", err)
	}
	// The disconnected producer may come back and create the topic again,
	// as Pulsar's auto creation does: then it is a new, empty one.
	client.Close()
	eventually(t, "gone once the client left", func() error {
		st, err := topics.GetInternalStats(tn)
		if adminStatus(err) == http.StatusNotFound {
			return nil
		}
		if err == nil && st.NumberOfEntries != 0 {
			t.Fatalf("after delete: %d entries", st.NumberOfEntries)
		}
		if err == nil {
			err = topics.Delete(tn, false, true)
		}
		return fmt.Errorf("still there: %v", err)
	})
	// A topic no client uses: deleted once, it is gone for good (the one
	// above may still be recreated by a reconnect the closed client had
	// in flight).
	quiet := topicName(t, "persistent://public/default/adm-delete-quiet")
	if err := topics.Create(quiet, 0); err != nil {
		t.Fatal(err)
	}
	if err := topics.Delete(quiet, false, true); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "delete again", topics.Delete(quiet, false, true), http.StatusNotFound)
	ns, _ := utils.GetNamespaceName("public/default")
	if _, plain, err := topics.List(*ns); err != nil || slices.Contains(plain, quiet.String()) {
		t.Fatalf("list after delete = %v, %v", plain, err)
	}
}

func TestAdminPartitionedTopics(t *testing.T) {
	env := startAdminBroker(t, managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: 50}), false)
	topics := env.admin.Topics()
	const name = "persistent://public/default/adm-parted"
	tn := topicName(t, name)
	if err := topics.Create(tn, 2); err != nil { // pulsaradmin's JSON body
		t.Fatal(err)
	}
	expectStatus(t, "create again", topics.Create(tn, 2), http.StatusConflict)
	expectStatus(t, "plain create of a partitioned name", topics.Create(tn, 0), http.StatusConflict)
	if err := topics.Update(tn, 3); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "shrink", topics.Update(tn, 1), http.StatusBadRequest)
	expectStatus(t, "update a topic that is not partitioned", topics.Update(topicName(t, "plain-x"), 4), http.StatusNotFound)
	if md, err := topics.GetMetadata(tn); err != nil || md.Partitions != 3 {
		t.Fatalf("metadata = %+v, %v", md, err)
	}
	ns, _ := utils.GetNamespaceName("public/default")
	if parted, _, err := topics.List(*ns); err != nil || len(parted) != 1 || parted[0] != name {
		t.Fatalf("partitioned list = %v, %v", parted, err)
	}

	client := newClient(t, env.url)
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "sub", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, client, name, pulsar.ProducerOptions{})
	sendN(t, p, 30)
	eventually(t, "partitioned stats", func() error {
		st, err := topics.GetPartitionedStats(tn, true)
		switch {
		case err != nil:
			return err
		case st.Metadata.Partitions != 3 || len(st.Partitions) != 3:
			return fmt.Errorf("metadata %+v, %d partitions", st.Metadata, len(st.Partitions))
		case st.Subscriptions["sub"].MsgBacklog != 30 || len(st.Subscriptions["sub"].Consumers) != 3:
			return fmt.Errorf("subscription %+v", st.Subscriptions["sub"])
		case len(st.Publishers) != 3:
			return fmt.Errorf("publishers %+v", st.Publishers)
		}
		var in int64
		for _, ps := range st.Partitions {
			in += ps.MsgCounterIn
		}
		if in != 30 {
			return fmt.Errorf("%d messages in over partitions", in)
		}
		return nil
	})
	if st, err := topics.GetPartitionedStats(tn, false); err != nil || len(st.Partitions) != 0 {
		t.Fatalf("without per-partition stats: %d partitions, %v", len(st.Partitions), err)
	}
	expectStatus(t, "partitioned stats of a plain topic", func() error {
		_, err := topics.GetPartitionedStats(topicName(t, "plain-x"), true)
		return err
	}(), http.StatusNotFound)

	expectStatus(t, "delete with clients", topics.Delete(tn, false, false), http.StatusPreconditionFailed)
	cons.Close()
	p.Close()
	if err := topics.Delete(tn, false, false); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if parted, _, err := topics.List(*ns); err != nil || len(parted) != 0 {
		t.Fatalf("partitioned list after delete = %v, %v", parted, err)
	}
	expectStatus(t, "delete again", topics.Delete(tn, false, false), http.StatusNotFound)
}

func TestAdminTerminate(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	topics := env.admin.Topics()
	const name = "persistent://public/default/adm-term"
	tn := topicName(t, name)
	closing := &logSignal{msg: "Closing producer", seen: make(chan struct{})}
	client := newClientLogging(t, env.url, log.NewLoggerWithSlog(slog.New(closing)))
	p := newProducer(t, client, name, pulsar.ProducerOptions{SendTimeout: time.Second})
	ids := sendN(t, p, 3)
	last, err := topics.Terminate(tn)
	if err != nil || last.LedgerID != ids[2].LedgerID() || last.EntryID != ids[2].EntryID() {
		t.Fatalf("terminate = %+v, %v; last sent %v", last, err, ids[2])
	}
	// The broker closes the topic's producers and refuses them back as
	// terminated, and the client then closes its producer. A send made
	// while it closes is never answered, and races with the close on the
	// client's channels (pulsar-client-go v0.19: CI hung here for 10
	// minutes, with the race detector's report): the send waits for it.
	select {
	case <-closing.seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the client did not close its producer of the terminated topic in 30 s")
	}
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("late")}); err == nil {
		t.Fatal("send after terminate succeeded")
	}
	if _, err := client.CreateProducer(pulsar.ProducerOptions{Topic: name}); err == nil {
		t.Fatal("a producer on a terminated topic was accepted")
	}
	id, err := topics.GetLastMessageID(tn)
	if err != nil || id.LedgerID != last.LedgerID || id.EntryID != last.EntryID || id.PartitionIndex != -1 {
		t.Fatalf("last message id = %+v, %v", id, err)
	}
	if st, err := topics.GetInternalStats(tn); err != nil || st.State != "Terminated" {
		t.Fatalf("internal stats state = %q, %v", st.State, err)
	}
	// After an unload the topic loads again from its managed ledger, and
	// it is still terminated.
	if err := topics.Unload(tn); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateProducer(pulsar.ProducerOptions{Topic: name}); err == nil {
		t.Fatal("a producer on a terminated topic was accepted after a reload")
	}
	if st, err := topics.GetInternalStats(tn); err != nil || st.State != "Terminated" {
		t.Fatalf("internal stats state after a reload = %q, %v", st.State, err)
	}
	expectStatus(t, "terminate a missing topic", func() error { _, err := topics.Terminate(topicName(t, "none")); return err }(),
		http.StatusNotFound)
}

func TestAdminSubscriptions(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	subs := env.admin.Subscriptions()
	const name = "persistent://public/default/adm-subs"
	tn := topicName(t, name)
	client := newClient(t, env.url)
	before := time.Now().Add(-time.Second).UnixMilli()
	ids := sendN(t, newProducer(t, client, name, pulsar.ProducerOptions{}), 10)
	backlog := func(sub string) int64 {
		t.Helper()
		st, err := env.admin.Topics().GetStats(tn)
		if err != nil {
			t.Fatal(err)
		}
		return st.Subscriptions[sub].MsgBacklog
	}

	at := utils.MessageID{LedgerID: ids[5].LedgerID(), EntryID: ids[5].EntryID(), PartitionIndex: -1}
	for sub, start := range map[string]utils.MessageID{"early": utils.Earliest, "late": utils.Latest, "mid": at} {
		if err := subs.Create(tn, sub, start); err != nil {
			t.Fatalf("create %s: %v", sub, err)
		}
	}
	expectStatus(t, "create twice", subs.Create(tn, "early", utils.Earliest), http.StatusConflict)
	expectStatus(t, "create on a missing topic", subs.Create(topicName(t, "none"), "s", utils.Earliest), http.StatusNotFound)
	if list, err := subs.List(tn); err != nil || strings.Join(list, ",") != "early,late,mid" {
		t.Fatalf("list = %v, %v", list, err)
	}
	if b := [3]int64{backlog("early"), backlog("late"), backlog("mid")}; b != [3]int64{10, 0, 5} {
		t.Fatalf("backlogs = %v", b)
	}

	if err := subs.SkipMessages(tn, "early", 2); err != nil || backlog("early") != 8 {
		t.Fatalf("skip 2: backlog %d, %v", backlog("early"), err)
	}
	msgs, err := subs.PeekMessages(tn, "early", 3)
	if err != nil || len(msgs) != 3 || string(msgs[0].Payload) != "m-00002" || string(msgs[2].Payload) != "m-00004" ||
		msgs[0].Properties["Index"] != "2" || msgs[0].GetMessageID().EntryID != ids[2].EntryID() {
		t.Fatalf("peek = %+v, %v", msgs, err)
	}
	expectStatus(t, "peek past the end", func() error { _, err := subs.PeekMessages(tn, "late", 1); return err }(), http.StatusNotFound)
	if err := subs.ClearBacklog(tn, "early"); err != nil || backlog("early") != 0 {
		t.Fatalf("clear backlog: %d, %v", backlog("early"), err)
	}
	at3 := utils.MessageID{LedgerID: ids[3].LedgerID(), EntryID: ids[3].EntryID(), PartitionIndex: -1}
	if err := subs.ResetCursorToMessageID(tn, "early", at3); err != nil || backlog("early") != 7 {
		t.Fatalf("reset to message 3: backlog %d, %v", backlog("early"), err)
	}
	if err := subs.ResetCursorToTimestamp(tn, "early", before); err != nil || backlog("early") != 10 {
		t.Fatalf("reset to before the first: backlog %d, %v", backlog("early"), err)
	}
	if err := subs.ExpireMessages(tn, "early", 3600); err != nil || backlog("early") != 10 {
		t.Fatalf("expire older than an hour: backlog %d, %v", backlog("early"), err)
	}
	time.Sleep(5 * time.Millisecond) // every message now lies in the past
	if err := subs.ExpireAllMessages(tn, 0); err != nil || backlog("early") != 0 || backlog("mid") != 0 {
		t.Fatalf("expire all: %d %d, %v", backlog("early"), backlog("mid"), err)
	}
	expectStatus(t, "skip on a missing subscription", subs.SkipMessages(tn, "nope", 1), http.StatusNotFound)
	expectStatus(t, "skip a negative count", subs.SkipMessages(tn, "early", -1), http.StatusBadRequest)

	// A live consumer: a reset sends it the messages again; a delete
	// waits for force.
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "mid", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if err := subs.ResetCursorToMessageID(tn, "mid", at); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, cons, 5, true); got[0] != "m-00005" || got[4] != "m-00009" {
		t.Fatalf("after reset: %v", got)
	}
	expectStatus(t, "delete with a consumer", subs.Delete(tn, "mid"), http.StatusPreconditionFailed)
	if err := subs.ForceDelete(tn, "mid"); err != nil {
		t.Fatal(err)
	}
	if err := subs.Delete(tn, "late"); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "delete a missing subscription", subs.Delete(tn, "late"), http.StatusNotFound)
	eventually(t, "subscriptions after deletes", func() error {
		list, err := subs.List(tn)
		if err != nil || strings.Contains(strings.Join(list, ","), "late") {
			return fmt.Errorf("list = %v, %v", list, err)
		}
		return nil
	})
}

func TestAdminSubscriptionNameEscaping(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	subs := env.admin.Subscriptions()
	tn := topicName(t, "persistent://public/default/adm-esc")
	if err := env.admin.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	const sub = "my sub/with%odd"
	if err := subs.Create(tn, sub, utils.Latest); err != nil {
		t.Fatal(err)
	}
	if list, err := subs.List(tn); err != nil || len(list) != 1 || list[0] != sub {
		t.Fatalf("list = %q, %v", list, err)
	}
	if err := subs.Delete(tn, sub); err != nil {
		t.Fatal(err)
	}
}

func TestAdminInternalStatsAndMessages(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	topics, subs := env.admin.Topics(), env.admin.Subscriptions()
	const name = "persistent://public/default/adm-msgs"
	tn := topicName(t, name)
	client := newClient(t, env.url)
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "sub", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ids := sendN(t, newProducer(t, client, name, pulsar.ProducerOptions{}), 6)
	byPayload := map[string]pulsar.Message{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 6 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byPayload[string(m.Payload())] = m
	}
	for _, p := range []string{"m-00000", "m-00002", "m-00003"} {
		if err := cons.Ack(byPayload[p]); err != nil {
			t.Fatal(err)
		}
	}
	pos := func(i int) string { return fmt.Sprintf("%d:%d", ids[i].LedgerID(), ids[i].EntryID()) }
	st, err := topics.GetInternalStats(tn)
	if err != nil {
		t.Fatal(err)
	}
	cur := st.Cursors["sub"]
	if st.EntriesAddedCounter != 6 {
		t.Fatalf("entriesAddedCounter %d after 6 entries were added, want 6", st.EntriesAddedCounter)
	}
	if st.NumberOfEntries != 6 || st.LastConfirmedEntry != pos(5) || st.State != "LedgerOpened" || st.TotalSize == 0 ||
		cur.MarkDeletePosition != pos(0) || cur.ReadPosition == "" ||
		cur.IndividuallyDeletedMessages != "[("+pos(1)+".."+pos(3)+"]]" || cur.TotalNonContiguousDeletedMessagesRange != 1 {
		t.Fatalf("internal stats %+v, cursor %+v", st, cur)
	}
	// The ledger list covers every stored entry, and the last ledger is
	// the one the last entry is in.
	var inLedgers int64
	for _, l := range st.Ledgers {
		inLedgers += l.Entries
	}
	if n := len(st.Ledgers); n == 0 || inLedgers != st.NumberOfEntries || st.Ledgers[n-1].LedgerID != ids[5].LedgerID() {
		t.Fatalf("ledgers %+v for %d entries ending at %s", st.Ledgers, st.NumberOfEntries, pos(5))
	}
	// The subscription's peek skips what was acknowledged.
	if msgs, err := subs.PeekMessages(tn, "sub", 2); err != nil || string(msgs[0].Payload) != "m-00001" ||
		string(msgs[1].Payload) != "m-00004" {
		t.Fatalf("peek = %v, %v", msgs, err)
	}

	ms, err := subs.GetMessagesByID(tn, ids[4].LedgerID(), ids[4].EntryID())
	if err != nil || len(ms) != 1 || string(ms[0].Payload) != "m-00004" || ms[0].Properties["Index"] != "4" ||
		ms[0].Properties["publish-time"] == "" {
		t.Fatalf("message by id = %+v, %v", ms, err)
	}
	expectStatus(t, "missing message", func() error { _, err := subs.GetMessagesByID(tn, 999, 0); return err }(), http.StatusNotFound)

	examine := func(query string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(env.web + "/admin/v2/persistent/public/default/adm-msgs/examinemessage?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	if resp, body := examine("initialPosition=earliest&messagePosition=2"); resp.StatusCode != 200 || body != "m-00001" ||
		resp.Header.Get("X-Pulsar-Message-ID") != pos(1) {
		t.Fatalf("examine earliest 2: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, body := examine("initialPosition=latest&messagePosition=1"); resp.StatusCode != 200 || body != "m-00005" {
		t.Fatalf("examine latest 1: %d %q", resp.StatusCode, body)
	}
	if resp, _ := examine("initialPosition=latest&messagePosition=7"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("examine past the start: %d", resp.StatusCode)
	}
	if resp, _ := examine("initialPosition=middle"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("examine with a bad position: %d", resp.StatusCode)
	}
}

// Batched and compressed entries come back as their messages. The four
// messages are one batch because the test flushes them: a batch timer
// short enough to fire between the sends split them (CI, 6 Dec: "2
// messages" with 50 ms).
func TestAdminMessageBatchesAndCompression(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	subs := env.admin.Subscriptions()
	client := newClient(t, env.url)
	for _, codec := range []pulsar.CompressionType{pulsar.NoCompression, pulsar.LZ4, pulsar.ZLib, pulsar.ZSTD} {
		name := fmt.Sprintf("persistent://public/default/adm-batch-%d", codec)
		p := newProducer(t, client, name, pulsar.ProducerOptions{CompressionType: codec,
			BatchingMaxPublishDelay: time.Hour, BatchingMaxMessages: 4})
		var wg sync.WaitGroup
		var first pulsar.MessageID
		for i := range 4 {
			wg.Add(1)
			p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(strings.Repeat(strconv.Itoa(i), 100))},
				func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer wg.Done()
					if err != nil {
						t.Error(err)
					}
					if i == 0 {
						first = id
					}
				})
		}
		if err := p.Flush(); err != nil {
			t.Fatalf("%v: flush: %v", codec, err)
		}
		wg.Wait()
		msgs, err := subs.GetMessagesByID(topicName(t, name), first.LedgerID(), first.EntryID())
		if err != nil || len(msgs) != 4 {
			t.Fatalf("%v: %d messages, %v", codec, len(msgs), err)
		}
		for i, m := range msgs {
			if string(m.Payload) != strings.Repeat(strconv.Itoa(i), 100) {
				t.Fatalf("%v: message %d is %q", codec, i, m.Payload)
			}
		}
	}
}

// In cluster mode a topic call reaches the topic's owner: a 307 from any
// other broker, which pulsaradmin follows.
func TestAdminRedirectsToOwner(t *testing.T) {
	c := startCluster(t, 2)
	const name = "persistent://public/default/adm-owned"
	client := c.newClient(t)
	sendN(t, newProducer(t, client, name, pulsar.ProducerOptions{}), 3)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirects := 0
	for _, cb := range c.brokers {
		admin, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: cb.web.URL})
		if err != nil {
			t.Fatal(err)
		}
		st, err := admin.Topics().GetStats(topicName(t, name))
		if err != nil || st.MsgCounterIn != 3 {
			t.Fatalf("stats through %s: %+v, %v", cb.web.URL, st, err)
		}
		resp, err := noFollow.Get(cb.web.URL + "/admin/v2/persistent/public/default/adm-owned/stats")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTemporaryRedirect {
			redirects++
			if !strings.Contains(resp.Header.Get("Location"), "authoritative=true") {
				t.Fatalf("redirect to %q", resp.Header.Get("Location"))
			}
		}
	}
	if redirects != 1 {
		t.Fatalf("%d of 2 brokers redirected, want 1 (the non-owner)", redirects)
	}
}

// The topic, schema and namespace admin routes share one ServeMux without
// conflicting patterns (ServeMux panics on a conflict).
func TestAdminRoutesCoexist(t *testing.T) {
	store := metadata.NewMemoryServer().NewSession()
	res, err := resources.New(context.Background(), store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	reg, err := schema.New(schema.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	b := New(Config{ClusterName: "test", Metadata: store, Resources: res, Schemas: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, managedledger.NewMemoryFactory(managedledger.MemoryOptions{}))
	t.Cleanup(func() { b.Close(context.Background()) })
	web := httptest.NewServer(b.HTTPHandler())
	defer web.Close()
	for path, want := range map[string]int{
		"/admin/v2/persistent/public/default":                                http.StatusOK,
		"/admin/v2/non-persistent/public/default/partitioned":                http.StatusOK,
		"/admin/v2/schemas/public/default/none/schema":                       http.StatusNotFound,
		"/admin/v2/persistent/public/default/none/stats":                     http.StatusNotFound,
		"/admin/v2/persistent/public/default/none/subscriptions":             http.StatusNotFound,
		"/admin/v2/persistent/public/default/none/partitions":                http.StatusOK,
		"/admin/v2/persistent/public/default/none/partitioned-stats":         http.StatusNotFound,
		"/admin/v2/persistent/public/default/none/lastMessageId":             http.StatusNotFound,
		"/admin/v2/persistent/public/default/none/ledger/1/entry/0":          http.StatusNotFound,
		"/admin/v2/persistent/public/default/none/subscription/s/position/1": http.StatusNotFound,
	} {
		resp, err := http.Get(web.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// GET .../messageid/{timestamp} (pulsaradmin's GetMessageID) answers the
// first message published at or after the time, 404 past the last.
func TestMessageIDByTimestamp(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	client := newClient(t, env.url)
	const name = "persistent://public/default/by-time"
	p := newProducer(t, client, name, pulsar.ProducerOptions{DisableBatching: true})
	first := sendN(t, p, 3)
	time.Sleep(20 * time.Millisecond) // publish times are milliseconds: the next ones are later
	between := time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	later := sendN(t, p, 2)
	tn := topicName(t, name)
	for _, c := range []struct {
		ts   int64
		want pulsar.MessageID
	}{{0, first[0]}, {between, later[0]}} {
		id, err := env.admin.Topics().GetMessageID(tn, c.ts)
		if err != nil {
			t.Fatalf("message id at %d: %v", c.ts, err)
		}
		if id.LedgerID != c.want.LedgerID() || id.EntryID != c.want.EntryID() {
			t.Errorf("message id at %d: %+v, want %v", c.ts, id, c.want)
		}
	}
	if id, err := env.admin.Topics().GetMessageID(tn, time.Now().Add(time.Hour).UnixMilli()); err == nil ||
		!strings.Contains(err.Error(), "404") {
		t.Fatalf("message id after the last message: %+v %v, want 404", id, err)
	}
}

// Topic stats carry topicCreationTimeStamp and lastPublishTimeStamp
// (Pulsar's PIP-431): the creation time from the start, the last stored
// message's publish time once there is one, recovered from storage after
// an unload; a partitioned topic's creation is its metadata's.
func TestTopicStatsTimestamps(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	const name = "persistent://public/default/stamped"
	tn := topicName(t, name)
	before := time.Now().Add(-time.Second).UnixMilli()
	if err := env.admin.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	st, err := env.admin.Topics().GetStats(tn)
	if err != nil || st.TopicCreationTimeStamp < before || st.LastPublishTimestamp != 0 {
		t.Fatalf("stats of a new topic: created %d (want >= %d), last publish %d (want 0), %v",
			st.TopicCreationTimeStamp, before, st.LastPublishTimestamp, err)
	}
	p := newProducer(t, newClient(t, env.url), name, pulsar.ProducerOptions{DisableBatching: true})
	id := sendN(t, p, 2)[1]
	m, err := env.admin.Subscriptions().GetMessagesByID(tn, id.LedgerID(), id.EntryID())
	if err != nil || len(m) != 1 {
		t.Fatalf("the last message: %v %v", m, err)
	}
	want := m[0].Properties["publish-time"]
	check := func(when string) {
		t.Helper()
		st, err := env.admin.Topics().GetStats(tn)
		if err != nil {
			t.Fatal(err)
		}
		if got := time.UnixMilli(st.LastPublishTimestamp).UTC().Format("2006-01-02T15:04:05.000Z"); got != want {
			t.Errorf("%s: lastPublishTimeStamp %d (%s), want the last message's publish time %s", when, st.LastPublishTimestamp, got, want)
		}
	}
	check("after two sends")
	p.Close()
	if err := env.admin.Topics().Unload(tn); err != nil {
		t.Fatal(err)
	}
	check("after an unload")

	parts := topicName(t, "persistent://public/default/stamped-parts")
	if err := env.admin.Topics().Create(parts, 2); err != nil {
		t.Fatal(err)
	}
	ps, err := env.admin.Topics().GetPartitionedStats(parts, true)
	if err != nil || ps.TopicCreationTimeStamp < before || ps.LastPublishTimestamp != 0 {
		t.Fatalf("partitioned stats: created %d, last publish %d, %v", ps.TopicCreationTimeStamp, ps.LastPublishTimestamp, err)
	}
}

// Stats options excludePublishers and excludeConsumers leave those lists
// empty; a consumer's lastConsumedFlowTimestamp is its last FLOW; the
// subscription maps Pulsar always sends are there, empty.
func TestTopicStatsOptionsAndFlowTime(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	client := newClient(t, env.url)
	const name = "persistent://public/default/stats-options"
	before := time.Now().Add(-time.Second).UnixMilli()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p := newProducer(t, client, name, pulsar.ProducerOptions{})
	sendN(t, p, 1)
	tn := topicName(t, name)
	eventually(t, "the consumer's FLOW", func() error {
		st, err := env.admin.Topics().GetStats(tn)
		if err != nil {
			return err
		}
		sub := st.Subscriptions["s"]
		if len(st.Publishers) != 1 || len(sub.Consumers) != 1 || sub.Consumers[0].LastConsumedFlowTimestamp < before {
			return fmt.Errorf("stats %+v", st)
		}
		if sub.ConsumersAfterMarkDeletePosition == nil || sub.SubscriptionProperties == nil {
			return fmt.Errorf("subscription maps missing: %+v", sub)
		}
		return nil
	})
	st, err := env.admin.Topics().GetStatsWithOption(tn, utils.GetStatsOptions{ExcludePublishers: true, ExcludeConsumers: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Publishers) != 0 || len(st.Subscriptions["s"].Consumers) != 0 {
		t.Fatalf("stats with publishers and consumers excluded: %d publishers, %d consumers",
			len(st.Publishers), len(st.Subscriptions["s"].Consumers))
	}
}

// logSignal is a slog handler that closes seen the first time a record's
// message is msg (a client's log line as the sign that it got somewhere).
type logSignal struct {
	msg  string
	seen chan struct{}
	once sync.Once
}

func (h *logSignal) Enabled(context.Context, slog.Level) bool { return true }

func (h *logSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

func (h *logSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logSignal) WithGroup(string) slog.Handler      { return h }
