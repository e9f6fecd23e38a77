package broker

// Topic-level policies (Pulsar's topic policies, topicLevelPoliciesEnabled):
// a value set on a topic wins over its namespace's, which wins over the
// broker's default. Each is stored in the configuration store with the
// topic's other policies (resources.TopicPolicies), local to the cluster
// of the broker that set it unless set with isGlobal, and read through a
// watched cache, so a change applies without a topic reload wherever the
// namespace's value does: the TTL and retention at their next periodic
// check, the client limits at the next producer, consumer or subscription,
// the message size at the next SEND, deduplication at the next load, the
// dispatch rates within a second (subdispatchrate.go), persistence at the
// topic's next ledger (LedgerPolicyFunc), delayed delivery within a
// second (whether entries are held, the tick, the longest delay a SEND
// may ask), the schema compatibility
// strategy at the next schema a producer brings (TopicSchemaStrategy).
//
// offloadPolicies apply at the next retention check (offload.go);
// compactionThreshold starts a compaction at the compaction monitor's
// next check (compaction.go).
//
// Each policy here is enforced; the admin API answers the others Pulsar
// has (inactive topic policies, ...) with a "not supported" error
// naming them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
)

// topicPolicySpec is one topic-level policy the broker enforces.
type topicPolicySpec struct {
	// check validates a value set through the admin API.
	check func(raw json.RawMessage) error
	// fallback is the value in force when the topic has none: its
	// namespace's, else the broker's (nil: none).
	fallback func(b *Broker, ns resources.Policies) any
}

