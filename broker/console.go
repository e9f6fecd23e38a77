package broker

// The web console's figures (package broker/console reads them through
// console.Source): this broker's own from its loaded topics, the
// cluster's gathered from every registered broker's
// /console/api/local/... endpoints with the caller's credentials (or the
// broker's, brokerClientAuthentication*), so each broker authorizes its
// part as it authorizes the whole. A broker that does not answer within
// consolePeerTimeout is shown unreachable rather than holding the page.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/console"
	"github.com/magnetar-io/magnetar/ledger"
)

// consolePeerTimeout bounds one call to another broker or a bookie for a
// console page.
const consolePeerTimeout = 5 * time.Second

// diskWarnPercent is the disk usage the overview warns at: BookKeeper's
// default diskUsageWarnThreshold (0.95 is where it turns read-only).
const diskWarnPercent = 90

// replicationDelayWarn is the replication delay the overview warns at.
const replicationDelayWarn = 60 * time.Second

// consoleHandler serves /console on the broker's web port; root is the
// broker's whole HTTP handler, which the console's admin passthrough
// dispatches into.
func (b *Broker) consoleHandler(root http.Handler) http.Handler {
	return console.Handler(console.Config{Source: b, ReadOnly: b.cfg.ConsoleReadOnly, Admin: root,
		Redirects: b.peers.HTTPClient(), StatusOf: admin.StatusOf, Logger: b.log})
}

// ConsoleSession describes the caller (console.Source).
func (b *Broker) ConsoleSession(r *http.Request) (console.Session, error) {
	s := console.Session{Cluster: b.cfg.ClusterName, Version: b.cfg.Version, AuthMethods: []string{}, SuperUser: true}
	if b.cfg.Authentication != nil {
		s.AuthEnabled = true
		s.AuthMethods = b.cfg.Authentication.Methods()
	}
	subject, err := b.httpSubject(r)
	if err != nil {
		return s, err
	}
	s.Role = subject.Role
	if z := b.cfg.Authorization; z != nil {
		s.SuperUser = z.AllowSuperUserAs(subject, "use the console as superuser") == nil
	}
	return s, nil
}

// sampleHistory records every loaded topic's figures for the console's
// charts (every console.HistoryInterval).
func (b *Broker) sampleHistory() {
	now := time.Now()
	for t := range b.topicPass() {
		t.history.Record(t.consoleCounters(), now)
	}
}

// consoleCounters are a topic's counters and sizes; its backlog is its
// slowest durable subscription's, as the topic stats' backlogSize.
func (t *topic) consoleCounters() console.Counters {
	c := console.Counters{MsgsIn: t.stats.msgsIn.Load(), MsgsOut: t.stats.msgsOut.Load(),
		BytesIn: t.stats.bytesIn.Load(), BytesOut: t.stats.bytesOut.Load(), StorageSize: t.ml.Size()}
	for _, cur := range t.subscriptionCursors() {
		if cur.Durable() {
			c.Backlog = max(c.Backlog, cur.Backlog())
		}
	}
	return c
}

// latestRates are a topic's rates over the last history interval.
func (t *topic) latestRates() console.Rates { return t.history.Last().Rates }

// ConsoleLocalHistory is a loaded topic's samples (console.Source).
func (b *Broker) ConsoleLocalHistory(name string) (console.History, bool) {
	tn, err := ParseTopicName(name)
	if err != nil {
		return console.History{}, false
	}
	t := b.loadedTopic(tn)
	if t == nil {
		return console.History{}, false
	}
	return t.history.Snapshot(), true
}

