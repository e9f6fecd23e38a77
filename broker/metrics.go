package broker

import (
	"context"
	"slices"
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
// Lock rules: mu guards last.
type Metrics struct {
	b    *Broker
	mu   sync.Mutex
	last map[string]rateSample
}

type rateSample struct {
	at                                              time.Time
	msgsIn, bytesIn, msgsOut, bytesOut, msgsDropped int64
}

// NewMetrics returns a collector for b; register it with a Prometheus
// registry.
func NewMetrics(b *Broker) *Metrics { return &Metrics{b: b, last: map[string]rateSample{}} }

var (
	topicLabels   = []string{"cluster", "namespace", "topic"}
	replLabels    = []string{"cluster", "namespace", "topic", "remote_cluster"}
	descRateIn    = prometheus.NewDesc("pulsar_rate_in", "Messages/s published to the topic.", topicLabels, nil)
	descRateOut   = prometheus.NewDesc("pulsar_rate_out", "Messages/s dispatched from the topic.", topicLabels, nil)
	descTputIn    = prometheus.NewDesc("pulsar_throughput_in", "Bytes/s published to the topic.", topicLabels, nil)
	descTputOut   = prometheus.NewDesc("pulsar_throughput_out", "Bytes/s dispatched from the topic.", topicLabels, nil)
	descInTotal   = prometheus.NewDesc("pulsar_in_messages_total", "Messages published to the topic.", topicLabels, nil)
	descOutTotal  = prometheus.NewDesc("pulsar_out_messages_total", "Messages dispatched from the topic.", topicLabels, nil)
	descInBytes   = prometheus.NewDesc("pulsar_in_bytes_total", "Bytes published to the topic.", topicLabels, nil)
	descOutBytes  = prometheus.NewDesc("pulsar_out_bytes_total", "Bytes dispatched from the topic.", topicLabels, nil)
	descStorage   = prometheus.NewDesc("pulsar_storage_size", "Bytes stored for the topic.", topicLabels, nil)
	descOffloaded = prometheus.NewDesc("pulsar_storage_offloaded_size", "Bytes of the topic's ledgers copied to tiered storage (read from there).", topicLabels, nil)
	// Compaction (Pulsar's names), for topics compacted at least once.
	descCompactSucceeded = prometheus.NewDesc("pulsar_compaction_succeed_count", "Compactions of the topic that succeeded.", topicLabels, nil)
	descCompactFailed    = prometheus.NewDesc("pulsar_compaction_failed_count", "Compactions of the topic that failed.", topicLabels, nil)
	descCompactRemoved   = prometheus.NewDesc("pulsar_compaction_removed_event_count", "Messages compactions of the topic left out (superseded or deleted keys).", topicLabels, nil)
	descCompactEntries   = prometheus.NewDesc("pulsar_compaction_compacted_entries_count", "Entries of the topic's compacted ledger.", topicLabels, nil)
	descBacklog          = prometheus.NewDesc("pulsar_msg_backlog", "Entries not yet acknowledged, summed over subscriptions.", topicLabels, nil)
	descBacklogSize      = prometheus.NewDesc("pulsar_storage_backlog_size",
		"Bytes of the largest backlog of a durable subscription or replicator: what the backlog quota is checked against.", topicLabels, nil)
	descBacklogQuota = prometheus.NewDesc("pulsar_storage_backlog_quota_limit",
		"The topic's backlog quota in bytes (exported when one is set).", topicLabels, nil)
	descOwnedBundles = prometheus.NewDesc("magnetar_broker_owned_bundles", "Namespace bundles this broker owns.", []string{"cluster"}, nil)
	descProducers    = prometheus.NewDesc("pulsar_producers_count", "Connected producers.", topicLabels, nil)
	descConsumers    = prometheus.NewDesc("pulsar_consumers_count", "Connected consumers.", topicLabels, nil)
	descSubs         = prometheus.NewDesc("pulsar_subscriptions_count", "Subscriptions.", topicLabels, nil)
	// Replication, per remote cluster (Pulsar's names; rates over the
	// stats interval, as topic stats show them).
	descReplRateIn  = prometheus.NewDesc("pulsar_replication_rate_in", "Messages/s stored here by the remote cluster's replicator.", replLabels, nil)
	descReplRateOut = prometheus.NewDesc("pulsar_replication_rate_out", "Messages/s replicated to the remote cluster.", replLabels, nil)
	descReplTputIn  = prometheus.NewDesc("pulsar_replication_throughput_in", "Bytes/s stored here by the remote cluster's replicator.", replLabels, nil)
	descReplTputOut = prometheus.NewDesc("pulsar_replication_throughput_out", "Bytes/s replicated to the remote cluster.", replLabels, nil)
	descReplBacklog = prometheus.NewDesc("pulsar_replication_backlog", "Entries not yet replicated to the remote cluster.", replLabels, nil)
	descReplDelay   = prometheus.NewDesc("pulsar_replication_delay_in_seconds", "Age of the oldest entry not yet confirmed by the remote cluster.", replLabels, nil)
	descPanics      = prometheus.NewDesc("magnetar_broker_recovered_panics_total",
		"Panics recovered at a boundary (command, goroutine, http, metrics): each is a bug, logged with its stack.",
		[]string{"boundary"}, nil)
)

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRateIn, descRateOut, descTputIn, descTputOut, descInTotal, descOutTotal,
		descInBytes, descOutBytes, descStorage, descOffloaded, descBacklog, descBacklogSize, descBacklogQuota, descOwnedBundles,
		descCompactSucceeded, descCompactFailed, descCompactRemoved, descCompactEntries, descProducers, descConsumers, descSubs, descPanics,
		descReplRateIn, descReplRateOut, descReplTputIn, descReplTputOut, descReplBacklog, descReplDelay} {
		ch <- d
	}
	for _, d := range txnDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Prometheus runs collectors on