// topicPolicySpecs are keyed by Pulsar's REST names (the path segment
// after the topic); admin.TopicPolicyNames lists the same.
var topicPolicySpecs = map[string]topicPolicySpec{
	"messageTTL": {check: nonNegativeInt("messageTTL"), fallback: func(b *Broker, ns resources.Policies) any {
		return intOr(ns.MessageTTLInSeconds, int(b.settings().messageTTL.Seconds()))
	}},
	"retention": {check: checkRetention, fallback: func(b *Broker, ns resources.Policies) any {
		if ns.RetentionPolicies != nil {
			return *ns.RetentionPolicies
		}
		return resources.RetentionPolicies{RetentionTimeInMinutes: b.cfg.DefaultRetentionMinutes, RetentionSizeInMB: int64(b.cfg.DefaultRetentionMB)}
	}},
	"maxProducers": {check: nonNegativeInt("maxProducers"), fallback: func(b *Broker, ns resources.Policies) any {
		return intOr(ns.MaxProducersPerTopic, b.cfg.MaxProducersPerTopic)
	}},
	"maxConsumers": {check: nonNegativeInt("maxConsumers"), fallback: func(b *Broker, ns resources.Policies) any {
		return intOr(ns.MaxConsumersPerTopic, b.cfg.MaxConsumersPerTopic)
	}},
	"maxConsumersPerSubscription": {check: nonNegativeInt("maxConsumersPerSubscription"), fallback: func(b *Broker, ns resources.Policies) any {
		return intOr(ns.MaxConsumersPerSubscription, b.cfg.MaxConsumersPerSubscription)
	}},
	"maxUnackedMessagesOnConsumer": {check: nonNegativeInt("maxUnackedMessagesOnConsumer"), fallback: func(b *Broker, ns resources.Policies) any {
		return intOr(ns.MaxUnackedMessagesPerConsumer, b.cfg.MaxUnackedMessagesPerConsumer)
	}},
	"maxUnackedMessagesOnSubscription": {check: nonNegativeInt("maxUnackedMessagesOnSubscription"), fallback: func(b *Broker, ns resources.Policies) any {
		return intOr(ns.MaxUnackedMessagesPerSubscription, b.cfg.MaxUnackedMessagesPerSubscription)
	}},
	"maxSubscriptionsPerTopic": {check: nonNegativeInt("maxSubscriptionsPerTopic"), fallback: func(b *Broker, ns resources.Policies) any {
		return intOr(ns.MaxSubscriptionsPerTopic, b.cfg.MaxSubscriptionsPerTopic)
	}},
	"maxMessageSize": {check: nonNegativeInt("maxMessageSize"), fallback: func(b *Broker, _ resources.Policies) any {
		return b.cfg.MaxMessageSize
	}},
	"deduplicationEnabled": {check: isJSON[bool]("deduplicationEnabled"), fallback: func(b *Broker, ns resources.Policies) any {
		if ns.DeduplicationEnabled != nil {
			return *ns.DeduplicationEnabled
		}
		return b.cfg.BrokerDeduplicationEnabled
	}},
	"deduplicationSnapshotInterval": {check: nonNegativeInt("deduplicationSnapshotInterval"), fallback: func(b *Broker, ns resources.Policies) any {
		return int(b.dedupSnapshotIntervalOf(ns) / time.Second)
	}},
	"schemaValidationEnforced": {check: isJSON[bool]("schemaValidationEnforced"), fallback: func(b *Broker, ns resources.Policies) any {
		return ns.SchemaValidationEnforced || b.cfg.SchemaValidationEnforced
	}},
	"schemaCompatibilityStrategy": {check: checkSchemaStrategy, fallback: func(b *Broker, ns resources.Policies) any {
		if s := ns.EffectiveSchemaCompatibilityStrategy(); s != resources.SchemaCompatibilityUndefined {
			return s
		}
		if b.cfg.Schemas != nil {
			return b.cfg.Schemas.DefaultStrategy().String()
		}
		return schema.Full.String()
	}},
	"delayedDelivery": {check: checkDelayedDelivery, fallback: func(b *Broker, ns resources.Policies) any {
		return b.delayedDeliveryDefault(ns)
	}},
	"persistence": {check: checkPersistence, fallback: func(_ *Broker, ns resources.Policies) any {
		if ns.Persistence != nil {
			return *ns.Persistence
		}
		return nil // the managed ledgers' defaults
	}},
	"subscribeRate": {check: isJSON[resources.SubscribeRate]("subscribeRate"), fallback: func(b *Broker, ns resources.Policies) any {
		return b.subscribeRate(ns, nil)
	}},
	"publishRate": {check: isJSON[resources.PublishRate]("publishRate"), fallback: func(b *Broker, ns resources.Policies) any {
		return b.publishRate(ns, nil)
	}},
	"dispatchRate": {check: isJSON[resources.DispatchRate]("dispatchRate"), fallback: func(b *Broker, ns resources.Policies) any {
		return b.topicDispatchRate(ns, nil)
	}},
	"subscriptionDispatchRate": {check: isJSON[resources.DispatchRate]("subscriptionDispatchRate"), fallback: func(b *Broker, ns resources.Policies) any {
		return b.subscriptionDispatchRate(ns, nil)
	}},
	"offloadPolicies": {check: checkOffloadPolicies, fallback: func(b *Broker, ns resources.Policies) any {
		if ns.OffloadPolicies != nil {
			return *ns.OffloadPolicies
		}
		return offloadPoliciesOf(b.cfg.Offload)
	}},
	"compactionThreshold": {check: nonNegativeInt("compactionThreshold"), fallback: func(b *Broker, ns resources.Policies) any {
		return compactionThresholdOf(b, ns)
	}},
	"autoSubscriptionCreation": {check: isJSON[resources.AutoSubscriptionCreationOverride]("autoSubscriptionCreation"),
		fallback: func(b *Broker, ns resources.Policies) any {
			if ns.AutoSubscriptionCreationOverride != nil {
				return *ns.AutoSubscriptionCreationOverride
			}
			return resources.AutoSubscriptionCreationOverride{AllowAutoSubscriptionCreation: b.settings().autoSubscriptionCreation}
		}},
}

func intOr(v *int, def int) int {
	if v != nil {
		return *v
	}
	return def
}

// isJSON checks that a value decodes as T.
func isJSON[T any](name string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return admin.Errorf(admin.ErrBadRequest, "%s: %s is not a valid value: %v", name, raw, err)
		}
		return nil
	}
}

func nonNegativeInt(name string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var v int
		if err := json.Unmarshal(raw, &v); err != nil {
			return admin.Errorf(admin.ErrBadRequest, "%s: %s is not an integer", name, raw)
		}
		if v < 0 {
			return admin.Errorf(admin.ErrBadRequest, "%s: must be 0 or more, got %d", name, v)
		}
		return nil
	}
}

