package broker

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/magnetar-io/magnetar/managedledger"
)

// topicStats counts a topic's traffic; updated without locks on the hot
// path.
type topicStats struct {
	msgsIn, bytesIn, msgsOut, bytesOut atomic.Int64
	// msgsDropped counts the messages of a non-persistent topic a
	// subscription could not take when they were published.
	msgsDropped atomic.Int64
	// lastPublishMs is the publish time of the last message stored here
	// (0: none yet since the topic loaded; stats read it from storage).
	lastPublishMs atomic.Int64
}

// Metrics exports per-topic metrics under Pulsar's names and labels
// (cluster, namespace, topic), so existing dashboards work. Rates are
// computed over the time since the previous scrape.
//
// It is a prometheus.Collector of every series. A /metrics handler that
// serves many topics uses TopicsAsText instead (metricstext.go): through
// the collector, 10,000 topics' 200,000 samples cost some 2 s of CPU per
// scrape (a const metric each, sorted and encoded by the registry).
//
// Lock rules: mu guards last and topicsAsText.
type Metrics struct {
	b            *Broker
	mu           sync.Mutex
	last         map[string]rateSample
	topicsAsText bool // Collect leaves the topic series to WriteTopics
	// byNamespace (exposeTopicLevelMetricsInPrometheus=false): the topic
	// families are summed per namespace.
	byNamespace bool
}

type rateSample struct {
	at                                              time.Time
	msgsIn, bytesIn, msgsOut, bytesOut, msgsDropped int64
}

// NewMetrics returns a collector for b; register it with a Prometheus
// registry.
func NewMetrics(b *Broker) *Metrics {
	return &Metrics{b: b, last: map[string]rateSample{}, byNamespace: b.cfg.MetricsByNamespace}
}

var (
	topicLabels   = []string{"cluster", "namespace", "topic"}
	replLabels    = []string{"cluster", "namespace", "topic", "remote_cluster"}
	nsLabels      = []string{"cluster", "namespace"}
	nsReplLabels  = []string{"cluster", "namespace", "remote_cluster"}
	nsTopicsCount = newSeries("pulsar_topics_count", "Topics of the namespace loaded here.", prometheus.GaugeValue, nsLabels)

	descOwnedBundles = prometheus.NewDesc("magnetar_broker_owned_bundles", "Namespace bundles this broker owns.", []string{"cluster"}, nil)
	descPanics       = prometheus.NewDesc("magnetar_broker_recovered_panics_total",
		"Panics recovered at a boundary (command, goroutine, http, metrics): each is a bug, logged with its stack.",
		[]string{"boundary"}, nil)
)

// series is one family of per-topic series: its name, help and type for
// the text writer, and its Desc for the collector.
type series struct {
	name, help string
	typ        prometheus.ValueType
	desc       *prometheus.Desc
	// byMax: a namespace's sum (MetricsByNamespace) takes the largest of
	// its topics' values, where the others add up (a quota, a delay).
	byMax bool
}

func newSeries(name, help string, typ prometheus.ValueType, labels []string) series {
	return series{name: name, help: help, typ: typ, desc: prometheus.NewDesc(name, help, labels, nil)}
}

// summedByMax is s summed per namespace as the largest value.
func summedByMax(s series) series {
	s.byMax = true
	return s
}

// add is v added into a namespace's sum of the series.
func (s series) add(sum, v float64) float64 {
	if s.byMax {
		return max(sum, v)
	}
	return sum + v
}

// The per-topic families, in the order they are written.
const (
	sRateIn = iota
	sRateOut
	sTputIn
	sTputOut
	sInTotal
	sOutTotal
	sInBytes
	sOutBytes
	sStorage
	sTbActive
	sTbCommitted
	sTbAborted
	sOffloaded
	sCompactSucceeded
	sCompactFailed
	sCompactRemoved
	sCompactEntries
	sBacklog
	sBacklogSize
	sBacklogQuota
	sProducers
	sConsumers
	sSubs
	numTopicSeries
)

