package resources

import (
	"encoding/json"
	"fmt"
	"slices"
)

// AuthAction is what a role may do in a namespace.
type AuthAction string

// Pulsar's AuthAction values.
const (
	ActionProduce   AuthAction = "produce"
	ActionConsume   AuthAction = "consume"
	ActionFunctions AuthAction = "functions"
	ActionSources   AuthAction = "sources"
	ActionSinks     AuthAction = "sinks"
	ActionPackages  AuthAction = "packages"
)

var authActions = []AuthAction{ActionProduce, ActionConsume, ActionFunctions, ActionSources, ActionSinks, ActionPackages}

// AuthPolicies is Pulsar's AuthPolicies: the roles' permissions on the
// namespace, on single topics, and on subscriptions.
type AuthPolicies struct {
	NamespaceAuth         map[string][]AuthAction            `json:"namespace_auth"`
	DestinationAuth       map[string]map[string][]AuthAction `json:"destination_auth"`
	SubscriptionAuthRoles map[string][]string                `json:"subscription_auth_roles"`
}

// MarshalJSON writes empty maps, never null: Java readers expect them.
func (a AuthPolicies) MarshalJSON() ([]byte, error) {
	type plain AuthPolicies
	a.NamespaceAuth = orEmptyMap(a.NamespaceAuth)
	a.DestinationAuth = orEmptyMap(a.DestinationAuth)
	a.SubscriptionAuthRoles = orEmptyMap(a.SubscriptionAuthRoles)
	return json.Marshal(plain(a))
}

// BacklogQuotaType is the key of a namespace's backlog quota map.
type BacklogQuotaType string

// Pulsar's backlog quota types.
const (
	DestinationStorage BacklogQuotaType = "destination_storage"
	MessageAge         BacklogQuotaType = "message_age"
)

// RetentionPolicy is what the broker does when a backlog quota is hit.
type RetentionPolicy string

// Pulsar's backlog quota retention policies.
const (
	ProducerRequestHold     RetentionPolicy = "producer_request_hold"
	ProducerException       RetentionPolicy = "producer_exception"
	ConsumerBacklogEviction RetentionPolicy = "consumer_backlog_eviction"
)

// BacklogQuota is Pulsar's BacklogQuota. LimitSize is in bytes, LimitTime
// in seconds; -1 means no limit.
type BacklogQuota struct {
	LimitSize int64           `json:"limitSize"`
	LimitTime int             `json:"limitTime"`
	Policy    RetentionPolicy `json:"policy"`
}

// backlogQuotaJSON adds "limit", the pre-2.9.1 name of limitSize, which
// Pulsar still writes and reads when limitSize is absent.
type backlogQuotaJSON struct {
	Limit     *lenientInt     `json:"limit,omitempty"`
	LimitSize *lenientInt     `json:"limitSize,omitempty"`
	LimitTime lenientInt      `json:"limitTime"`
	Policy    RetentionPolicy `json:"policy"`
}

// MarshalJSON writes limitSize and, for older readers, limit.
func (q BacklogQuota) MarshalJSON() ([]byte, error) {
	size := lenientInt(q.LimitSize)
	return json.Marshal(backlogQuotaJSON{Limit: &size, LimitSize: &size, LimitTime: lenientInt(q.LimitTime), Policy: q.Policy})
}

// UnmarshalJSON reads limitSize, falling back to limit.
func (q *BacklogQuota) UnmarshalJSON(data []byte) error {
	var v backlogQuotaJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*q = BacklogQuota{LimitTime: int(v.LimitTime), Policy: v.Policy}
	switch {
	case v.LimitSize != nil:
		q.LimitSize = int64(*v.LimitSize)
	case v.Limit != nil:
		q.LimitSize = int64(*v.Limit)
	}
	return nil
}

// lenientInt is an integer that may also be written as a JSON string of
// one ("10240"), which Pulsar's JSON reader (Jackson, coercing scalars)
// accepts and clients send.
type lenientInt int64

func (n lenientInt) MarshalJSON() ([]byte, error) { return json.Marshal(int64(n)) }