// ConsoleHistory is a topic's samples from the broker that serves it, a
// partitioned topic's partitions summed (console.Source).
func (b *Broker) ConsoleHistory(ctx context.Context, name string) (console.History, error) {
	tn, err := adminTopic(name)
	if err != nil {
		return console.History{}, err
	}
	n, err := b.partitions(ctx, tn)
	if err != nil {
		return console.History{}, err
	}
	if n == 0 {
		return b.historyOf(ctx, tn)
	}
	hs := make([]console.History, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { hs[i], errs[i] = b.historyOf(ctx, partitionName(tn, i)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return console.History{}, err
		}
	}
	return console.SumHistories(hs), nil
}

// historyOf is one topic's samples: here if it is loaded here, else from
// its bundle's owner, empty when no broker serves it.
func (b *Broker) historyOf(ctx context.Context, tn TopicName) (console.History, error) {
	empty := console.History{IntervalSeconds: int(console.HistoryInterval / time.Second), Samples: []console.Sample{}}
	if h, ok := b.ConsoleLocalHistory(tn.String()); ok {
		return h, nil
	}
	owner, ok, err := b.ownerURL(ctx, tn)
	if err != nil || !ok {
		return empty, err
	}
	var h console.History
	err = b.callPeer(ctx, owner+"/console/api/local/history/"+consolePath(tn), &h)
	if admin.StatusOf(err) == http.StatusNotFound {
		return empty, nil
	}
	return h, err
}

// consolePath is domain/tenant/namespace/local, escaped.
func consolePath(tn TopicName) string {
	return tn.Domain + "/" + url.PathEscape(tn.Tenant) + "/" + url.PathEscape(tn.Namespace) + "/" + url.PathEscape(tn.Local)
}

// ownerURL is the web URL of the broker owning tn's bundle, when another
// broker owns it.
func (b *Broker) ownerURL(ctx context.Context, tn TopicName) (string, bool, error) {
	own := b.Ownership()
	if own == nil {
		return "", false, nil
	}
	ns := tn.Tenant + "/" + tn.Namespace
	if own.OwnsTopic(ns, tn.String()) {
		return "", false, nil
	}
	bundle, err := own.BundleOf(ctx, ns, tn.String())
	if err != nil {
		return "", false, err
	}
	od, found, err := own.Owner(ctx, bundle)
	if err != nil || !found {
		return "", false, err
	}
	if b.peers.TLS != nil && od.HTTPURLTLS != "" {
		return od.HTTPURLTLS, true, nil
	}
	return od.HTTPURL, od.HTTPURL != "", nil
}

// callPeer GETs a console endpoint of another broker.
func (b *Broker) callPeer(ctx context.Context, target string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, consolePeerTimeout)
	defer cancel()
	return b.peers.CallBroker(ctx, http.MethodGet, target, out)
}

// peerBroker is a registered broker: its id and web URL; self is this
// broker.
type peerBroker struct {
	url  string
	self bool
}

// consoleBrokers lists the cluster's registered brokers (this broker
// alone without an ownership service).
func (b *Broker) consoleBrokers(ctx context.Context) ([]peerBroker, error) {
	own := b.Ownership()
	if own == nil {
		return []peerBroker{{url: b.selfWebURL(), self: true}}, nil
	}
	all, err := own.Brokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list brokers: %w", err)
	}
	out := make([]peerBroker, 0, len(all))
	for id, d := range all {
		u := d.WebServiceURL
		if b.peers.TLS != nil && d.WebServiceURLTLS != "" {
			u = d.WebServiceURLTLS
		}
		out = append(out, peerBroker{url: u, self: id == own.ID()})
	}
	slices.SortFunc(out, func(x, y peerBroker) int { return cmp.Compare(x.url, y.url) })
	return out, nil
}

// eachBroker calls fn for every broker at once (self with ok=true and no
// URL call) and waits for all.
func eachBroker[T any](brokers []peerBroker, fn func(p peerBroker) (T, error)) ([]T, []error) {
	vals := make([]T, len(brokers))
	errs := make([]error, len(brokers))
	var wg sync.WaitGroup
	for i, p := range brokers {
		wg.Go(func() { vals[i], errs[i] = fn(p) })
	}
	wg.Wait()
	return vals, errs
}

// ConsoleSummary is this broker's part of the overview (console.Source).
func (b *Broker) ConsoleSummary(context.Context) (console.BrokerSummary, error) {
	s := console.BrokerSummary{URL: b.selfWebURL(), Reachable: true, TopicsOverQuota: []string{}}
	if own := b.Ownership(); own != nil {
		s.Bundles = len(own.Owned())
	}
	now := time.Now()
	for _, t := range b.loadedTopics() {
		s.Topics++
		s.Rates.Add(t.latestRates())
		c := t.consoleCounters()
		s.StorageSize += c.StorageSize
		s.Backlog += c.Backlog
		if t.overQuota() {
			s.TopicsOverQuota = append(s.TopicsOverQuota, t.name.String())
		}
		for _, r := range t.replicationStats(now) {
			if r.ReplicationDelayInSeconds > s.MaxReplicationDelaySeconds {
				s.MaxReplicationDelaySeconds, s.ReplicationDelayTopic = r.ReplicationDelayInSeconds, t.name.String()
			}
		}
	}
	slices.Sort(s.TopicsOverQuota)
	return s, nil
}