var topicSeries = [numTopicSeries]series{
	sRateIn:      newSeries("pulsar_rate_in", "Messages/s published to the topic.", prometheus.GaugeValue, topicLabels),
	sRateOut:     newSeries("pulsar_rate_out", "Messages/s dispatched from the topic.", prometheus.GaugeValue, topicLabels),
	sTputIn:      newSeries("pulsar_throughput_in", "Bytes/s published to the topic.", prometheus.GaugeValue, topicLabels),
	sTputOut:     newSeries("pulsar_throughput_out", "Bytes/s dispatched from the topic.", prometheus.GaugeValue, topicLabels),
	sInTotal:     newSeries("pulsar_in_messages_total", "Messages published to the topic.", prometheus.CounterValue, topicLabels),
	sOutTotal:    newSeries("pulsar_out_messages_total", "Messages dispatched from the topic.", prometheus.CounterValue, topicLabels),
	sInBytes:     newSeries("pulsar_in_bytes_total", "Bytes published to the topic.", prometheus.CounterValue, topicLabels),
	sOutBytes:    newSeries("pulsar_out_bytes_total", "Bytes dispatched from the topic.", prometheus.CounterValue, topicLabels),
	sStorage:     newSeries("pulsar_storage_size", "Bytes stored for the topic.", prometheus.GaugeValue, topicLabels),
	sTbActive:    newSeries("pulsar_txn_tb_active_total", "Transactions with messages in the topic that have not ended.", prometheus.GaugeValue, topicLabels),
	sTbCommitted: newSeries("pulsar_txn_tb_committed_total", "Transactions committed on the topic since it loaded.", prometheus.CounterValue, topicLabels),
	sTbAborted:   newSeries("pulsar_txn_tb_aborted_total", "Transactions aborted on the topic since it loaded.", prometheus.CounterValue, topicLabels),
	sOffloaded: newSeries("pulsar_storage_offloaded_size", "Bytes of the topic's ledgers copied to tiered storage (read from there).",
		prometheus.GaugeValue, topicLabels),
	// Compaction (Pulsar's names), for topics compacted at least once.
	sCompactSucceeded: newSeries("pulsar_compaction_succeed_count", "Compactions of the topic that succeeded.", prometheus.CounterValue, topicLabels),
	sCompactFailed:    newSeries("pulsar_compaction_failed_count", "Compactions of the topic that failed.", prometheus.CounterValue, topicLabels),
	sCompactRemoved: newSeries("pulsar_compaction_removed_event_count", "Messages compactions of the topic left out (superseded or deleted keys).",
		prometheus.CounterValue, topicLabels),
	sCompactEntries: newSeries("pulsar_compaction_compacted_entries_count", "Entries of the topic's compacted ledger.", prometheus.GaugeValue, topicLabels),
	sBacklog:        newSeries("pulsar_msg_backlog", "Entries not yet acknowledged, summed over subscriptions.", prometheus.GaugeValue, topicLabels),
	sBacklogSize: newSeries("pulsar_storage_backlog_size",
		"Bytes of the largest backlog of a durable subscription or replicator: what the backlog quota is checked against.",
		prometheus.GaugeValue, topicLabels),
	sBacklogQuota: summedByMax(newSeries("pulsar_storage_backlog_quota_limit", "The topic's backlog quota in bytes (exported when one is set).",
		prometheus.GaugeValue, topicLabels)),
	sProducers: newSeries("pulsar_producers_count", "Connected producers.", prometheus.GaugeValue, topicLabels),
	sConsumers: newSeries("pulsar_consumers_count", "Connected consumers.", prometheus.GaugeValue, topicLabels),
	sSubs:      newSeries("pulsar_subscriptions_count", "Subscriptions.", prometheus.GaugeValue, topicLabels),
}

// Replication, per remote cluster (Pulsar's names; rates over the stats
// interval, as topic stats show them).
const (
	rRateIn = iota
	rRateOut
	rTputIn
	rTputOut
	rBacklog
	rDelay
	numReplSeries
)