// goroutines of its own, where a panic would end the process: one
// topic's failure costs that topic's series of this scrape only.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for t := range m.b.topicPass() {
		m.collectTopicSafely(ch, t, now)
	}
	m.collectCoordinators(ch)
	if own := m.b.Ownership(); own != nil {
		ch <- prometheus.MustNewConstMetric(descOwnedBundles, prometheus.GaugeValue, float64(len(own.Owned())), m.b.cfg.ClusterName)
	}
	for b := range numBoundaries {
		ch <- prometheus.MustNewConstMetric(descPanics, prometheus.CounterValue, float64(m.b.panics.get(b)), b.String())
	}
}

func (m *Metrics) collectTopicSafely(ch chan<- prometheus.Metric, t *topic, now time.Time) {
	defer func() { _ = m.b.recovered(recover(), boundaryMetrics, m.b.log, "topic", t.name.String()) }()
	m.collectTopic(ch, t, now)
}

func (m *Metrics) collectTopic(ch chan<- prometheus.Metric, t *topic, now time.Time) {
	labels := []string{m.b.cfg.ClusterName, t.name.Tenant + "/" + t.name.Namespace, t.name.String()}
	cur := rateSample{at: now, msgsIn: t.stats.msgsIn.Load(), bytesIn: t.stats.bytesIn.Load(),
		msgsOut: t.stats.msgsOut.Load(), bytesOut: t.stats.bytesOut.Load()}
	m.mu.Lock()
	prev, ok := m.last[labels[2]]
	m.last[labels[2]] = cur
	m.mu.Unlock()
	rate := func(d *prometheus.Desc, a, b int64) {
		v := 0.0
		if secs := now.Sub(prev.at).Seconds(); ok && secs > 0 {
			v = float64(a-b) / secs
		}
		m.emit(ch, d, prometheus.GaugeValue, v, labels)
	}
	rate(descRateIn, cur.msgsIn, prev.msgsIn)
	rate(descRateOut, cur.msgsOut, prev.msgsOut)
	rate(descTputIn, cur.bytesIn, prev.bytesIn)
	rate(descTputOut, cur.bytesOut, prev.bytesOut)
	counter := func(d *prometheus.Desc, v int64) {
		m.emit(ch, d, prometheus.CounterValue, float64(v), labels)
	}
	counter(descInTotal, cur.msgsIn)
	counter(descOutTotal, cur.msgsOut)
	counter(descInBytes, cur.bytesIn)
	counter(descOutBytes, cur.bytesOut)
	producers, consumers, subs, backlog := t.counts()
	gauge := func(d *prometheus.Desc, v float64) { m.emit(ch, d, prometheus.GaugeValue, v, labels) }
	gauge(descStorage, float64(t.ml.Size()))
	m.collectTxnBuffer(ch, t, labels)
	if o, ok := t.ml.(managedledger.Offloadable); ok {
		gauge(descOffloaded, float64(o.OffloadedSize()))
	}
	m.collectCompaction(ch, t, labels)
	gauge(descBacklog, float64(backlog))
	backlogBytes, quota := t.backlogBytes()
	gauge(descBacklogSize, float64(backlogBytes))
	if quota > 0 {
		gauge(descBacklogQuota, float64(quota))
	}
	gauge(descProducers, float64(producers))
	gauge(descConsumers, float64(consumers))
	gauge(descSubs, float64(subs))
	for remote, r := range t.replicationStats(now) {
		rl := append(slices.Clone(labels), remote)
		m.emit(ch, descReplRateIn, prometheus.GaugeValue, r.MsgRateIn, rl)
		m.emit(ch, descReplRateOut, prometheus.GaugeValue, r.MsgRateOut, rl)
		m.emit(ch, descReplTputIn, prometheus.GaugeValue, r.MsgThroughputIn, rl)
		m.emit(ch, descReplTputOut, prometheus.GaugeValue, r.MsgThroughputOut, rl)
		m.emit(ch, descReplBacklog, prometheus.GaugeValue, float64(r.ReplicationBacklog), rl)
		m.emit(ch, descReplDelay, prometheus.GaugeValue, float64(r.ReplicationDelayInSeconds), rl)
	}
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

// collectCompaction emits a topic's compaction counters, once it was
// compacted (a topic never compacted has none: 10,000 topics would
// otherwise add 40,000 zero series).
func (m *Metrics) collectCompaction(ch chan<- prometheus.Metric, t *topic, labels []string) {
	c := &t.compaction
	c.mu.Lock()
	succeeded, failed, removed, view := c.succeeded, c.failed, c.removed, c.view
	c.mu.Unlock()
	if succeeded+failed == 0 {
		return
	}
	m.emit(ch, descCompactSucceeded, prometheus.CounterValue, float64(succeeded), labels)
	m.emit(ch, descCompactFailed, prometheus.CounterValue, float64(failed), labels)
	m.emit(ch, descCompactRemoved, prometheus.CounterValue, float64(removed), labels)
	if view != nil {
		m.emit(ch, descCompactEntries, prometheus.GaugeValue, float64(view.last+1), labels)
	}
}