// ConsoleOverview gathers every broker's summary and every bookie's state
// (console.Source).
func (b *Broker) ConsoleOverview(ctx context.Context) (console.Overview, error) {
	brokers, err := b.consoleBrokers(ctx)
	if err != nil {
		return console.Overview{}, err
	}
	summaries, errs := eachBroker(brokers, func(p peerBroker) (console.BrokerSummary, error) {
		if p.self {
			return b.ConsoleSummary(ctx)
		}
		var s console.BrokerSummary
		err := b.callPeer(ctx, p.url+"/console/api/local/summary", &s)
		return s, err
	})
	for i := range summaries {
		if errs[i] != nil {
			summaries[i] = console.BrokerSummary{URL: brokers[i].url, Error: errs[i].Error(), TopicsOverQuota: []string{}}
		}
		summaries[i].URL = brokers[i].url
	}
	bookies, err := b.consoleBookies(ctx)
	if err != nil {
		return console.Overview{}, err
	}
	o := console.Overview{Cluster: b.cfg.ClusterName, Brokers: summaries, Bookies: bookies}
	o.Totals = totalsOf(summaries, bookies)
	o.Alerts = alertsOf(summaries, bookies)
	if n := b.underreplicatedLedgers(ctx); n > 0 {
		o.Alerts = append(o.Alerts, console.Alert{Severity: "warning", Name: "UnderreplicatedLedgers",
			Summary: fmt.Sprintf("%d ledgers have replicas on lost bookies and wait for re-replication", n)})
	}
	return o, nil
}

// underreplicatedLedgers counts the ledgers the auditor marked (0 without
// a bookie registry or when the store does not answer: the overview
// shows what it can).
func (b *Broker) underreplicatedLedgers(ctx context.Context) int {
	if b.cfg.ClusterMetadata == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, consolePeerTimeout)
	defer cancel()
	ids, err := ledger.ListUnderreplicated(ctx, b.cfg.ClusterMetadata)
	if err != nil {
		return 0
	}
	return len(ids)
}

func totalsOf(brokers []console.BrokerSummary, bookies []console.Bookie) console.Totals {
	t := console.Totals{Brokers: len(brokers), Bookies: len(bookies)}
	for _, s := range brokers {
		t.Bundles += s.Bundles
		t.Topics += s.Topics
		t.Rates.Add(s.Rates)
		t.StorageSize += s.StorageSize
		t.Backlog += s.Backlog
	}
	for _, bk := range bookies {
		if !bk.ReadOnly && bk.Reachable {
			t.WritableBookies++
		}
	}
	return t
}

// alertsOf is what the overview warns about: the conditions of
// conf/prometheus/alerts.yml that one broker can see without Prometheus.
func alertsOf(brokers []console.BrokerSummary, bookies []console.Bookie) []console.Alert {
	out := []console.Alert{}
	add := func(sev, name, format string, args ...any) {
		out = append(out, console.Alert{Severity: sev, Name: name, Summary: fmt.Sprintf(format, args...)})
	}
	for _, s := range brokers {
		switch {
		case !s.Reachable:
			add("critical", "BrokerUnreachable", "broker %s does not answer: %s", s.URL, s.Error)
			continue
		case s.Bundles == 0 && len(brokers) > 1:
			add("warning", "BrokerWithoutBundles", "broker %s owns no bundles", s.URL)
		}
		for _, t := range s.TopicsOverQuota {
			add("warning", "BacklogOverQuota", "topic %s has a backlog over its quota", t)
		}
		if d := time.Duration(s.MaxReplicationDelaySeconds) * time.Second; d >= replicationDelayWarn {
			add("warning", "ReplicationDelay", "topic %s replicates %s behind", s.ReplicationDelayTopic, d)
		}
	}
	for _, bk := range bookies {
		switch {
		case !bk.Reachable && bk.Error != "":
			add("warning", "BookieUnreachable", "bookie %s does not answer its status: %s", bk.ID, bk.Error)
		case bk.ReadOnly:
			add("critical", "BookieReadOnly", "bookie %s is read-only: %s", bk.ID, bk.Reason)
		}
		for _, d := range bk.Dirs {
			if d.UsedPercent >= diskWarnPercent {
				add("warning", "BookieDiskUsage", "bookie %s: %s is %.1f%% full", bk.ID, d.Dir, d.UsedPercent)
			}
		}
	}
	return out
}