var replSeries = [numReplSeries]series{
	rRateIn:  newSeries("pulsar_replication_rate_in", "Messages/s stored here by the remote cluster's replicator.", prometheus.GaugeValue, replLabels),
	rRateOut: newSeries("pulsar_replication_rate_out", "Messages/s replicated to the remote cluster.", prometheus.GaugeValue, replLabels),
	rTputIn:  newSeries("pulsar_replication_throughput_in", "Bytes/s stored here by the remote cluster's replicator.", prometheus.GaugeValue, replLabels),
	rTputOut: newSeries("pulsar_replication_throughput_out", "Bytes/s replicated to the remote cluster.", prometheus.GaugeValue, replLabels),
	rBacklog: newSeries("pulsar_replication_backlog", "Entries not yet replicated to the remote cluster.", prometheus.GaugeValue, replLabels),
	rDelay: summedByMax(newSeries("pulsar_replication_delay_in_seconds", "Age of the oldest entry not yet confirmed by the remote cluster.",
		prometheus.GaugeValue, replLabels)),
}

// nsTopicSeries and nsReplSeries are the same families summed per
// namespace (MetricsByNamespace), without the topic label.
var nsTopicSeries, nsReplSeries = namespaceSeries()

func namespaceSeries() (topics [numTopicSeries]series, repl [numReplSeries]series) {
	for i, s := range topicSeries {
		topics[i] = s
		topics[i].desc = prometheus.NewDesc(s.name, s.help, nsLabels, nil)
	}
	for i, s := range replSeries {
		repl[i] = s
		repl[i].desc = prometheus.NewDesc(s.name, s.help, nsReplLabels, nil)
	}
	return topics, repl
}

// topicSample is one topic's values at a scrape: has says which families
// it has a series in (a topic never compacted has no compaction series:
// 10,000 topics would otherwise add 40,000 zero ones).
type topicSample struct {
	cluster, namespace, topic string
	values                    [numTopicSeries]float64
	has                       [numTopicSeries]bool
	repl                      []replSample // by remote cluster
	// topics > 0 marks a namespace's sum (topic is empty): its topics.
	topics int
}

type replSample struct {
	remote string
	values [numReplSeries]float64
}

func (s *topicSample) set(i int, v float64) { s.values[i], s.has[i] = v, true }

// series returns the topic and replication families of m's mode.
func (m *Metrics) series() (topics *[numTopicSeries]series, repl *[numReplSeries]series) {
	if m.byNamespace {
		return &nsTopicSeries, &nsReplSeries
	}
	return &topicSeries, &replSeries
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	topics, repl := m.series()
	for _, s := range topics {
		ch <- s.desc
	}
	for _, s := range repl {
		ch <- s.desc
	}
	if m.byNamespace {
		ch <- nsTopicsCount.desc
	}
	ch <- descOwnedBundles
	ch <- descPanics
	for _, d := range txnDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Prometheus runs collectors on
// goroutines of its own, where a panic would end the process: one
// topic's failure costs that topic's series of this scrape only.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	asText := m.topicsAsText
	m.mu.Unlock()
	if !asText {
		for _, s := range m.samples(time.Now()) {
			m.emitTopic(ch, s)
		}
	}
	m.collectCoordinators(ch)
	if own := m.b.Ownership(); own != nil {
		ch <- prometheus.MustNewConstMetric(descOwnedBundles, prometheus.GaugeValue, float64(len(own.Owned())), m.b.cfg.ClusterName)
	}
	for b := range numBoundaries {
		ch <- prometheus.MustNewConstMetric(descPanics, prometheus.CounterValue, float64(m.b.panics.get(b)), b.String())
	}
}

// samples are the topics' samples, or their namespaces' sums.
func (m *Metrics) samples(now time.Time) []topicSample {
	s := m.sampleTopics(now)
	if m.byNamespace {
		return sumByNamespace(s)
	}
	return s
}

