package broker

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/console"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// A namespace's topics for the console: a partitioned topic is one row
// with its partitions' figures summed, a plain topic its own; the
// history of a partitioned topic sums its partitions'.
func TestConsoleTopicsAndHistorySumPartitions(t *testing.T) {
	env := startAdminBroker(t, managedledger.NewMemoryFactory(managedledger.MemoryOptions{}), false)
	const parted, plain = "persistent://public/default/con-parted", "persistent://public/default/con-plain"
	if err := env.admin.Topics().Create(topicName(t, parted), 2); err != nil {
		t.Fatal(err)
	}
	client := newClient(t, env.url)
	for _, name := range []string{parted, plain} {
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	env.b.sampleHistory() // the base the next sample's rates start from
	p := newProducer(t, client, parted, pulsar.ProducerOptions{DisableBatching: true})
	sendN(t, p, 6)
	sendN(t, newProducer(t, client, plain, pulsar.ProducerOptions{DisableBatching: true}), 2)
	env.b.sampleHistory()

	rows, err := env.b.ConsoleTopics(context.Background(), "public", "default")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]console.TopicRow{}
	for _, r := range rows {
		if strings.Contains(r.Name, "-partition-") {
			t.Errorf("partition %s listed as a row of its own", r.Name)
		}
		byName[r.Name] = r
	}
	if r := byName[parted]; r.Partitions != 2 || r.Backlog != 6 || r.Subscriptions != 1 || r.Producers != 2 || !r.Loaded {
		t.Errorf("partitioned row %+v: want 2 partitions, backlog 6, 1 subscription, 2 producers (one per partition), loaded", r)
	}
	if r := byName[plain]; r.Partitions != 0 || r.Backlog != 2 || r.Subscriptions != 1 || r.Producers != 1 {
		t.Errorf("plain row %+v: want backlog 2, 1 subscription, 1 producer", r)
	}

	h, err := env.b.ConsoleHistory(context.Background(), parted)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Samples) != 1 || h.Samples[0].Backlog != 6 || h.Samples[0].MsgRateIn <= 0 {
		t.Errorf("partitioned history %+v: want one sample with backlog 6 and a rate in", h)
	}
	if h, ok := env.b.ConsoleLocalHistory(plain); !ok || len(h.Samples) != 1 || h.Samples[0].Backlog != 2 {
		t.Errorf("plain topic's local history %+v (%v)", h, ok)
	}
	if _, ok := env.b.ConsoleLocalHistory("persistent://public/default/never-loaded"); ok {
		t.Error("a topic never loaded has a local history")
	}
}

func TestConsoleAlerts(t *testing.T) {
	brokers := []console.BrokerSummary{
		{URL: "http://a", Reachable: true, Bundles: 3, TopicsOverQuota: []string{"persistent://t/n/q"},
			MaxReplicationDelaySeconds: 90, ReplicationDelayTopic: "persistent://t/n/r"},
		{URL: "http://b", Reachable: true},
		{URL: "http://c", Error: "connection refused"},
	}
	bookies := []console.Bookie{
		{ID: "bk1", Reachable: true, ReadOnly: true, Reason: "disk full"},
		{ID: "bk2", Reachable: true, Disks: console.Disks{Dirs: []console.Dir{{Dir: "/j", Journal: true, UsedPercent: 91}}}},
		{ID: "bk3", Error: "timeout"},
		{ID: "bk4", Reachable: true, Disks: console.Disks{Dirs: []console.Dir{{Dir: "/l", UsedPercent: 50}}}},
	}
	var got []string
	for _, a := range alertsOf(brokers, bookies) {
		got = append(got, a.Name+" "+a.Summary)
	}
	want := []string{
		"BacklogOverQuota topic persistent://t/n/q has a backlog over its quota",
		"ReplicationDelay topic persistent://t/n/r replicates 1m30s behind",
		"BrokerWithoutBundles broker http://b owns no bundles",
		"BrokerUnreachable broker http://c does not answer: connection refused",
		"BookieReadOnly bookie bk1 is read-only: disk full",
		"BookieDiskUsage bookie bk2: /j is 91.0% full",
		"BookieUnreachable bookie bk3 does not answer its status: timeout",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("alerts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if a := alertsOf([]console.BrokerSummary{{URL: "http://only", Reachable: true}}, nil); len(a) != 0 {
		t.Errorf("a lone broker without bundles (just started) alerts: %+v", a)
	}
}

// The overview warns of ledgers the auditor marked under-replicated, as
// the MagnetarUnderreplicatedLedgers alert does.
func TestConsoleOverviewUnderreplicated(t *testing.T) {
	store := metadata.NewMemoryServer().NewSession()
	b := New(Config{ClusterName: "c", Metadata: store, ClusterMetadata: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, managedledger.NewMemoryFactory(managedledger.MemoryOptions{}))
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := context.Background()
	o, err := b.ConsoleOverview(ctx)
	if err != nil || len(o.Alerts) != 0 {
		t.Fatalf("overview of a healthy cluster: %+v %v", o.Alerts, err)
	}
	for _, id := range []int64{7, 9} {
		if err := ledger.MarkUnderreplicated(ctx, store, id, []string{"bk1:3181"}); err != nil {
			t.Fatal(err)
		}
	}
	o, err = b.ConsoleOverview(ctx)
	if err != nil || len(o.Alerts) != 1 || o.Alerts[0].Name != "UnderreplicatedLedgers" || !strings.Contains(o.Alerts[0].Summary, "2 ledgers") {
		t.Errorf("overview with 2 marked ledgers: %+v %v", o.Alerts, err)
	}
}
