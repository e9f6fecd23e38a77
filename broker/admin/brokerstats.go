package admin

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
)

func (a *brokerAPI) registerBrokerStats(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/broker-stats/topics", a.brokerTopics)
	mux.HandleFunc("GET /admin/v2/broker-stats/metrics", a.brokerMetrics)
	mux.HandleFunc("GET /admin/v2/broker-stats/mbeans", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, []Metrics{})
	})
}

func (a *brokerAPI) brokerTopics(w http.ResponseWriter, _ *http.Request) {
	out := map[string]map[string]map[string]map[string]TopicStats{}
	for _, t := range a.b.LoadedTopicStats() {
		if out[t.Namespace] == nil {
			out[t.Namespace] = map[string]map[string]map[string]TopicStats{}
		}
		byBundle := out[t.Namespace]
		if byBundle[t.Bundle] == nil {
			byBundle[t.Bundle] = map[string]map[string]TopicStats{}
		}
		if byBundle[t.Bundle][t.Domain] == nil {
			byBundle[t.Bundle][t.Domain] = map[string]TopicStats{}
		}
		byBundle[t.Bundle][t.Domain][t.Name] = t.Stats
	}
	WriteJSON(w, out)
}

// brokerMetrics sums the loaded topics per namespace, under the metric
// names Pulsar's broker-stats uses (brk_in_rate, ...), plus the broker's
// totals.
func (a *brokerAPI) brokerMetrics(w http.ResponseWriter, _ *http.Request) {
	byNS := map[string]*metricSums{}
	var total metricSums
	for _, t := range a.b.LoadedTopicStats() {
		if byNS[t.Namespace] == nil {
			byNS[t.Namespace] = &metricSums{}
		}
		byNS[t.Namespace].add(t.Metrics)
		total.add(t.Metrics)
	}
	names := make([]string, 0, len(byNS))
	for ns := range byNS {
		names = append(names, ns)
	}
	sort.Strings(names)
	cluster := a.b.ClusterName()
	out := []Metrics{{Metrics: total.values(), Dimensions: map[string]string{"broker": a.b.MetricsBroker(), "cluster": cluster}}}
	for _, ns := range names {
		out = append(out, Metrics{Metrics: byNS[ns].values(), Dimensions: map[string]string{"namespace": ns, "cluster": cluster}})
	}
	WriteJSON(w, out)
}

// metricSums sums topics' rates and counts.
type metricSums struct {
	TopicMetrics
	topics int
}

func (m *metricSums) add(t TopicMetrics) {
	m.InRate += t.InRate
	m.OutRate += t.OutRate
	m.InThroughput += t.InThroughput
	m.OutThroughput += t.OutThroughput
	m.StorageSize += t.StorageSize
	m.Backlog += t.Backlog
	m.Producers += t.Producers
	m.Consumers += t.Consumers
	m.Subscriptions += t.Subscriptions
	m.topics++
}

// values are the sums under Pulsar's metric names.
func (m *metricSums) values() map[string]any {
	return map[string]any{"brk_in_rate": m.InRate, "brk_out_rate": m.OutRate, "brk_in_tp_rate": m.InThroughput,
		"brk_out_tp_rate": m.OutThroughput, "brk_storage_size": m.StorageSize, "brk_msg_backlog": m.Backlog,
		"brk_no_of_producers": m.Producers, "brk_no_of_consumers": m.Consumers,
		"brk_no_of_subscriptions": m.Subscriptions, "brk_no_of_topics": m.topics}
}