// sampleTopics samples every loaded topic, and forgets the rate samples
// of topics that are gone.
func (m *Metrics) sampleTopics(now time.Time) []topicSample {
	var out []topicSample
	for t := range m.b.topicPass() {
		if s, ok := m.sampleTopicSafely(t, now); ok {
			out = append(out, s)
		}
	}
	loaded := make(map[string]bool, len(out))
	for _, s := range out {
		loaded[s.topic] = true
	}
	m.mu.Lock()
	for name := range m.last {
		if !loaded[name] {
			delete(m.last, name)
		}
	}
	m.mu.Unlock()
	return out
}

func (m *Metrics) sampleTopicSafely(t *topic, now time.Time) (s topicSample, ok bool) {
	// A panic leaves ok false: that topic's series are left out.
	defer func() { _ = m.b.recovered(recover(), boundaryMetrics, m.b.log, "topic", t.name.String()) }()
	return m.sampleTopic(t, now), true
}

// sampleTopic reads t's values, and keeps its traffic counters for the
// next scrape's rates.
func (m *Metrics) sampleTopic(t *topic, now time.Time) topicSample {
	s := topicSample{cluster: m.b.cfg.ClusterName, namespace: t.name.Tenant + "/" + t.name.Namespace, topic: t.name.String()}
	cur := rateSample{at: now, msgsIn: t.stats.msgsIn.Load(), bytesIn: t.stats.bytesIn.Load(),
		msgsOut: t.stats.msgsOut.Load(), bytesOut: t.stats.bytesOut.Load()}
	prev, ok := m.swapRateSample(s.topic, cur)
	rate := func(i int, a, b int64) {
		v := 0.0
		if secs := now.Sub(prev.at).Seconds(); ok && secs > 0 {
			v = float64(a-b) / secs
		}
		s.set(i, v)
	}
	rate(sRateIn, cur.msgsIn, prev.msgsIn)
	rate(sRateOut, cur.msgsOut, prev.msgsOut)
	rate(sTputIn, cur.bytesIn, prev.bytesIn)
	rate(sTputOut, cur.bytesOut, prev.bytesOut)
	s.set(sInTotal, float64(cur.msgsIn))
	s.set(sOutTotal, float64(cur.msgsOut))
	s.set(sInBytes, float64(cur.bytesIn))
	s.set(sOutBytes, float64(cur.bytesOut))
	producers, consumers, subs, backlog := t.counts()
	s.set(sStorage, float64(t.ml.Size()))
	sampleTxnBuffer(&s, t)
	if o, ok := t.ml.(managedledger.Offloadable); ok {
		s.set(sOffloaded, float64(o.OffloadedSize()))
	}
	sampleCompaction(&s, t)
	s.set(sBacklog, float64(backlog))
	backlogBytes, quota := t.backlogBytes()
	s.set(sBacklogSize, float64(backlogBytes))
	if quota > 0 {
		s.set(sBacklogQuota, float64(quota))
	}
	s.set(sProducers, float64(producers))
	s.set(sConsumers, float64(consumers))
	s.set(sSubs, float64(subs))
	for remote, r := range t.replicationStats(now) {
		s.repl = append(s.repl, replSample{remote: remote, values: [numReplSeries]float64{
			rRateIn: r.MsgRateIn, rRateOut: r.MsgRateOut, rTputIn: r.MsgThroughputIn, rTputOut: r.MsgThroughputOut,
			rBacklog: float64(r.ReplicationBacklog), rDelay: float64(r.ReplicationDelayInSeconds)}})
	}
	slices.SortFunc(s.repl, func(a, b replSample) int { return strings.Compare(a.remote, b.remote) })
	return s
}

// swapRateSample keeps cur as topic's traffic counters and returns the
// ones kept by the last scrape (ok false: none). The unlock is deferred: a
// panic here (recovered by the caller) must not leave mu held.
func (m *Metrics) swapRateSample(topic string, cur rateSample) (prev rateSample, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, ok = m.last[topic]
	m.last[topic] = cur
	return prev, ok
}