// ConsoleBookies lists the registered bookies with their disks (console.Source).
func (b *Broker) ConsoleBookies(ctx context.Context) ([]console.Bookie, error) {
	return b.consoleBookies(ctx)
}

// consoleBookies is every registered bookie's state; none without a
// cluster metadata store (a broker whose topics are not on bookies).
func (b *Broker) consoleBookies(ctx context.Context) ([]console.Bookie, error) {
	store := b.cfg.ClusterMetadata
	if store == nil {
		return []console.Bookie{}, nil
	}
	regs, err := registry.Bookies(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("read the bookie registry: %w", err)
	}
	out := make([]console.Bookie, len(regs))
	var wg sync.WaitGroup
	for i, reg := range regs {
		wg.Go(func() { out[i] = b.bookieStatus(ctx, reg) })
	}
	wg.Wait()
	slices.SortFunc(out, func(x, y console.Bookie) int { return cmp.Compare(x.ID, y.ID) })
	return out, nil
}

// bookieInfo is a bookie's /api/v1/bookie/info answer.
type bookieInfo struct {
	FreeSpace   int64 `json:"freeSpace"`
	TotalSpace  int64 `json:"totalSpace"`
	Directories []struct {
		Dir     string
		Journal bool
		Used    float64
	} `json:"directories"`
}

// bookieStatus is a registration with the disk usage the bookie reports
// on its HTTP port (BookKeeper's /api/v1/bookie/info).
func (b *Broker) bookieStatus(ctx context.Context, reg registry.Registration) console.Bookie {
	bk := console.Bookie{ID: reg.BookieID, ReadOnly: reg.ReadOnly, Reason: reg.ReadOnlyReason, OutOfSpace: reg.OutOfSpace,
		Reachable: true, Disks: console.Disks{Dirs: []console.Dir{}}}
	if reg.HTTPAddress == "" {
		if b.cfg.InProcessBookieDisks != nil {
			bk.Disks = b.cfg.InProcessBookieDisks()
		}
		return bk
	}
	ctx, cancel := context.WithTimeout(ctx, consolePeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+reg.HTTPAddress+"/api/v1/bookie/info", nil)
	if err != nil {
		bk.Reachable, bk.Error = false, err.Error()
		return bk
	}
	resp, err := b.peers.HTTPClient().Do(req)
	if err != nil {
		bk.Reachable, bk.Error = false, err.Error()
		return bk
	}
	defer resp.Body.Close()
	var info bookieInfo
	if resp.StatusCode != http.StatusOK {
		bk.Reachable, bk.Error = false, "status "+resp.Status
		return bk
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		bk.Reachable, bk.Error = false, "decode /api/v1/bookie/info: "+err.Error()
		return bk
	}
	bk.FreeBytes, bk.TotalBytes = info.FreeSpace, info.TotalSpace
	for _, d := range info.Directories {
		bk.Dirs = append(bk.Dirs, console.Dir{Dir: d.Dir, Journal: d.Journal, UsedPercent: 100 * d.Used})
	}
	return bk
}

// consoleCounts are a topic's producers, subscriptions (with consumers
// or not, durable cursors and readers, as its stats list them) and
// consumers.
func (t *topic) consoleCounts() (producers, subscriptions, consumers int) {
	t.mu.Lock()
	producers = len(t.producers)
	names := make(map[string]bool, len(t.subs))
	subs := make([]*subscription, 0, len(t.subs)+len(t.readers))
	for name, s := range t.subs {
		names[name] = true
		subs = append(subs, s)
	}
	for s := range t.readers {
		subs = append(subs, s)
	}
	readers := len(t.readers)
	t.mu.Unlock()
	for _, c := range t.subscriptionCursors() {
		if c.Durable() {
			names[c.Name()] = true
		}
	}
	for _, s := range subs {
		s.mu.Lock()
		consumers += len(s.consumers)
		s.mu.Unlock()
	}
	return producers, len(names) + readers, consumers
}

