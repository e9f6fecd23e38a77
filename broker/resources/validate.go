package resources

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// MaxPartitions bounds a partitioned topic, as the broker does
// (broker/partitioned.go) and as Pulsar's maxNumPartitionsPerPartitionedTopic
// would.
const MaxPartitions = 10000

// Validate checks every field of p against Pulsar's rules and returns the
// first violation as a FieldError (ErrInvalid). It needs no other
// metadata; that replication clusters exist and are allowed is checked
// where policies are written.
func (p *Policies) Validate() error {
	checks := []func() error{
		p.validateClusters, p.validateAuth, p.validateBundles, p.validateBacklogQuotas,
		p.validateRetention, p.validateLimits, p.validateAutoTopicCreation, p.validateEnums, p.validatePersistence,
		p.validateDispatchRates,
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (p *Policies) validateClusters() error {
	for i, c := range p.ReplicationClusters {
		if err := ValidateName(fmt.Sprintf("replication_clusters[%d]", i), c); err != nil {
			return err
		}
	}
	for i, c := range p.AllowedClusters {
		if err := ValidateName(fmt.Sprintf("allowed_clusters[%d]", i), c); err != nil {
			return err
		}
	}
	return nil
}

func (p *Policies) validateAuth() error {
	// Sorted, so that the error reported is always the same one.
	for _, role := range slices.Sorted(maps.Keys(p.AuthPolicies.NamespaceAuth)) {
		if err := validateGrant("auth_policies.namespace_auth", role, p.AuthPolicies.NamespaceAuth[role]); err != nil {
			return err
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(p.AuthPolicies.DestinationAuth)) {
		grants := p.AuthPolicies.DestinationAuth[topic]
		for _, role := range slices.Sorted(maps.Keys(grants)) {
			if err := validateGrant("auth_policies.destination_auth."+topic, role, grants[role]); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateActions checks a role's actions; field names them in the error.
func validateActions(field string, actions []AuthAction) error {
	for i, a := range actions {
		if !slices.Contains(authActions, a) {
			return invalidf(fmt.Sprintf("%s[%d]", field, i), "unknown action %q, want one of %v", a, authActions)
		}
	}
	return nil
}

func validateGrant(field, role string, actions []AuthAction) error {
	if role == "" {
		return invalidf(field, "empty role")
	}
	return validateActions(field+"."+role, actions)
}

func (p *Policies) validateBundles() error {
	if p.Bundles == nil {
		return nil // not set: the broker's default applies
	}
	return p.Bundles.validate()
}

func (p *Policies) validateBacklogQuotas() error {
	for _, typ := range slices.Sorted(maps.Keys(p.BacklogQuotaMap)) {
		q, field := p.BacklogQuotaMap[typ], "backlog_quota_map."+string(typ)
		if typ != DestinationStorage && typ != MessageAge {
			return invalidf("backlog_quota_map", "unknown backlog quota type %q, want %s or %s", typ, DestinationStorage, MessageAge)
		}
		if err := validateBacklogQuota(field, q); err != nil {
			return err
		}
	}
	return nil
}

// validateBacklogQuota checks one quota; field prefixes its members.
func validateBacklogQuota(field string, q BacklogQuota) error {
	if q.LimitSize < -1 {
		return invalidf(field+".limitSize", "must be >= -1, got %d", q.LimitSize)
	}
	if err := int32Field(field+".limitTime", int64(q.LimitTime), -1); err != nil {
		return err
	}
	switch q.Policy {
	case ProducerRequestHold, ProducerException, ConsumerBacklogEviction:
		return nil
	}
	return invalidf(field+".policy", "unknown policy %q, want %s, %s or %s",
		q.Policy, ProducerRequestHold, ProducerException, ConsumerBacklogEviction)
}

func (p *Policies) validateRetention() error {
	r := p.RetentionPolicies
	if r == nil {
		return nil
	}
	if err := int32Field("retention_policies.retentionTimeInMinutes", int64(r.RetentionTimeInMinutes), -1); err != nil {
		return err
	}
	if r.RetentionSizeInMB < -1 {
		return invalidf("retention_policies.retentionSizeInMB", "must be >= -1, got %d", r.RetentionSizeInMB)
	}
	if (r.RetentionTimeInMinutes == 0) != (r.RetentionSizeInMB == 0) {
		return invalidf("retention_policies", "a single limit of 0 is invalid when the other is set; "+
			"use -1 to ignore a limit, or set both to 0 to disable retention (got %d minutes, %d MB)",
			r.RetentionTimeInMinutes, r.RetentionSizeInMB)
	}
	return p.validateRetentionAboveQuota()
}

// validateRetentionAboveQuota is Pulsar's rule that retained data must
// outlast the backlog quota: otherwise the quota could never be reached
// before retention dropped the data it counts.
func (p *Policies) validateRetentionAboveQuota() error {
	r := p.RetentionPolicies
	if q, ok := p.BacklogQuotaMap[DestinationStorage]; ok && r.RetentionSizeInMB > 0 && q.LimitSize > 0 &&
		r.RetentionSizeInMB <= math.MaxInt64>>20 && q.LimitSize >= r.RetentionSizeInMB<<20 {
		return invalidf("retention_policies.retentionSizeInMB",
			"must exceed the destination_storage backlog quota (%d bytes), got %d MB", q.LimitSize, r.RetentionSizeInMB)
	}
	if q, ok := p.BacklogQuotaMap[MessageAge]; ok && r.RetentionTimeInMinutes > 0 && q.LimitTime > 0 &&
		int64(q.LimitTime) >= int64(r.RetentionTimeInMinutes)*60 {
		return invalidf("retention_policies.retentionTimeInMinutes",
			"must exceed the message_age backlog quota (%d s), got %d min", q.LimitTime, r.RetentionTimeInMinutes)
	}
	return nil
}

func (p *Policies) validateLimits() error {
	limits := []struct {
		field string
		value *int
	}{
		{"message_ttl_in_seconds", p.MessageTTLInSeconds},
		{"max_producers_per_topic", p.MaxProducersPerTopic},
		{"max_consumers_per_topic", p.MaxConsumersPerTopic},
		{"max_consumers_per_subscription", p.MaxConsumersPerSubscription},
		{"max_unacked_messages_per_consumer", p.MaxUnackedMessagesPerConsumer},
		{"max_unacked_messages_per_subscription", p.MaxUnackedMessagesPerSubscription},
		{"max_topics_per_namespace", p.MaxTopicsPerNamespace},
		{"max_subscriptions_per_topic", p.MaxSubscriptionsPerTopic},
		{"deduplicationSnapshotIntervalSeconds", p.DeduplicationSnapshotIntervalSeconds},
	}
	for _, l := range limits {
		if l.value == nil {
			continue
		}
		if err := int32Field(l.field, int64(*l.value), 0); err != nil {
			return err
		}
	}
	if v := p.SubscriptionExpirationTimeMinutes; v != nil && *v < 0 {
		return kindf(ErrPrecondition, "Invalid value for subscription expiration time") // Pulsar's words
	}
	if p.OffloadThreshold < -1 {
		return invalidf("offload_threshold", "must be >= -1, got %d", p.OffloadThreshold)
	}
	return nil
}

// int32Field checks a value Java holds in an int (Integer).
func int32Field(field string, v, lowest int64) error {
	if v < lowest {
		return invalidf(field, "must be >= %d, got %d", lowest, v)
	}
	if v > math.MaxInt32 {
		return invalidf(field, "must be <= %d, got %d", math.MaxInt32, v)
	}
	return nil
}

// validateAutoTopicCreation is Pulsar's AutoTopicCreationOverride.validateOverride,
// with its reasons word for word (tools match them).
func (p *Policies) validateAutoTopicCreation() error {
	o := p.AutoTopicCreationOverride
	if o == nil || !o.AllowAutoTopicCreation {
		return nil
	}
	const field = "autoTopicCreationOverride"
	pulsarReason := func(detail string) error {
		return kindf(ErrInvalid, "Invalid configuration for autoTopicCreationOverride. the detail is %s", detail)
	}
	switch o.TopicType {
	case TopicTypePartitioned:
		if o.DefaultNumPartitions == nil {
			return pulsarReason("[defaultNumPartitions] cannot be null when the type is partitioned.")
		}
		if n := *o.DefaultNumPartitions; n < 1 {
			return pulsarReason("[defaultNumPartitions] cannot be less than 1 for partition type.")
		} else if n > MaxPartitions {
			return invalidf(field+".defaultNumPartitions", "must be at most %d, got %d", MaxPartitions, n)
		}
	case TopicTypeNonPartitioned:
		if o.DefaultNumPartitions != nil {
			return pulsarReason("[defaultNumPartitions] is not allowed to be set when the type is non-partition.")
		}
	default:
		return invalidf(field+".topicType", "unknown topic type %q, want %s or %s",
			o.TopicType, TopicTypePartitioned, TopicTypeNonPartitioned)
	}
	return nil
}

func (p *Policies) validateEnums() error {
	if !slices.Contains(schemaCompatibilityStrategies, p.SchemaCompatibilityStrategy) {
		return invalidf("schema_compatibility_strategy", "unknown strategy %q, want one of %v",
			p.SchemaCompatibilityStrategy, schemaCompatibilityStrategies)
	}
	if _, ok := autoUpdateToCompatibility[p.SchemaAutoUpdateCompatibilityStrategy]; !ok && p.SchemaAutoUpdateCompatibilityStrategy != "" {
		return invalidf("schema_auto_update_compatibility_strategy", "unknown strategy %q",
			p.SchemaAutoUpdateCompatibilityStrategy)
	}
	if p.SubscriptionAuthMode != SubscriptionAuthModeNone && p.SubscriptionAuthMode != "Prefix" {
		return invalidf("subscription_auth_mode", "unknown mode %q, want None or Prefix", p.SubscriptionAuthMode)
	}
	return nil
}

// Validate is Pulsar's rule for persistence policies, of a namespace or
// a topic: E >= Qw >= Qa >= 1, a mark-delete rate of 0 or more.
func (q PersistencePolicies) Validate() error {
	if !(q.BookkeeperEnsemble >= q.BookkeeperWriteQuorum && q.BookkeeperWriteQuorum >= q.BookkeeperAckQuorum && q.BookkeeperAckQuorum >= 1) {
		return invalidf("persistence", "Bookkeeper Ensemble (%d) >= WriteQuorum (%d) >= AckQuorum (%d) >= 1 must hold",
			q.BookkeeperEnsemble, q.BookkeeperWriteQuorum, q.BookkeeperAckQuorum)
	}
	if q.ManagedLedgerMaxMarkDeleteRate < 0 {
		return invalidf("persistence.managedLedgerMaxMarkDeleteRate", "must be >= 0, got %g", q.ManagedLedgerMaxMarkDeleteRate)
	}
	return nil
}

// validatePersistence is Pulsar's rule: E >= Qw >= Qa >= 1 (Pulsar
// answers 412 for it; a FieldError here is 400), a mark-delete rate of 0
// or more; an affinity group names its primary.
func (p *Policies) validatePersistence() error {
	if q := p.Persistence; q != nil {
		if err := q.Validate(); err != nil {
			return err
		}
	}
	if d := p.DelayedDeliveryPolicies; d != nil {
		if err := d.Validate(); err != nil {
			return err
		}
	}
	if g := p.BookieAffinityGroup; g != nil && g.BookkeeperAffinityGroupPrimary == "" {
		return invalidf("bookieAffinityGroup.bookkeeperAffinityGroupPrimary", "is required")
	}
	return nil
}

// validateDispatchRates: a period of at least a second (Pulsar's
// rate limiter takes whole seconds).
func (p *Policies) validateDispatchRates() error {
	for _, m := range []struct {
		name  string
		rates map[string]DispatchRate
	}{{"replicatorDispatchRate", p.ReplicatorDispatchRate}, {"topicDispatchRate", p.TopicDispatchRate},
		{"subscriptionDispatchRate", p.SubscriptionDispatchRate}} {
		for _, c := range slices.Sorted(maps.Keys(m.rates)) {
			if r := m.rates[c]; r.RatePeriodInSecond < 1 {
				return invalidf(m.name+"."+c+".ratePeriodInSecond", "must be >= 1, got %d", r.RatePeriodInSecond)
			}
		}
	}
	return nil
}