// emitTopic sends s's series as const metrics.
func (m *Metrics) emitTopic(ch chan<- prometheus.Metric, s topicSample) {
	topics, repl := m.series()
	labels := []string{s.cluster, s.namespace, s.topic}
	if s.topics > 0 {
		labels = labels[:2]
		m.emit(ch, nsTopicsCount.desc, nsTopicsCount.typ, float64(s.topics), labels)
	}
	for i, def := range topics {
		if s.has[i] {
			m.emit(ch, def.desc, def.typ, s.values[i], labels)
		}
	}
	for _, r := range s.repl {
		rl := append(slices.Clone(labels), r.remote)
		for i, def := range repl {
			m.emit(ch, def.desc, def.typ, r.values[i], rl)
		}
	}
}

// sumByNamespace sums samples per namespace: a family is in a namespace's
// sum when one of its topics has it, summed as its series says (add).
func sumByNamespace(samples []topicSample) []topicSample {
	index := map[string]int{}
	var out []topicSample
	for _, s := range samples {
		i, ok := index[s.namespace]
		if !ok {
			i = len(out)
			index[s.namespace] = i
			out = append(out, topicSample{cluster: s.cluster, namespace: s.namespace})
		}
		sum := &out[i]
		sum.topics++
		for f := range numTopicSeries {
			if !s.has[f] {
				continue
			}
			sum.values[f] = topicSeries[f].add(sum.values[f], s.values[f])
			sum.has[f] = true
		}
		for _, r := range s.repl {
			sum.repl = addRepl(sum.repl, r)
		}
	}
	for i := range out {
		slices.SortFunc(out[i].repl, func(a, b replSample) int { return strings.Compare(a.remote, b.remote) })
	}
	return out
}

func addRepl(sums []replSample, r replSample) []replSample {
	for i := range sums {
		if sums[i].remote == r.remote {
			for f := range numReplSeries {
				sums[i].values[f] = replSeries[f].add(sums[i].values[f], r.values[f])
			}
			return sums
		}
	}
	return append(sums, r)
}

// emit sends one sample; one that cannot be made (a label Prometheus
// refuses) is logged and skipped, never a panic.
func (m *Metrics) emit(ch chan<- prometheus.Metric, d *prometheus.Desc, typ prometheus.ValueType, v float64, labels []string) {
	s, err := prometheus.NewConstMetric(d, typ, v, labels...)
	if err != nil {
		m.b.log.Warn("metric sample skipped", "labels", labels, "err", err)
		return
	}
	ch <- s
}

// counts returns the topic's producers, consumers, subscriptions and
// backlog (entries, over all subscriptions).
func (t *topic) counts() (producers, consumers, subs int, backlog int64) {
	t.mu.Lock()
	producers = len(t.producers)
	t.mu.Unlock()
	all := t.durableSubs()
	subs = len(all)
	for _, s := range all {
		s.mu.Lock()
		consumers += len(s.consumers)
		s.mu.Unlock()
		backlog += s.cursor.Backlog()
	}
	return producers, consumers, subs, backlog
}

// backlogBytes is the largest backlog of a durable subscription or a
// replicator, in bytes, and the backlog quota (0: none), as the quota
// check sees them (backlogquota.go).
func (t *topic) backlogBytes() (backlog, quota int64) {
	for _, s := range t.durableSubs() {
		backlog = max(backlog, s.cursor.BacklogSize())
	}
	for _, c := range t.replicatorCursors() {
		backlog = max(backlog, c.BacklogSize())
	}
	quota, _ = t.backlogQuota(context.Background())
	return backlog, quota
}

// sampleCompaction adds a topic's compaction counters, once it was
// compacted.
func sampleCompaction(s *topicSample, t *topic) {
	c := &t.compaction
	c.mu.Lock()
	succeeded, failed, removed, view := c.succeeded, c.failed, c.removed, c.view
	c.mu.Unlock()
	if succeeded+failed == 0 {
		return
	}
	s.set(sCompactSucceeded, float64(succeeded))
	s.set(sCompactFailed, float64(failed))
	s.set(sCompactRemoved, float64(removed))
	if view != nil {
		s.set(sCompactEntries, float64(view.last+1))
	}
}
