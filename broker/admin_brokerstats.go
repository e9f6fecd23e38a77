package broker

// The broker-stats operations of the admin API (admin.BrokerStats): every
// loaded topic's stats and the sums broker-stats/metrics adds up, with
// the namespace and bundle each topic belongs to.

import (
	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/ownership"
)

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

// LoadedTopicStats are the stats of every loaded topic (admin.BrokerStats).
func (b *Broker) LoadedTopicStats() []admin.LoadedTopic {
	topics := b.loadedTopics()
	out := make([]admin.LoadedTopic, 0, len(topics))
	for _, t := range topics {
		out = append(out, admin.LoadedTopic{Name: t.name.String(), Domain: t.name.Domain, Namespace: namespaceOf(t.name),
			Bundle: b.bundleOfTopic(t), Stats: b.statsOf(t), Metrics: t.metrics()})
	}
	return out
}

// MetricsBroker names this broker in broker-stats/metrics (admin.BrokerStats).
func (b *Broker) MetricsBroker() string { return b.cfg.AdvertisedAddress }

// metrics are the topic's rates and counts for broker-stats/metrics.
func (t *topic) metrics() admin.TopicMetrics {
	r := t.rates.current()
	producers, consumers, subs, backlog := t.counts()
	return admin.TopicMetrics{InRate: r.MsgRateIn, OutRate: r.MsgRateOut, InThroughput: r.ThroughputIn,
		OutThroughput: r.ThroughputOut, StorageSize: t.ml.Size(), Backlog: backlog,
		Producers: producers, Consumers: consumers, Subscriptions: subs}
}