func (n *lenientInt) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		data = []byte(s)
	}
	var v int64
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("want an integer, got %s", data)
	}
	*n = lenientInt(v)
	return nil
}

// RetentionPolicies is Pulsar's RetentionPolicies: how long, and how much,
// acknowledged data is kept. -1 means no limit; both 0 disables retention.
type RetentionPolicies struct {
	RetentionTimeInMinutes int   `json:"retentionTimeInMinutes"`
	RetentionSizeInMB      int64 `json:"retentionSizeInMB"`
}

// PersistencePolicies is Pulsar's PersistencePolicies: the ensemble, write
// and ack quorums of the namespace's topics' ledgers and the cursors'
// mark-delete rate limit (per second). A stretched cluster sets E=3,
// Qw=3, Qa=2 with region-aware placement (docs/sync-geo-replication.md).
type PersistencePolicies struct {
	BookkeeperEnsemble             int     `json:"bookkeeperEnsemble"`
	BookkeeperWriteQuorum          int     `json:"bookkeeperWriteQuorum"`
	BookkeeperAckQuorum            int     `json:"bookkeeperAckQuorum"`
	ManagedLedgerMaxMarkDeleteRate float64 `json:"managedLedgerMaxMarkDeleteRate"`
}

// BookieAffinityGroupData is Pulsar's BookieAffinityGroupData: the groups
// of the bookie rack map whose bookies the namespace's ledgers are placed
// on (the secondary when the primary has too few).
type BookieAffinityGroupData struct {
	BookkeeperAffinityGroupPrimary   string `json:"bookkeeperAffinityGroupPrimary"`
	BookkeeperAffinityGroupSecondary string `json:"bookkeeperAffinityGroupSecondary,omitempty"`
}

// PublishRate is Pulsar's PublishRate: at most PublishThrottlingRateInMsg
// messages and PublishThrottlingRateInByte bytes a second (each <= 0: no
// limit on it).
type PublishRate struct {
	PublishThrottlingRateInMsg  int   `json:"publishThrottlingRateInMsg"`
	PublishThrottlingRateInByte int64 `json:"publishThrottlingRateInByte"`
}

// UnmarshalJSON starts from Java's defaults (-1: no limit).
func (r *PublishRate) UnmarshalJSON(data []byte) error {
	type plain PublishRate
	v := plain{PublishThrottlingRateInMsg: -1, PublishThrottlingRateInByte: -1}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*r = PublishRate(v)
	return nil
}

// SubscribeRate is Pulsar's SubscribeRate: one consumer (its address and
// name) may subscribe to a topic at most SubscribeThrottlingRatePerConsumer
// times per RatePeriodInSecond (<= 0: no limit).
type SubscribeRate struct {
	SubscribeThrottlingRatePerConsumer int `json:"subscribeThrottlingRatePerConsumer"`
	RatePeriodInSecond                 int `json:"ratePeriodInSecond"`
}

// UnmarshalJSON starts from Java's defaults (no limit, 30 s).
func (r *SubscribeRate) UnmarshalJSON(data []byte) error {
	type plain SubscribeRate
	v := plain{SubscribeThrottlingRatePerConsumer: -1, RatePeriodInSecond: 30}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*r = SubscribeRate(v)
	return nil
}

// DispatchRate is Pulsar's DispatchRate(Impl): at most
// DispatchThrottlingRateInMsg messages and DispatchThrottlingRateInByte
// bytes every RatePeriodInSecond seconds (each <= 0: no limit on it);
// RelativeToPublishRate adds the topic's publish rate to both.
type DispatchRate struct {
	DispatchThrottlingRateInMsg  int   `json:"dispatchThrottlingRateInMsg"`
	DispatchThrottlingRateInByte int64 `json:"dispatchThrottlingRateInByte"`
	RatePeriodInSecond           int   `json:"ratePeriodInSecond"`
	RelativeToPublishRate        bool  `json:"relativeToPublishRate"`
}