// checkSchemaStrategy accepts one of Pulsar's strategy names, as a JSON
// string.
func checkSchemaStrategy(raw json.RawMessage) error {
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return admin.Errorf(admin.ErrBadRequest, "schemaCompatibilityStrategy: %s is not a JSON string", raw)
	}
	if _, err := schema.ParseStrategy(name); err != nil {
		return admin.Errorf(admin.ErrBadRequest, "schemaCompatibilityStrategy: %v", err)
	}
	return nil
}

// checkDelayedDelivery accepts Pulsar's DelayedDeliveryPolicies (and
// pulsaradmin's name for the longest delay) with no negative time.
func checkDelayedDelivery(raw json.RawMessage) error {
	var d resources.DelayedDeliveryPolicies
	if err := json.Unmarshal(raw, &d); err != nil {
		return admin.Errorf(admin.ErrBadRequest, "delayedDelivery: %s is not a valid value: %v", raw, err)
	}
	if err := d.Validate(); err != nil {
		return admin.Errorf(admin.ErrBadRequest, "delayedDelivery: %v", err)
	}
	return nil
}

// delayedDeliveryDefault is the delayed delivery policy of a topic that
// has none: its namespace's, else the broker's delayedDelivery* settings.
func (b *Broker) delayedDeliveryDefault(ns resources.Policies) resources.DelayedDeliveryPolicies {
	if ns.DelayedDeliveryPolicies != nil {
		return *ns.DelayedDeliveryPolicies
	}
	return resources.DelayedDeliveryPolicies{Active: !b.cfg.DelayedDeliveryDisabled,
		TickTime: b.cfg.DelayedDeliveryTickTime.Milliseconds(), MaxDeliveryDelayInMillis: b.cfg.DelayedDeliveryMaxDelay.Milliseconds()}
}

// delayedPolicy is the delayed delivery policy in force for the topic:
// its own, else its namespace's, else the broker's; at most
// sizeLimitRefresh old, since dispatch and every SEND with a delivery time
// ask for it.
func (t *topic) delayedPolicy(now time.Time) resources.DelayedDeliveryPolicies {
	if p := t.delayedDelivery.Load(); p != nil && now.UnixNano() < t.delayedUntil.Load() {
		return *p
	}
	p, ok := topicPolicy[resources.DelayedDeliveryPolicies](t.b.ctx, t, "delayedDelivery")
	if !ok {
		p = t.b.delayedDeliveryDefault(t.namespacePolicies(t.b.ctx))
	}
	t.delayedDelivery.Store(&p)
	t.delayedUntil.Store(now.Add(sizeLimitRefresh).UnixNano())
	return p
}

// checkPersistence accepts what a namespace's persistence policy accepts.
func checkPersistence(raw json.RawMessage) error {
	var q resources.PersistencePolicies
	if err := json.Unmarshal(raw, &q); err != nil {
		return admin.Errorf(admin.ErrBadRequest, "persistence: %s is not a valid value: %v", raw, err)
	}
	if err := q.Validate(); err != nil {
		return admin.Errorf(admin.ErrBadRequest, "%v", err)
	}
	return nil
}

// checkRetention accepts Pulsar's retention: each bound -1 (none), 0 or
// more, and not one bound 0 with the other set (Pulsar refuses that too).
func checkRetention(raw json.RawMessage) error {
	var r resources.RetentionPolicies
	if err := json.Unmarshal(raw, &r); err != nil {
		return admin.Errorf(admin.ErrBadRequest, "retention: %s is not a valid value: %v", raw, err)
	}
	if r.RetentionTimeInMinutes < -1 || r.RetentionSizeInMB < -1 {
		return admin.Errorf(admin.ErrBadRequest, "retention: limits must be -1 (none) or more, got %+v", r)
	}
	if (r.RetentionTimeInMinutes == 0) != (r.RetentionSizeInMB == 0) {
		return admin.Errorf(admin.ErrBadRequest, "retention: time and size must be both 0 or both set, got %+v", r)
	}
	return nil
}

