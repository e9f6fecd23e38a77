package broker

// Namespace policies that change how topics behave: message TTL
// (message_ttl_in_seconds), the storage backlog quota
// (backlog_quota_map.destination_storage), retention
// (retention_policies) and the replicators' dispatch rate
// (replicatorDispatchRate, also a topic policy). A namespace setting wins over the broker default
// (ttlDurationDefaultInSeconds, backlogQuotaDefault*, defaultRetention*);
// policies are read through the resources cache, so the periodic checks
// cost no metadata round trip.

import (
	"context"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/managedledger"
)

// policies returns the topic's namespace policies, if they can be read:
// the cache's shared value (resources.NamespaceShared), to read only.
func (t *topic) policies(ctx context.Context) (resources.Policies, bool) {
	res := t.b.cfg.Resources
	if res == nil {
		return resources.Policies{}, false
	}
	p, err := res.NamespaceShared(ctx, t.name.Tenant, t.name.Namespace)
	return p, err == nil
}

// messageTTL is the topic's TTL (0: messages never expire): its own, else
// its namespace's, else the broker's.
func (t *topic) messageTTL(ctx context.Context) time.Duration {
	if secs, ok := topicPolicy[int](ctx, t, "messageTTL"); ok {
		return time.Duration(secs) * time.Second
	}
	if p, ok := t.policies(ctx); ok && p.MessageTTLInSeconds != nil {
		return time.Duration(*p.MessageTTLInSeconds) * time.Second
	}
	return t.b.settings().messageTTL
}

// backlogQuota is the topic's storage quota: the limit in bytes (<= 0:
// none) and the retention policy.
func (t *topic) backlogQuota(ctx context.Context) (int64, string) {
	if p, ok := t.policies(ctx); ok {
		if q, set := p.BacklogQuotaMap[resources.DestinationStorage]; set {
			policy := string(q.Policy)
			if policy == "" {
				policy = BacklogHoldProducers
			}
			return q.LimitSize, policy
		}
	}
	s := t.b.settings()
	return s.quotaBytes, s.quotaPolicy
}

// replicatorDispatchRate is the limit of each of the topic's
// replicators (replicatorRate), with a relative rate resolved against the
// topic's publish rate.
func (t *topic) replicatorDispatchRate(ns resources.Policies, own *resources.DispatchRate) dispatchRate {
	return dispatchRateOf(t.b.replicatorRate(ns, own), t.rates.current())
}

// replicatorRate is the replicator dispatch rate in force in this
// cluster: the topic's own (own), else its namespace's for this cluster,
// else the broker's dispatchThrottlingRatePerReplicatorIn{Msg,Byte} a
// second (both 0: none).
func (b *Broker) replicatorRate(ns resources.Policies, own *resources.DispatchRate) resources.DispatchRate {
	s := b.settings()
	return inForce(own, ns.ReplicatorDispatchRate, b.cfg.ClusterName,
		resources.DispatchRate{DispatchThrottlingRateInMsg: int(s.replMsgRate), DispatchThrottlingRateInByte: s.replByteRate, RatePeriodInSecond: 1})
}

// inForce is a topic-level setting kept per cluster in its namespace: the
// topic's own (own), else the namespace's for cluster, else the broker's
// (def).
func inForce[T any](own *T, ns map[string]T, cluster string, def T) T {
	if own != nil {
		return *own
	}
	if v, ok := ns[cluster]; ok {
		return v
	}
	return def
}

// RetentionOf turns Pulsar's retention settings (minutes and MiB, -1 for
// no limit) into the managed ledger's.
func RetentionOf(minutes int, megabytes int64) managedledger.Retention {
	r := managedledger.Retention{Time: -1, Size: -1}
	if minutes >= 0 {
		r.Time = time.Duration(minutes) * time.Minute
	}
	if megabytes >= 0 {
		r.Size = megabytes << 20
	}
	return r
}

// retention is the topic's retention: its own, else its namespace's, else
// the broker's.
func (t *topic) retention(ctx context.Context) managedledger.Retention {
	if r, ok := topicPolicy[resources.RetentionPolicies](ctx, t, "retention"); ok {
		return RetentionOf(r.RetentionTimeInMinutes, r.RetentionSizeInMB)
	}
	if p, ok := t.policies(ctx); ok && p.RetentionPolicies != nil {
		return RetentionOf(p.RetentionPolicies.RetentionTimeInMinutes, p.RetentionPolicies.RetentionSizeInMB)
	}
	return t.b.settings().retention()
}

// applyRetention gives every loaded topic its current retention, which
// also trims what it lets go (policies change without a topic reload).
// A compaction threshold set since the topic loaded creates its
// compaction cursor first, so the trim keeps what the cursor holds.
func (b *Broker) applyRetention(ctx context.Context) {
	for t := range b.topicPass() {
		if err := t.openCompactionCursor(ctx); err != nil {
			b.log.Warn("compaction cursor not created: messages may be trimmed before a compaction reads them",
				"topic", t.name.String(), "err", err)
		}
		t.ml.SetRetention(t.retention(ctx))
	}
	b.checkOffloads(ctx)
}

// expireByPolicy applies each loaded topic's TTL.
func (b *Broker) expireByPolicy(ctx context.Context, now time.Time) {
	for t := range b.topicPass() {
		if ttl := t.messageTTL(ctx); ttl > 0 {
			t.expireBefore(ctx, now.Add(-ttl))
		}
	}
}

// SchemaPolicies adapts namespace policies to the schema registry:
// schema_compatibility_strategy (UNDEFINED: the deprecated auto-update
// strategy if set, else the broker default) and
// is_allow_auto_update_schema (default true).
func SchemaPolicies(res *resources.Resources) func(ctx context.Context, tenant, ns string) (schema.Strategy, bool, error) {
	return func(ctx context.Context, tenant, ns string) (schema.Strategy, bool, error) {
		p, err := res.NamespaceShared(ctx, tenant, ns)
		if err != nil {
			return schema.Undefined, true, err
		}
		// UNDEFINED falls back to the deprecated auto-update strategy, as
		// in Pulsar, and then (Undefined) to the broker's.
		strategy, err := schema.ParseStrategy(p.EffectiveSchemaCompatibilityStrategy())
		if err != nil {
			strategy = schema.Undefined
		}
		allow := p.IsAllowAutoUpdateSchema == nil || *p.IsAllowAutoUpdateSchema
		return strategy, allow, nil
	}
}

// TopicSchemaStrategy adapts topic policies to the schema registry: the
// topic's own schemaCompatibilityStrategy in this cluster (a partition's
// is its partitioned topic's; the registry already names the base topic),
// Undefined when it has none.
func TopicSchemaStrategy(res *resources.Resources, cluster string) func(ctx context.Context, id schema.ID) (schema.Strategy, error) {
	return func(ctx context.Context, id schema.ID) (schema.Strategy, error) {
		own, err := res.TopicPoliciesShared(ctx, resources.TopicName{Domain: "persistent", Tenant: id.Tenant,
			Namespace: id.Namespace, Local: id.Topic})
		if err != nil {
			return schema.Undefined, err
		}
		name, ok := resources.TopicPolicy[string](own, cluster, "schemaCompatibilityStrategy")
		if !ok {
			return schema.Undefined, nil
		}
		return schema.ParseStrategy(name)
	}
}
