package broker

// Backlog quotas (backlogQuotaDefaultLimitBytes, or the namespace's
// backlog_quota_map.destination_storage; policies.go;
// backlogQuotaDefaultRetentionPolicy): a topic whose largest subscription
// backlog passes the limit is over quota, checked every
// backlogQuotaCheckIntervalInSeconds and when a producer connects. A
// replicator's backlog (its pulsar.repl.<remote> cursor) counts as a
// subscription's, as in Pulsar, whose quota is the managed ledger's
// slowest cursor: a remote cut off long enough puts its topics over
// quota. Then, by policy:
//
//   - producer_request_hold (default): producers are disconnected and new
//     ones refused with ProducerBlockedQuotaExceededError, which clients
//     retry; their pending messages wait in the client until consumers
//     bring the backlog under the limit.
//   - producer_exception: the same, with ProducerBlockedQuotaExceededException,
//     which clients report to the application.
//   - consumer_backlog_eviction: the oldest unacknowledged messages of each
//     subscription (or replicator) over the limit are skipped until it is
//     under again; producers are never blocked.

import (
	"context"
	"fmt"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// Backlog quota retention policies (Pulsar's names).
const (
	BacklogHoldProducers  = "producer_request_hold"
	BacklogFailProducers  = "producer_exception"
	BacklogEvictConsumers = "consumer_backlog_eviction"
)

// ValidBacklogPolicy reports whether p is a backlog quota retention policy.
func ValidBacklogPolicy(p string) bool {
	return p == BacklogHoldProducers || p == BacklogFailProducers || p == BacklogEvictConsumers
}

// overQuota reports whether a durable subscription's backlog passes the
// limit.
func (t *topic) overQuota() bool {
	backlog, limit := t.backlogBytes()
	return limit > 0 && backlog > limit
}

// evictBacklog skips the oldest unacknowledged entries of every
// subscription and replicator over the limit until it is under it.
func (t *topic) evictBacklog(ctx context.Context) {
	limit, _ := t.backlogQuota(ctx)
	for _, s := range t.durableSubs() {
		if t.evictCursor(ctx, s.cursor, limit) {
			s.dropUpTo(s.cursor.MarkDeletePosition())
		}
	}
	for _, c := range t.replicatorCursors() {
		t.evictCursor(ctx, c, limit) // the replicator reads on from the new position
	}
}

// evictCursor skips a cursor's oldest entries until its backlog is under
// limit; it reports whether it skipped any.
func (t *topic) evictCursor(ctx context.Context, c managedledger.Cursor, limit int64) bool {
	size, n := c.BacklogSize(), c.Backlog()
	if size <= limit || n == 0 {
		return false
	}
	avg := max(size/n, 1)
	skip := (size - limit + avg - 1) / avg
	if err := c.SkipEntries(ctx, skip); err != nil {
		t.b.log.Warn("backlog eviction failed", "topic", t.name.String(), "cursor", c.Name(), "err", err)
		return false
	}
	t.b.log.Info("backlog quota exceeded: oldest messages skipped", "topic", t.name.String(),
		"cursor", c.Name(), "skipped", skip, "limit_bytes", limit)
	return true
}

// admitProducer applies the quota to a connecting producer: nil, or the
// error code and message to refuse it with.
func (t *topic) admitProducer(ctx context.Context) (pb.ServerError, error) {
	if !t.overQuota() {
		return 0, nil
	}
	limit, policy := t.backlogQuota(ctx)
	switch policy {
	case BacklogEvictConsumers:
		t.evictBacklog(ctx)
		return 0, nil
	case BacklogFailProducers:
		return pb.ServerError_ProducerBlockedQuotaExceededException, fmt.Errorf("topic %s is over its backlog quota of %d bytes", t.name, limit)
	}
	return pb.ServerError_ProducerBlockedQuotaExceededError, fmt.Errorf("topic %s is over its backlog quota of %d bytes: producers wait", t.name, limit)
}

// enforceBacklogQuotas is the periodic check.
func (b *Broker) enforceBacklogQuotas(ctx context.Context) {
	for t := range b.topicPass() {
		if !t.overQuota() {
			continue
		}
		_, policy := t.backlogQuota(ctx)
		if policy == BacklogEvictConsumers {
			t.evictBacklog(ctx)
			continue
		}
		t.mu.Lock()
		producers := make([]*producer, 0, len(t.producers))
		for p := range t.producers {
			producers = append(producers, p)
		}
		t.mu.Unlock()
		for _, p := range producers {
			t.removeProducer(p)
			p.fence() // clients reconnect and are refused until the backlog is under the limit
		}
		if len(producers) > 0 {
			b.log.Warn("backlog quota exceeded: producers disconnected", "topic", t.name.String(),
				"producers", len(producers), "policy", policy)
		}
	}
}

// dropUpTo forgets what the dispatcher holds at or before pos (it was
// acknowledged on the cursor by expiry or eviction).
func (s *subscription) dropUpTo(pos managedledger.Position) {
	s.mu.Lock()
	wake := false
	for p := range s.inflight {
		if p.Compare(pos) <= 0 {
			wake = s.removeInflightLocked(p) || wake
			delete(s.redelivered, p)
		}
	}
	for p := range s.replay {
		if p.Compare(pos) <= 0 {
			delete(s.replay, p)
		}
	}
	s.mu.Unlock()
	if wake {
		s.dispatch()
	}
}