// TopicPolicy implements admin.TopicPolicies: the topic's own value of
// policy in the scope asked (nil when unset) or, applied, the value in
// force.
func (b *Broker) TopicPolicy(ctx context.Context, name, policy string, global, applied bool) (any, error) {
	spec, ok := topicPolicySpecs[policy]
	if !ok {
		return nil, fmt.Errorf("topic policy %s: %w", policy, admin.ErrNotSupported)
	}
	t, err := b.policyTopic(name)
	if err != nil {
		return nil, err
	}
	own, err := b.cfg.Resources.GetTopicPolicies(ctx, resourceTopic(t))
	if err != nil {
		return nil, err
	}
	cluster := b.policyScope(global)
	if !applied {
		if v, ok := own.Own(cluster, policy); ok {
			return v, nil
		}
		return nil, nil
	}
	if v, ok := own.Value(b.cfg.ClusterName, policy); ok {
		return v, nil
	}
	ns, err := b.cfg.Resources.NamespaceShared(ctx, t.Tenant, t.Namespace)
	if err != nil {
		return nil, err
	}
	return spec.fallback(b, ns), nil
}

// SetTopicPolicy implements admin.TopicPolicies: it validates and stores
// value (nil: removes the topic's own).
func (b *Broker) SetTopicPolicy(ctx context.Context, name, policy string, global bool, value json.RawMessage) error {
	spec, ok := topicPolicySpecs[policy]
	if !ok {
		return fmt.Errorf("topic policy %s: %w", policy, admin.ErrNotSupported)
	}
	t, err := b.policyTopic(name)
	if err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(value), []byte("null")) {
		value = nil // a JSON null removes, as DELETE
	}
	if value != nil {
		if err := spec.check(value); err != nil {
			return err
		}
	}
	cluster := b.policyScope(global)
	if err := b.cfg.Resources.SetTopicPolicy(ctx, resourceTopic(t), cluster, policy, value); err != nil {
		return err
	}
	b.log.Info("topic policy set", "topic", t.String(), "policy", policy, "global", global, "value", string(value))
	return nil
}

// ownPolicies are the topic's own policies (a partition's are its
// partitioned topic's), through the cache; zero when none can be read.
func (t *topic) ownPolicies(ctx context.Context) resources.TopicPolicies {
	p, _ := t.ownPoliciesOrErr(ctx)
	return p
}

// ownPoliciesOrErr is ownPolicies for callers that must tell "none" from
// "cannot be read" (deduplication at load).
func (t *topic) ownPoliciesOrErr(ctx context.Context) (resources.TopicPolicies, error) {
	res := t.b.cfg.Resources
	if res == nil {
		return resources.TopicPolicies{}, nil
	}
	if t.policiesRefErr != nil {
		return resources.TopicPolicies{}, t.policiesRefErr
	}
	// Kept while the cache's version stays: a publish and the once-a-
	// second passes over every topic read them, and at 10,000 topics the
	// cache's lookups (a lock and a map of 10,000 paths) were a twentieth
	// of the broker's CPU.
	v, live := res.TopicPoliciesVersion()
	if m := t.ownPoliciesMemo.Load(); live && m != nil && m.version == v {
		return m.policies, nil
	}
	p, err := res.TopicPoliciesAt(ctx, t.policiesRef)
	if err == nil && live {
		t.ownPoliciesMemo.Store(&policiesMemo{version: v, policies: p})
	}
	return p, err
}

// policiesMemo is a topic's own policies as read at a version of the
// topic policies cache.
type policiesMemo struct {
	version  uint64
	policies resources.TopicPolicies
}

// topicPolicy is the topic's own value of policy in this cluster.
func topicPolicy[T any](ctx context.Context, t *topic, policy string) (T, bool) {
	return resources.TopicPolicy[T](t.ownPolicies(ctx), t.b.cfg.ClusterName, policy)
}

// sizeLimitRefresh is how long a topic keeps its maxMessageSize policy
// before it reads it again.
const sizeLimitRefresh = time.Second

// messageSizeLimit is the topic's maxMessageSize policy (0: none beyond
// the broker's maxMessageSize), at most sizeLimitRefresh old.
func (t *topic) messageSizeLimit(now time.Time) int64 {
	if now.UnixNano() < t.sizeLimitUntil.Load() {
		return t.sizeLimit.Load()
	}
	limit, _ := topicPolicy[int64](t.b.ctx, t, "maxMessageSize")
	t.sizeLimit.Store(limit)
	t.sizeLimitUntil.Store(now.Add(sizeLimitRefresh).UnixNano())
	return limit
}