// ConsoleLocalTopics are the namespace's topics loaded here
// (console.Source).
func (b *Broker) ConsoleLocalTopics(_ context.Context, tenant, ns string) ([]console.TopicRow, error) {
	out := []console.TopicRow{}
	now := time.Now()
	for _, t := range b.loadedTopics() {
		if t.name.Tenant != tenant || t.name.Namespace != ns {
			continue
		}
		c := t.consoleCounters()
		row := console.TopicRow{Name: t.name.String(), Rates: t.latestRates(), Backlog: c.Backlog,
			StorageSize: c.StorageSize, Loaded: true, Replication: map[string]console.Replication{}}
		row.Producers, row.Subscriptions, row.Consumers = t.consoleCounts()
		for c, r := range t.replicationStats(now) {
			row.Replication[c] = console.Replication{Connected: r.Connected, MsgRateOut: r.MsgRateOut,
				ReplicationBacklog: r.ReplicationBacklog, ReplicationDelayInSeconds: r.ReplicationDelayInSeconds}
		}
		out = append(out, row)
	}
	return out, nil
}

// ConsoleTopics lists the namespace's topics, persistent and not, with
// the figures of every broker that has them loaded; a partitioned
// topic is one row (console.Source).
func (b *Broker) ConsoleTopics(ctx context.Context, tenant, ns string) ([]console.TopicRow, error) {
	rows := map[string]*console.TopicRow{}
	partitioned := map[string]bool{}
	for _, domain := range []string{"persistent", "non-persistent"} {
		pts, err := b.PartitionedTopics(ctx, domain, tenant, ns)
		if err != nil {
			return nil, err
		}
		for _, name := range pts {
			partitioned[name] = true
			n, err := b.Partitions(ctx, name)
			if err != nil {
				return nil, err
			}
			rows[name] = &console.TopicRow{Name: name, Partitions: n, Replication: map[string]console.Replication{}}
		}
		names, err := b.DomainTopics(ctx, domain, tenant, ns)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if _, ok := rows[rowName(name, partitioned)]; !ok {
				rows[name] = &console.TopicRow{Name: name, Replication: map[string]console.Replication{}}
			}
		}
	}
	brokers, err := b.consoleBrokers(ctx)
	if err != nil {
		return nil, err
	}
	path := "/console/api/local/namespaces/" + url.PathEscape(tenant) + "/" + url.PathEscape(ns) + "/topics"
	local, errs := eachBroker(brokers, func(p peerBroker) ([]console.TopicRow, error) {
		if p.self {
			return b.ConsoleLocalTopics(ctx, tenant, ns)
		}
		var rs []console.TopicRow
		err := b.callPeer(ctx, p.url+path, &rs)
		return rs, err
	})
	for i, rs := range local {
		if errs[i] != nil {
			b.log.Warn("console: a broker did not list its topics", "broker", brokers[i].url, "err", errs[i])
			continue
		}
		for _, r := range rs {
			name := rowName(r.Name, partitioned)
			row, ok := rows[name]
			if !ok { // loaded but not listed yet (a non-persistent topic, a race with its creation)
				row = &console.TopicRow{Name: name, Replication: map[string]console.Replication{}}
				rows[name] = row
			}
			row.Add(r)
		}
	}
	out := make([]console.TopicRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(x, y console.TopicRow) int { return cmp.Compare(x.Name, y.Name) })
	return out, nil
}

// rowName is the row a topic's figures go to: a partition's to its
// partitioned topic.
func rowName(name string, partitioned map[string]bool) string {
	if i := strings.LastIndex(name, partitionSuffix); i > 0 && partitioned[name[:i]] {
		return name[:i]
	}
	return name
}

var _ console.Source = (*Broker)(nil)

// selfWebURL is this broker's web URL as its load report names it
// ("" before it has an ownership service).
func (b *Broker) selfWebURL() string {
	if own := b.Ownership(); own != nil {
		return own.Report().WebServiceURL
	}
	return ""
}
