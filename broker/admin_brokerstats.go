package broker

// broker-stats beyond the load report (pulsar-admin broker-stats):
//
//	GET /admin/v2/broker-stats/topics    every loaded topic's stats, by namespace and bundle:
//	                                     {"ns": {"bundle": {"persistent": {"topic": {...}}}}}
//	GET /admin/v2/broker-stats/metrics   the broker's totals and each namespace's, as Pulsar's
//	                                     [{"metrics": {...}, "dimensions": {...}}]
//	GET /admin/v2/broker-stats/mbeans    JVM MBeans in Pulsar: none here, an empty list
//
// allocator-stats (Netty's allocator) has no counterpart and stays
// unrouted (404).

import (
	"net/http"
	"sort"

	"github.com/magnetar-io/magnetar/broker/ownership"
)

func (b *Broker) registerBrokerStatsAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/broker-stats/topics", b.httpBrokerTopics)
	mux.HandleFunc("GET /admin/v2/broker-stats/metrics", b.httpBrokerMetrics)
	mux.HandleFunc("GET /admin/v2/broker-stats/mbeans", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, []metricsJSON{})
	})
}

// bundleOfTopic is the owned bundle of t, or the whole range outside
// cluster mode (one broker serves every topic).
func (b *Broker) bundleOfTopic(t *topic) string {
	if svc := b.own.Load(); svc != nil {
		if bundle, ok := svc.OwnedBundleOf(namespaceOf(t.name), t.name.String()); ok {
			return bundle.Range.Name()
		}
	}
	return ownership.Range{Lower: 0, Upper: 0xffffffff}.Name()
}

func (b *Broker) httpBrokerTopics(w http.ResponseWriter, _ *http.Request) {
	out := map[string]map[string]map[string]map[string]topicStatsJSON{}
	for _, t := range b.loadedTopics() {
		ns, bundle := namespaceOf(t.name), b.bundleOfTopic(t)
		if out[ns] == nil {
			out[ns] = map[string]map[string]map[string]topicStatsJSON{}
		}
		if out[ns][bundle] == nil {
			out[ns][bundle] = map[string]map[string]topicStatsJSON{}
		}
		domain := t.name.Domain
		if out[ns][bundle][domain] == nil {
			out[ns][bundle][domain] = map[string]topicStatsJSON{}
		}
		out[ns][bundle][domain][t.name.String()] = b.statsOf(t)
	}
	writeJSON(w, out)
}

// metricsJSON is Pulsar's Metrics: values with the dimensions they are for.
type metricsJSON struct {
	Metrics    map[string]any    `json:"metrics"`
	Dimensions map[string]string `json:"dimensions"`
}

// httpBrokerMetrics sums the loaded topics per namespace, under the
// metric names Pulsar's broker-stats uses (brk_in_rate, ...), plus the
// broker's totals.
func (b *Broker) httpBrokerMetrics(w http.ResponseWriter, _ *http.Request) {
	byNS := map[string]*brokerMetrics{}
	var total brokerMetrics
	for _, t := range b.loadedTopics() {
		ns := namespaceOf(t.name)
		if byNS[ns] == nil {
			byNS[ns] = &brokerMetrics{}
		}
		byNS[ns].add(t)
		total.add(t)
	}
	names := make([]string, 0, len(byNS))
	for ns := range byNS {
		names = append(names, ns)
	}
	sort.Strings(names)
	out := []metricsJSON{{Metrics: total.values(), Dimensions: map[string]string{"broker": b.cfg.AdvertisedAddress, "cluster": b.cfg.ClusterName}}}
	for _, ns := range names {
		out = append(out, metricsJSON{Metrics: byNS[ns].values(), Dimensions: map[string]string{"namespace": ns, "cluster": b.cfg.ClusterName}})
	}
	writeJSON(w, out)
}

// brokerMetrics sums topics' rates and counts.
type brokerMetrics struct {
	inRate, outRate, inTp, outTp                float64
	storage, backlog                            int64
	producers, consumers, subscriptions, topics int
}

func (m *brokerMetrics) add(t *topic) {
	r := t.rates.current()
	producers, consumers, subs, backlog := t.counts()
	m.inRate += r.MsgRateIn
	m.outRate += r.MsgRateOut
	m.inTp += r.ThroughputIn
	m.outTp += r.ThroughputOut
	m.storage += t.ml.Size()
	m.backlog += backlog
	m.producers += producers
	m.consumers += consumers
	m.subscriptions += subs
	m.topics++
}

// values are the sums under Pulsar's metric names.
func (m *brokerMetrics) values() map[string]any {
	return map[string]any{"brk_in_rate": m.inRate, "brk_out_rate": m.outRate, "brk_in_tp_rate": m.inTp,
		"brk_out_tp_rate": m.outTp, "brk_storage_size": m.storage, "brk_msg_backlog": m.backlog,
		"brk_no_of_producers": m.producers, "brk_no_of_consumers": m.consumers,
		"brk_no_of_subscriptions": m.subscriptions, "brk_no_of_topics": m.topics}
}