// UnmarshalJSON starts from Java's defaults (no limits, a 1 s period),
// so a body that leaves members out, as pulsaradmin's lacks
// relativeToPublishRate, means what it means to Pulsar.
func (d *DispatchRate) UnmarshalJSON(data []byte) error {
	type plain DispatchRate
	v := plain{DispatchThrottlingRateInMsg: -1, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*d = DispatchRate(v)
	return nil
}

// Topic types of AutoTopicCreationOverride.
const (
	TopicTypePartitioned    = "partitioned"
	TopicTypeNonPartitioned = "non-partitioned"
)

// AutoTopicCreationOverride is Pulsar's namespace override of the broker's
// allowAutoTopicCreation settings.
type AutoTopicCreationOverride struct {
	AllowAutoTopicCreation bool   `json:"allowAutoTopicCreation"`
	TopicType              string `json:"topicType,omitempty"`
	DefaultNumPartitions   *int   `json:"defaultNumPartitions,omitempty"`
}

// AutoSubscriptionCreationOverride is Pulsar's namespace override of the
// broker's allowAutoSubscriptionCreation.
type AutoSubscriptionCreationOverride struct {
	AllowAutoSubscriptionCreation bool `json:"allowAutoSubscriptionCreation"`
}

// Defaults of Pulsar's Policies for its enum-valued fields.
const (
	SubscriptionAuthModeNone           = "None"
	SchemaAutoUpdateFull               = "Full"
	SchemaCompatibilityUndefined       = "UNDEFINED"
	defaultOffloadThreshold      int64 = -1
)

// Policies is Pulsar's namespace Policies, stored at
// /admin/policies/<tenant>/<namespace>. Nil pointers are "not set: the
// broker's default applies", as Java's nulls. Members not modelled here
// are kept in Extra and written back unchanged.
type Policies struct {
	AuthPolicies        AuthPolicies                      `json:"auth_policies"`
	ReplicationClusters []string                          `json:"replication_clusters"`
	AllowedClusters     []string                          `json:"allowed_clusters,omitempty"`
	Bundles             *BundlesData                      `json:"bundles,omitempty"`
	BacklogQuotaMap     map[BacklogQuotaType]BacklogQuota `json:"backlog_quota_map"`

	DeduplicationEnabled      *bool                      `json:"deduplicationEnabled,omitempty"`
	AutoTopicCreationOverride *AutoTopicCreationOverride `json:"autoTopicCreationOverride,omitempty"`
	// AutoSubscriptionCreationOverride overrides the broker's
	// allowAutoSubscriptionCreation for the namespace.
	AutoSubscriptionCreationOverride *AutoSubscriptionCreationOverride `json:"autoSubscriptionCreationOverride,omitempty"`
	MessageTTLInSeconds              *int                              `json:"message_ttl_in_seconds,omitempty"`
	RetentionPolicies                *RetentionPolicies                `json:"retention_policies,omitempty"`
	Persistence                      *PersistencePolicies              `json:"persistence,omitempty"`
	BookieAffinityGroup              *BookieAffinityGroupData          `json:"bookieAffinityGroup,omitempty"`
	// ReplicatorDispatchRate is keyed by the cluster whose replicators it
	// limits: the cluster of the broker that was asked to set it, as
	// Pulsar's Namespaces resource keys it.
	ReplicatorDispatchRate map[string]DispatchRate `json:"replicatorDispatchRate"`
	// TopicDispatchRate and SubscriptionDispatchRate limit, per cluster,
	// what each topic (all its subscriptions together) and each
	// subscription dispatches to consumers.
	TopicDispatchRate        map[string]DispatchRate `json:"topicDispatchRate"`
	SubscriptionDispatchRate map[string]DispatchRate `json:"subscriptionDispatchRate"`
	// PublishMaxMessageRate limits, per cluster, what the producers of
	// each topic publish a second.
	PublishMaxMessageRate map[string]PublishRate `json:"publishMaxMessageRate"`
	// ClusterSubscribeRate limits, per cluster, how often one consumer
	// may subscribe to a topic.
	ClusterSubscribeRate map[string]SubscribeRate `json:"clusterSubscribeRate"`
	Deleted              bool                     `json:"deleted"`
	EncryptionRequired   bool                     `json:"encryption_required"`
	SubscriptionAuthMode string                   `json:"subscription_auth_mode"`

	MaxProducersPerTopic              *int `json:"max_producers_per_topic,omitempty"`
	MaxConsumersPerTopic              *int `json:"max_consumers_per_topic,omitempty"`
	MaxConsumersPerSubscription       *int `json:"max_consumers_per_subscription,omitempty"`
	MaxUnackedMessagesPerConsumer     *int `json:"max_unacked_messages_per_consumer,omitempty"`
	MaxUnackedMessagesPerSubscription *int `json:"max_unacked_messages_per_subscription,omitempty"`
	MaxSubscriptionsPerTopic          *int `json:"max_subscriptions_per_topic,omitempty"`
	// DeduplicationSnapshotIntervalSeconds is the namespace's
	// deduplication snapshot interval (unset: the broker's).
	DeduplicationSnapshotIntervalSeconds *int  `json:"deduplicationSnapshotIntervalSeconds,omitempty"`
	OffloadThreshold                     int64 `json:"offload_threshold"`
	// CompactionThreshold starts a topic's compaction once this many
	// bytes were added since the last (0: never; unset: the broker's
	// brokerServiceCompactionThresholdInBytes).
	CompactionThreshold *int64 `json:"compaction_threshold,omitempty"`
	// OffloadThresholdInSeconds offloads a topic's ledgers older than this
	// (unset or -1: not by age); OffloadDeletionLagMs deletes their bookie copies
	// that long after (unset: the broker's); OffloadPolicies are the
	// namespace's tiered storage settings (unset: the broker's).
	OffloadThresholdInSeconds *int64           `json:"offload_threshold_in_seconds,omitempty"`
	OffloadDeletionLagMs      *int64           `json:"offload_deletion_lag_ms,omitempty"`
	OffloadPolicies           *OffloadPolicies `json:"offload_policies,omitempty"`

	// SchemaAutoUpdateCompatibilityStrategy is deprecated in Pulsar and
	// unset ("", null in Pulsar's JSON) in new namespaces; an UNDEFINED
	// SchemaCompatibilityStrategy falls back to it when set.
	SchemaAutoUpdateCompatibilityStrategy string `json:"schema_auto_update_compatibility_strategy,omitempty"`
	SchemaCompatibilityStrategy           string `json:"schema_compatibility_strategy"`
	IsAllowAutoUpdateSchema               *bool  `json:"is_allow_auto_update_schema,omitempty"`
	SchemaValidationEnforced              bool   `json:"schema_validation_enforced"`
	// SubscriptionExpirationTimeMinutes deletes subscriptions inactive
	// (no consumer) this long (0: never; unset: the broker's
	// subscriptionExpirationTimeMinutes).
	SubscriptionExpirationTimeMinutes *int `json:"subscription_expiration_time_minutes,omitempty"`
	// MaxTopicsPerNamespace bounds the namespace's persistent topics (a
	// partitioned topic counts its partitions); 0 or unset: no limit.
	MaxTopicsPerNamespace *int `json:"max_topics_per_namespace,omitempty"`
	// DelayedDeliveryPolicies are the namespace's delayed delivery
	// settings (unset: the broker's delayedDelivery* settings).
	DelayedDeliveryPolicies *DelayedDeliveryPolicies `json:"delayed_delivery_policies,omitempty"`
	// Properties are the namespace's labels (Pulsar's namespace
	// properties): the broker gives them no meaning.
	Properties map[string]string `json:"properties,omitempty"`

	// Extra holds the members this type does not model, verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

// NewPolicies returns the policies of Java's new Policies(): nothing set,
// empty collections, Pulsar's enum defaults.
func NewPolicies() Policies {
	return Policies{
		AuthPolicies: AuthPolicies{NamespaceAuth: map[string][]AuthAction{},
			DestinationAuth: map[string]map[string][]AuthAction{}, SubscriptionAuthRoles: map[string][]string{}},
		ReplicationClusters:         []string{},
		BacklogQuotaMap:             map[BacklogQuotaType]BacklogQuota{},
		SubscriptionAuthMode:        SubscriptionAuthModeNone,
		OffloadThreshold:            defaultOffloadThreshold,
		SchemaCompatibilityStrategy: SchemaCompatibilityUndefined,
	}
}

type plainPolicies Policies

// UnmarshalJSON starts from NewPolicies, so members left out take Java's
// defaults, and keeps unknown members in Extra.
func (p *Policies) UnmarshalJSON(data []byte) error {
	v := plainPolicies(NewPolicies())
	extra, err := decodeWithExtra(data, &v)
	if err != nil {
		return err
	}
	v.Extra = extra
	*p = Policies(v)
	p.defaultEnums()
	return nil
}

// MarshalJSON writes Pulsar's JSON, empty collections as [] and {}, and
// the Extra members.
func (p Policies) MarshalJSON() ([]byte, error) {
	p.ReplicationClusters = orEmptySlice(p.ReplicationClusters)
	p.BacklogQuotaMap = orEmptyMap(p.BacklogQuotaMap)
	p.ReplicatorDispatchRate = orEmptyMap(p.ReplicatorDispatchRate)
	p.TopicDispatchRate = orEmptyMap(p.TopicDispatchRate)
	p.SubscriptionDispatchRate = orEmptyMap(p.SubscriptionDispatchRate)
	p.PublishMaxMessageRate = orEmptyMap(p.PublishMaxMessageRate)
	p.ClusterSubscribeRate = orEmptyMap(p.ClusterSubscribeRate)
	return encodeWithExtra(plainPolicies(p), p.Extra)
}

// defaultEnums treats "" as the default: clients such as pulsaradmin send
// zero values for fields they do not set.
func (p *Policies) defaultEnums() {
	if p.SubscriptionAuthMode == "" {
		p.SubscriptionAuthMode = SubscriptionAuthModeNone
	}
	if p.SchemaCompatibilityStrategy == "" {
		p.SchemaCompatibilityStrategy = SchemaCompatibilityUndefined
	}
}

// canonicalize puts the sets Pulsar stores (Java Sets) in one order
// without duplicates, so equal policies encode equally.
func (p *Policies) canonicalize() {
	p.defaultEnums()
	p.ReplicationClusters = sortedSet(p.ReplicationClusters)
	p.AllowedClusters = sortedSet(p.AllowedClusters)
	for role, actions := range p.AuthPolicies.NamespaceAuth {
		p.AuthPolicies.NamespaceAuth[role] = sortedSet(actions)
	}
}

// EffectiveSchemaCompatibilityStrategy is what Pulsar reports for the
// namespace: the strategy if set, else the one the deprecated auto-update
// strategy implies.
func (p *Policies) EffectiveSchemaCompatibilityStrategy() string {
	if p.SchemaCompatibilityStrategy != SchemaCompatibilityUndefined {
		return p.SchemaCompatibilityStrategy
	}
	if s, ok := autoUpdateToCompatibility[p.SchemaAutoUpdateCompatibilityStrategy]; ok {
		return s
	}
	return SchemaCompatibilityUndefined
}

var autoUpdateToCompatibility = map[string]string{
	"AutoUpdateDisabled": "ALWAYS_INCOMPATIBLE", "Backward": "BACKWARD", "Forward": "FORWARD",
	"Full": "FULL", "AlwaysCompatible": "ALWAYS_COMPATIBLE", "BackwardTransitive": "BACKWARD_TRANSITIVE",
	"ForwardTransitive": "FORWARD_TRANSITIVE", "FullTransitive": "FULL_TRANSITIVE",
}

var schemaCompatibilityStrategies = []string{"UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE",
	"BACKWARD", "FORWARD", "FULL", "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"}

// clone deep-copies p through its JSON, which covers every field and
// Extra by construction.
func (p *Policies) clone() (Policies, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return Policies{}, err
	}
	var c Policies
	err = json.Unmarshal(raw, &c)
	return c, err
}

func orEmptySlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func orEmptyMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

func sortedSet[T ~string](s []T) []T {
	if s == nil {
		return nil
	}
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// DelayedDeliveryPolicies are Pulsar's delayed delivery settings of a
// namespace or topic: whether messages with a delivery time are held
// (Active), how often held messages are looked at (TickTime, ms), and the
// longest delay a producer may ask (MaxDeliveryDelayInMillis; 0: any).
type DelayedDeliveryPolicies struct {
	TickTime                 int64 `json:"tickTime"`
	Active                   bool  `json:"active"`
	MaxDeliveryDelayInMillis int64 `json:"maxDeliveryDelayInMillis"`
}

// UnmarshalJSON also takes maxDelayInMillis, the name pulsaradmin's
// DelayedDeliveryData sends the longest delay under.
func (d *DelayedDeliveryPolicies) UnmarshalJSON(data []byte) error {
	var v struct {
		TickTime                 int64  `json:"tickTime"`
		Active                   bool   `json:"active"`
		MaxDeliveryDelayInMillis *int64 `json:"maxDeliveryDelayInMillis"`
		MaxDelayInMillis         *int64 `json:"maxDelayInMillis"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*d = DelayedDeliveryPolicies{TickTime: v.TickTime, Active: v.Active}
	switch {
	case v.MaxDeliveryDelayInMillis != nil:
		d.MaxDeliveryDelayInMillis = *v.MaxDeliveryDelayInMillis
	case v.MaxDelayInMillis != nil:
		d.MaxDeliveryDelayInMillis = *v.MaxDelayInMillis
	}
	return nil
}

// Validate refuses negative times.
func (d DelayedDeliveryPolicies) Validate() error {
	if d.TickTime < 0 {
		return invalidf("delayed_delivery_policies.tickTime", "must be 0 or more, got %d", d.TickTime)
	}
	if d.MaxDeliveryDelayInMillis < 0 {
		return invalidf("delayed_delivery_policies.maxDeliveryDelayInMillis", "must be 0 or more, got %d", d.MaxDeliveryDelayInMillis)
	}
	return nil
}

// OffloadPolicies is Pulsar's OffloadPolicies (tiered storage) as the
// admin API carries it; members not modelled (the S3, GCS and Azure
// settings) are kept in Extra and written back unchanged.
type OffloadPolicies struct {
	ManagedLedgerOffloadDriver string `json:"managedLedgerOffloadDriver,omitempty"`
	// ThresholdInBytes keeps that many bytes of a topic on the bookies
	// (-1: no automatic offload by size); the older alias
	// AutoTriggerSizeThresholdBytes counts when it is not set.
	ManagedLedgerOffloadThresholdInBytes              *int64 `json:"managedLedgerOffloadThresholdInBytes,omitempty"`
	ManagedLedgerOffloadAutoTriggerSizeThresholdBytes *int64 `json:"managedLedgerOffloadAutoTriggerSizeThresholdBytes,omitempty"`
	ManagedLedgerOffloadThresholdInSeconds            *int64 `json:"managedLedgerOffloadThresholdInSeconds,omitempty"`
	ManagedLedgerOffloadDeletionLagInMillis           *int64 `json:"managedLedgerOffloadDeletionLagInMillis,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

type plainOffloadPolicies OffloadPolicies

// UnmarshalJSON keeps unknown members in Extra.
func (p *OffloadPolicies) UnmarshalJSON(data []byte) error {
	var v plainOffloadPolicies
	extra, err := decodeWithExtra(data, &v)
	if err != nil {
		return err
	}
	v.Extra = extra
	*p = OffloadPolicies(v)
	return nil
}

// MarshalJSON writes the modelled and the Extra members.
func (p OffloadPolicies) MarshalJSON() ([]byte, error) {
	return encodeWithExtra(plainOffloadPolicies(p), p.Extra)
}
