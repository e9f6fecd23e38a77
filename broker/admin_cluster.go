package broker

// The broker and bundle operations of the admin API (admin.Cluster);
// package broker/admin serves /admin/v2/brokers, the load report and
// bundle unload and split through the ownership service
// (Broker.Ownership). Without cluster mode they answer for this lone
// broker.

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// ClusterName is this broker's cluster (admin.Cluster).
func (b *Broker) ClusterName() string { return b.cfg.ClusterName }

// Closing reports whether the broker is shutting down (admin.Cluster).
func (b *Broker) Closing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// UnloadNamespace closes the namespace's topics loaded here; their
// clients reconnect (admin.Cluster, outside cluster mode).
func (b *Broker) UnloadNamespace(ctx context.Context, ns string) {
	b.unloadWhere(ctx, func(t *topic) bool { return namespaceOf(t.name) == ns })
}

// unloadWhere closes the loaded topics that match and says how many.
func (b *Broker) unloadWhere(ctx context.Context, match func(*topic) bool) int {
	var closing []*topic
	done := make(chan struct{})
	b.mu.Lock()
	for key, t := range b.topics {
		if match(t) {
			closing = append(closing, t)
			delete(b.topics, key)
			b.unloading[key] = done // loads of these names wait (getTopic)
		}
	}
	b.mu.Unlock()
	closeTopics(ctx, closing)
	b.mu.Lock()
	for _, t := range closing {
		if key := t.name.String(); b.unloading[key] == done {
			delete(b.unloading, key)
		}
	}
	b.mu.Unlock()
	close(done)
	return len(closing)
}

// topicClosesAtOnce bounds the topics closed side by side. One after
// another, each stopping its replicators and closing its managed ledger
// (tens of milliseconds each), a bundle of a few dozen topics kept its
// clients waiting for a second or more; all at once, thousands of topics
// would flood the bookies and the metadata store with closes.
const topicClosesAtOnce = 32

// closeTopics closes topics, topicClosesAtOnce at a time, and returns
// when all are closed.
func closeTopics(ctx context.Context, topics []*topic) {
	var g errgroup.Group
	g.SetLimit(topicClosesAtOnce)
	for _, t := range topics {
		g.Go(func() error {
			t.close(ctx)
			return nil
		})
	}
	_ = g.Wait() // a topic's close has no error to report
}

// BrokerVersion implements admin.BrokerOps.
func (b *Broker) BrokerVersion() string { return b.cfg.Version }

// CheckBacklogQuotas implements admin.BrokerOps: the periodic backlog
// quota check, now.
func (b *Broker) CheckBacklogQuotas(ctx context.Context) { b.enforceBacklogQuotas(ctx) }
