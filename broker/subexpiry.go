package broker

// Subscription expiry, as Pulsar's subscriptionExpirationTimeMinutes: a
// durable subscription with no consumer for longer than the namespace's
// subscription_expiration_time_minutes (else the broker's setting; 0:
// never) is deleted, checked every subscriptionExpiryCheckIntervalInMinutes.
//
// A subscription's last activity is when a consumer last joined or left
// it; one no consumer joined since the topic loaded here counts from the
// load (Pulsar's cursors count from their opening too). Replicated
// subscriptions are kept (their peers' positions depend on them, as in
// Pulsar), and so are the broker's own cursors (deduplication,
// replicators) and readers, which are not subscriptions.

import (
	"context"
	"time"
)

// expireSubscriptions deletes the inactive subscriptions of every loaded
// persistent topic.
func (b *Broker) expireSubscriptions(ctx context.Context, now time.Time) {
	for t := range b.topicPass() {
		if !t.name.Persistent() {
			continue
		}
		limit := t.subscriptionExpiry(ctx)
		if limit <= 0 {
			continue
		}
		for _, name := range t.expiredSubscriptions(now, limit) {
			if err := b.DeleteSubscription(ctx, t.name.String(), name, false); err != nil {
				// A consumer joined meanwhile (refused without force), or
				// the store failed: the next check tries again.
				b.log.Info("expired subscription not deleted", "topic", t.name.String(), "subscription", name, "err", err)
				continue
			}
			b.log.Info("subscription expired: no consumer for longer than the expiration time",
				"topic", t.name.String(), "subscription", name, "expiration", limit.String())
		}
	}
}

// subscriptionExpiry is the expiration time in force for the topic: its
// namespace's, else the broker's (0: none).
func (t *topic) subscriptionExpiry(ctx context.Context) time.Duration {
	if m := t.namespacePolicies(ctx).SubscriptionExpirationTimeMinutes; m != nil {
		return time.Duration(*m) * time.Minute
	}
	return t.b.cfg.SubscriptionExpirationTime
}

// expiredSubscriptions names the durable subscriptions without consumers
// whose last activity is older than limit.
func (t *topic) expiredSubscriptions(now time.Time, limit time.Duration) []string {
	var out []string
	for _, name := range t.durableSubNames() {
		if name == compactionCursor {
			continue // no consumer ever comes back to it (compaction.go)
		}
		last := t.loadedAt
		if st, ok := t.durableSub(name); ok && st.s != nil {
			if st.s.replicated.Load() || st.s.consumerCount() > 0 {
				continue
			}
			last = time.Unix(0, st.s.lastActive.Load())
		} else if ok && isReplicatedCursor(st.cursor) {
			continue
		}
		if now.Sub(last) >= limit {
			out = append(out, name)
		}
	}
	return out
}

func (s *subscription) consumerCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.consumers)
}
