// Package broker serves the Pulsar binary protocol: official Pulsar
// clients connect, look topics up, produce and consume. Topics are stored
// in managed ledgers (managedledger.Factory); one file per command family
// (conn_*.go) says how each command behaves.
//
// Threading: frames of one connection are handled in order on the network
// event loop; anything that may block (opening a topic, metadata) runs on
// its own goroutine and answers later. Writes to a connection are safe
// from any goroutine.
package broker

import (
	"context"
	"errors"
	"fmt"
	"github.com/magnetar-io/magnetar/broker/console"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/internal/flightrec"
	"github.com/magnetar-io/magnetar/internal/gopool"
	"github.com/magnetar-io/magnetar/internal/stage"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
	"golang.org/x/sync/semaphore"
)

// Config holds the broker settings, under Pulsar's key names.
type Config struct {
	// OwnershipRequired marks a cluster broker (and standalone, which owns
	// its bundles too): until EnableOwnership it serves no topic and
	// answers lookups ServiceNotReady, so that a client reaching its
	// freshly opened ports cannot load a topic another broker owns.
	OwnershipRequired bool
	// TraceReaders logs every reader's (non-durable subscription's)
	// SUBSCRIBE, FLOW, delivery and acknowledgement at INFO. A test aid
	// (MAGNETAR_TEST_TRACE_READERS=1 sets it in cmd/magnetar): the fault
	// suite enables it so that a reader's disagreement can be told apart
	// as the broker's or the client's from what was actually sent. It also
	// traces transactions: each transactional message and marker stored,
	// each acknowledgement held and ended, each END_TXN.
	TraceReaders bool
	// ClusterName is clusterName.
	ClusterName string
	// AdvertisedAddress is host:port clients are told to connect to
	// (advertisedAddress + brokerServicePort).
	AdvertisedAddress string
	// MaxMessageSize is maxMessageSize (default 5 MiB).
	MaxMessageSize int
	// MaxPendingPublishRequestsPerConnection is
	// maxPendingPublishRequestsPerConnection (default 1000): a
	// connection stops being read while this many SENDs await storage.
	MaxPendingPublishRequestsPerConnection int
	// DispatcherMaxReadBatchSize is dispatcherMaxReadBatchSize (100).
	DispatcherMaxReadBatchSize int
	// MaxProducersPerTopic, MaxConsumersPerTopic and
	// MaxConsumersPerSubscription are Pulsar's keys of the same names
	// (0: no limit); namespace policies override them (limits.go).
	MaxProducersPerTopic, MaxConsumersPerTopic, MaxConsumersPerSubscription int
	// MaxUnackedMessagesPerConsumer and MaxUnackedMessagesPerSubscription
	// are Pulsar's keys of the same names (Pulsar's defaults are 50000 and
	// 200000; 0: no limit): on Shared and Key_Shared subscriptions a
	// consumer, or the whole subscription, gets nothing more while that
	// many delivered messages are unacknowledged, until half are.
	MaxUnackedMessagesPerConsumer, MaxUnackedMessagesPerSubscription int
	// BrokerEntryTimestamp and BrokerEntryIndex are the two
	// brokerEntryMetadataInterceptors (ParseEntryMetadataInterceptors):
	// entries are stored with broker entry metadata (entrymetadata.go).
	// ExposeBrokerEntryMetadata is
	// exposingBrokerEntryMetadataToClientEnabled: consumers whose client
	// supports it receive that metadata.
	BrokerEntryTimestamp, BrokerEntryIndex, ExposeBrokerEntryMetadata bool
	// AcknowledgmentAtBatchIndexLevelEnabled is
	// acknowledgmentAtBatchIndexLevelEnabled (false): acks of single
	// messages of a batch are kept by the cursor (batchack.go).
	AcknowledgmentAtBatchIndexLevelEnabled bool
	// AutoTopicCreationDisabled is allowAutoTopicCreation=false;
	// AutoTopicCreationType is allowAutoTopicCreationType
	// ("non-partitioned", the default, or "partitioned") and
	// DefaultNumPartitions defaultNumPartitions (1) (autocreate.go).
	AutoTopicCreationDisabled bool
	AutoTopicCreationType     string
	DefaultNumPartitions      int
	// BrokerDeduplicationEnabled is brokerDeduplicationEnabled: drop
	// resent messages by producer name and sequence id (dedup.go).
	BrokerDeduplicationEnabled bool
	// DeduplicationEntriesInterval is brokerDeduplicationEntriesInterval
	// (1000): stored entries between deduplication snapshots.
	DeduplicationEntriesInterval int
	// DeduplicationSnapshotInterval is
	// brokerDeduplicationSnapshotIntervalSeconds (120 s; 0: off): a
	// snapshot is also taken at the first stored entry once this long has
	// passed since the last, so a slow topic's replay at load stays short.
	// A topic's deduplicationSnapshotInterval policy wins.
	DeduplicationSnapshotInterval time.Duration
	// SubscriptionExpirationTime is subscriptionExpirationTimeMinutes (0:
	// never): subscriptions without consumers this long are deleted,
	// unless their namespace says otherwise (subexpiry.go); checked every
	// SubscriptionExpiryCheckInterval (subscriptionExpiryCheckIntervalInMinutes, 5).
	SubscriptionExpirationTime, SubscriptionExpiryCheckInterval time.Duration
	// CompactionThreshold is brokerServiceCompactionThresholdInBytes (0:
	// off): a topic whose bytes added since its last compaction pass it
	// is compacted, unless its namespace or topic policy says otherwise;
	// checked every CompactionMonitorInterval
	// (brokerServiceCompactionMonitorIntervalInSeconds, 60 s).
	CompactionThreshold       int64
	CompactionMonitorInterval time.Duration
	// Transactions (txncoord.go, txnbuffer.go, pendingack.go):
	// TransactionCoordinatorEnabled is transactionCoordinatorEnabled
	// (off: transaction commands answer NotAllowed, transactional SENDs
	// and ACKs are refused). TransactionCoordinators is how many
	// coordinators to record when the assign topic has none yet
	// (standalone's 1; initialize-cluster-metadata records its own).
	// TransactionBufferSnapshotMaxTransactionCount and
	// TransactionBufferSnapshotMinTime are
	// transactionBufferSnapshotMaxTransactionCount (1000) and
	// transactionBufferSnapshotMinTimeInMillis (5 s).
	// MaxActiveTransactionsPerCoordinator is
	// maxActiveTransactionsPerCoordinator (0: no limit).
	TransactionCoordinatorEnabled                bool
	TransactionCoordinators                      int
	TransactionBufferSnapshotMaxTransactionCount int
	TransactionBufferSnapshotMinTime             time.Duration
	MaxActiveTransactionsPerCoordinator          int
	// Offload is the broker's tiered storage policy
	// (managedLedgerOffloadDriver, ...AutoTriggerSizeThresholdBytes,
	// ...ThresholdInSeconds, ...DeletionLagMs), applied at every
	// retention check unless a namespace or topic says otherwise
	// (offload.go). Driver "" with no policy naming one: no offload.
	Offload managedledger.OffloadPolicy
	// MaxSubscriptionsPerTopic is maxSubscriptionsPerTopic (0: none): a
	// new durable subscription past it is refused (NotAllowed) unless the
	// namespace's max_subscriptions_per_topic or the topic's policy says
	// otherwise.
	MaxSubscriptionsPerTopic int
	// DelayedDeliveryDisabled is delayedDeliveryEnabled=false: messages
	// with a delivery time go out at once. DelayedDeliveryTickTime
	// (delayedDeliveryTickTimeMillis; 0: none) spaces the releases of held
	// messages; DelayedDeliveryMaxDelay (delayedDeliveryMaxDelayInMillis;
	// 0: none) refuses a SEND asking a longer delay. A namespace's or
	// topic's delayedDelivery policy wins over all three.
	DelayedDeliveryDisabled                          bool
	DelayedDeliveryTickTime, DelayedDeliveryMaxDelay time.Duration
	// SchemaValidationEnforced is isSchemaValidationEnforced: a producer
	// without a schema is refused on a topic that has one, unless the
	// topic's or its namespace's schemaValidationEnforced says otherwise.
	SchemaValidationEnforced bool
	// MessageTTL is ttlDurationDefaultInSeconds: messages older than this
	// count as acknowledged (0: never).
	MessageTTL time.Duration
	// MessageExpiryCheckInterval is messageExpiryCheckIntervalInMinutes
	// (default 5 minutes).
	MessageExpiryCheckInterval time.Duration
	// DefaultRetentionMinutes and DefaultRetentionMB are
	// defaultRetentionTimeInMinutes and defaultRetentionSizeInMB (-1: no
	// limit; RetentionOf): a topic's retention unless its namespace sets
	// retention_policies.
	DefaultRetentionMinutes int
	DefaultRetentionMB      int64
	// MetadataStoreURL and ConfigurationStoreURL name the stores, for the
	// internal-configuration endpoint.
	MetadataStoreURL, ConfigurationStoreURL string
	// RetentionCheckInterval is retentionCheckIntervalInSeconds (default
	// 120 s): how often loaded topics are trimmed by their retention, so
	// that time-based retention applies on topics nobody acknowledges on.
	RetentionCheckInterval time.Duration
	// BacklogQuotaDefaultLimitBytes is backlogQuotaDefaultLimitBytes: the
	// largest subscription backlog a topic may have (0 or negative: no
	// limit; backlogquota.go).
	BacklogQuotaDefaultLimitBytes int64
	// BacklogQuotaDefaultRetentionPolicy is backlogQuotaDefaultRetentionPolicy:
	// producer_request_hold (default), producer_exception or
	// consumer_backlog_eviction.
	BacklogQuotaDefaultRetentionPolicy string
	// BacklogQuotaCheckInterval is backlogQuotaCheckIntervalInSeconds
	// (default 60 s).
	BacklogQuotaCheckInterval time.Duration
	// KeepAliveInterval is keepAliveIntervalSeconds (default 30 s): the
	// broker pings every connection this often and closes one that sent
	// nothing (not even a PONG) for two intervals.
	KeepAliveInterval time.Duration
	// StatsUpdateFrequency is statsUpdateFrequencyInSecs (default 60 s):
	// the interval over which topic rates (stats, load reports) are computed.
	StatsUpdateFrequency time.Duration
	// MaxConcurrentLookupRequest is maxConcurrentLookupRequest (50000):
	// lookups beyond it are answered TooManyRequests, which clients retry.
	// MaxConcurrentTopicLoadRequest is maxConcurrentTopicLoadRequest
	// (5000): topic loads beyond it wait for one to finish.
	MaxConcurrentLookupRequest, MaxConcurrentTopicLoadRequest int
	// MaxConnections and MaxConnectionsPerIP are brokerMaxConnections and
	// brokerMaxConnectionsPerIp (0: unbounded, Pulsar's default): a client
	// connection past either is closed as soon as it is accepted. Each
	// binary port (plain, TLS) counts its own connections. Whatever
	// they say, connections never take the last file descriptors of the
	// process (netio.Options.FDHeadroom).
	MaxConnections, MaxConnectionsPerIP int
	// ReplicationPolicyCheckInterval is how often loaded topics compare
	// their replicators with their replication clusters (default 5 s; a
	// topic also checks as it loads). ReplicationProducerQueueSize is
	// replicationProducerQueueSize (1000): entries a replicator has in
	// flight to a remote cluster (replicator.go).
	ReplicationPolicyCheckInterval time.Duration
	ReplicationProducerQueueSize   int
	// ReplicationStartAt is replicationStartAt: where a replicator cursor
	// created for a cluster newly in a topic's replication clusters
	// starts, "latest" (default, Pulsar's: what is published from then
	// on) or "earliest" (what the topic still stores, too).
	ReplicationStartAt string
	// DispatchThrottlingRatePerReplicatorInMsg and ...InByte are Pulsar's
	// keys: what each replicator sends a second at most, without a
	// namespace replicatorDispatchRate (0: no limit; dynamic).
	DispatchThrottlingRatePerReplicatorInMsg  int64
	DispatchThrottlingRatePerReplicatorInByte int64
	// DispatchThrottlingRatePerTopicIn{Msg,Byte} and
	// DispatchThrottlingRatePerSubscriptionIn{Msg,Byte} are Pulsar's keys:
	// what each topic (all its subscriptions together) and each
	// subscription dispatches to consumers a second at most, without a
	// topic or namespace dispatchRate / subscriptionDispatchRate (0: no
	// limit; dynamic).
	DispatchThrottlingRatePerTopicInMsg, DispatchThrottlingRatePerTopicInByte               int64
	DispatchThrottlingRatePerSubscriptionInMsg, DispatchThrottlingRatePerSubscriptionInByte int64
	// MaxPublishRatePerTopicInMessages and ...InBytes are Pulsar's keys:
	// what each topic's producers publish a second at most, without a
	// topic publishRate or namespace publishMaxMessageRate (0: no limit;
	// dynamic).
	MaxPublishRatePerTopicInMessages, MaxPublishRatePerTopicInBytes int64
	// SubscribeThrottlingRatePerConsumer and
	// SubscribeRatePeriodPerConsumerInSecond are Pulsar's keys: how often
	// one consumer may subscribe to a topic, without a topic subscribeRate
	// or namespace clusterSubscribeRate (0: no limit; 30 s; dynamic).
	SubscribeThrottlingRatePerConsumer, SubscribeRatePeriodPerConsumerInSecond int64
	// AutoSubscriptionCreationDisabled is allowAutoSubscriptionCreation=false
	// (Pulsar's default is true; dynamic): a SUBSCRIBE to a durable
	// subscription that does not exist is refused (SubscriptionNotFound)
	// unless the namespace's autoSubscriptionCreation override allows it.
	AutoSubscriptionCreationDisabled bool
	// Replicated subscriptions (replsubs.go). ReplicatedSubscriptionsDisabled
	// is enableReplicatedSubscriptions=false (Pulsar's default is on).
	// ReplicatedSubscriptionsSnapshotFrequency is
	// replicatedSubscriptionsSnapshotFrequencyMillis (1 s): how often a
	// topic with replicated subscriptions and new data takes a snapshot.
	// ReplicatedSubscriptionsSnapshotTimeout is
	// replicatedSubscriptionsSnapshotTimeoutSeconds (30 s): a snapshot
	// whose responses are not all in by then is dropped.
	// ReplicatedSubscriptionsSnapshotMaxCached is
	// replicatedSubscriptionsSnapshotMaxCachedPerSubscription (10).
	ReplicatedSubscriptionsDisabled          bool
	ReplicatedSubscriptionsSnapshotFrequency time.Duration
	ReplicatedSubscriptionsSnapshotTimeout   time.Duration
	ReplicatedSubscriptionsSnapshotMaxCached int
	// InProcessBookieDisks reports standalone's in-process bookie's disks
	// (it is registered without an HTTP address to ask).
	InProcessBookieDisks func() console.Disks
	// MetricsByNamespace is exposeTopicLevelMetricsInPrometheus=false:
	// /metrics sums the per-topic families per namespace (labels cluster
	// and namespace, plus pulsar_topics_count), as Pulsar does, for
	// brokers whose topics are too many to export one by one.
	MetricsByNamespace bool
	// ConsoleDisabled (consoleEnabled=false) turns /console off;
	// ConsoleReadOnly (consoleReadOnly) lets the console show but change
	// nothing (console.Config.ReadOnly).
	ConsoleDisabled, ConsoleReadOnly bool
	// Version is reported to clients in CONNECTED.
	Version string
	// Metadata is the configuration store holding partitioned-topic
	// metadata (/admin/partitioned-topics/...); nil means no topic is
	// partitioned.
	Metadata metadata.Store
	// ClusterMetadata is the cluster's metadata store (metadataStoreUrl),
	// where bookies register (registry.AvailablePath): GET
	// /admin/v2/bookies/all lists them. It is Metadata when one store
	// serves both; nil answers that endpoint 412.
	ClusterMetadata metadata.Store
	// Resources reads and writes tenants, namespaces and their policies
	// in the configuration store; nil leaves the admin API for them off
	// and gives every namespace the default bundles.
	Resources *resources.Resources
	// Schemas is the schema registry (conn_schema.go): producers' and
	// consumers' schemas are checked and stored there, GET_SCHEMA is served
	// from it and its admin endpoints are mounted. Nil (the default): no
	// schema is stored, producers' schemas are accepted unchecked and
	// GET_SCHEMA answers an error.
	Schemas *schema.Registry
	// Authentication is authenticationEnabled's providers (nil: off, every
	// client is let in without a role; conn_auth.go and httpauth.go).
	Authentication *auth.Authenticator
	// Authorization is authorizationEnabled's authorizer (nil: off,
	// everyone may do everything).
	Authorization *auth.Authorizer
	// ProxyRoles (proxyRoles) may connect for a client named in
	// original_principal (X-Original-Principal over HTTP); see
	// auth.ProxyRoles.
	ProxyRoles auth.ProxyRoles
	// BrokerClient is brokerClientAuthenticationPlugin/Parameters: what
	// this broker presents to other brokers (admin calls, replicators to
	// clusters without credentials of their own); nil: none, and admin
	// calls carry the caller's Authorization header.
	BrokerClient *auth.ClientCredentials
	// BrokerClientTLSEnabled (brokerClientTlsEnabled) makes this broker's
	// connections to other brokers and clusters use their TLS ports,
	// checked with BrokerClientTLS (brokerClientTrustCertsFilePath,
	// tlsAllowInsecureConnection, tlsHostnameVerificationEnabled).
	BrokerClientTLSEnabled bool
	BrokerClientTLS        auth.ClientTLS
	// FlightRecorder, when set, is told each publish's latency and keeps a
	// trace of slow ones (flightRecorderDir; internal/flightrec).
	FlightRecorder *flightrec.Recorder
	// Stages, when set, records the broker's stages of each publish
	// (broker_to_storage, receipt; internal/stage).
	Stages *stage.Recorder
	// AuthenticationRefreshCheck is authenticationRefreshCheckSeconds
	// (default 60 s): how often connections' credentials are checked for
	// expiry (conn_auth.go).
	AuthenticationRefreshCheck time.Duration
	// AdvertisedAddressTLS is host:port of brokerServicePortTls and
	// AdvertisedWebAddressTLS of webServicePortTls, told to clients in
	// lookups as brokerServiceUrlTls and httpUrlTls ("": none; ServeTLS
	// fills the first from its listener).
	AdvertisedAddressTLS, AdvertisedWebAddressTLS string
	Logger                                        *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.TransactionCoordinators <= 0 {
		c.TransactionCoordinators = 1
	}
	if c.TransactionBufferSnapshotMaxTransactionCount <= 0 {
		c.TransactionBufferSnapshotMaxTransactionCount = 1000
	}
	if c.TransactionBufferSnapshotMinTime <= 0 {
		c.TransactionBufferSnapshotMinTime = 5 * time.Second
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = wire.DefaultMaxMessageSize
	}
	if c.MaxPendingPublishRequestsPerConnection <= 0 {
		c.MaxPendingPublishRequestsPerConnection = 1000
	}
	if c.DispatcherMaxReadBatchSize <= 0 {
		c.DispatcherMaxReadBatchSize = 100
	}
	if c.BacklogQuotaDefaultRetentionPolicy == "" {
		c.BacklogQuotaDefaultRetentionPolicy = BacklogHoldProducers
	}
	if c.BacklogQuotaCheckInterval <= 0 {
		c.BacklogQuotaCheckInterval = time.Minute
	}
	if c.MessageExpiryCheckInterval <= 0 {
		c.MessageExpiryCheckInterval = 5 * time.Minute
	}
	if c.RetentionCheckInterval <= 0 {
		c.RetentionCheckInterval = 2 * time.Minute
	}
	if c.AuthenticationRefreshCheck <= 0 {
		c.AuthenticationRefreshCheck = 60 * time.Second
	}
	if c.KeepAliveInterval <= 0 {
		c.KeepAliveInterval = 30 * time.Second
	}
	if c.StatsUpdateFrequency <= 0 {
		c.StatsUpdateFrequency = time.Minute
	}
	if c.SubscribeRatePeriodPerConsumerInSecond <= 0 {
		c.SubscribeRatePeriodPerConsumerInSecond = 30
	}
	if c.SubscriptionExpiryCheckInterval <= 0 {
		c.SubscriptionExpiryCheckInterval = 5 * time.Minute
	}
	if c.CompactionMonitorInterval <= 0 {
		c.CompactionMonitorInterval = time.Minute
	}
	if c.Offload == (managedledger.OffloadPolicy{}) { // Pulsar's defaults: nothing automatic, a 4 h lag
		c.Offload = managedledger.OffloadPolicy{ThresholdBytes: -1, ThresholdAge: -1, DeletionLag: 4 * time.Hour}
	}
	if c.MaxConcurrentLookupRequest <= 0 {
		c.MaxConcurrentLookupRequest = 50000
	}
	if c.MaxConcurrentTopicLoadRequest <= 0 {
		c.MaxConcurrentTopicLoadRequest = 5000
	}
	if c.ReplicationPolicyCheckInterval <= 0 {
		c.ReplicationPolicyCheckInterval = 5 * time.Second
	}
	if c.ReplicationProducerQueueSize <= 0 {
		c.ReplicationProducerQueueSize = 1000
	}
	if c.ReplicatedSubscriptionsSnapshotFrequency <= 0 {
		c.ReplicatedSubscriptionsSnapshotFrequency = time.Second
	}
	if c.ReplicatedSubscriptionsSnapshotTimeout <= 0 {
		c.ReplicatedSubscriptionsSnapshotTimeout = 30 * time.Second
	}
	if c.ReplicatedSubscriptionsSnapshotMaxCached <= 0 {
		c.ReplicatedSubscriptionsSnapshotMaxCached = 10
	}
	if c.Version == "" {
		c.Version = "magnetar"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Broker owns the topics it serves.
//
// Lock rules: mu guards topics and unloading; a topic's own lock is never
// held while taking mu.
type Broker struct {
	cfg     Config
	ledgers managedledger.Factory
	log     *slog.Logger

	names producerNames
	// peers makes admin calls to other brokers (admin_partitioned.go).
	peers *admin.Peers
	// watchers are the topic-list watchers of every connection (topicwatch.go).
	watchers topicWatchers
	// advertised is the host:port clients are sent to; set once the
	// listener's port is known, read by connection goroutines.
	advertised atomic.Pointer[string]
	// advertisedTLS is the same for the TLS port (nil: none).
	advertisedTLS atomic.Pointer[string]
	// own is the ownership service in cluster mode (nil: serve all).
	own atomic.Pointer[ownership.Service]
	cpu cpuSampler // sampled by load reports
	// dyn holds the settings dynamic configuration may change (dynconfig.go).
	dyn atomic.Pointer[dynamicSettings]
	// inflate bounds the memory of admin decompressions (compression.go).
	inflate inflateBudget
	// panics counts panics recovered at the boundaries (recover.go).
	panics panicCounter
	// testHookCommand, set by tests only, sees each checked command before
	// its handler (to inject a panic behind the recovery boundary).
	testHookCommand func(*pb.BaseCommand)

	// ctx lives as long as the broker: Close cancels it, which ends the
	// background loops and what commands started (their contexts derive
	// from it). tasks counts those goroutines; Close waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	tasks  sync.WaitGroup
	// workers run spawned tasks on reused goroutines: a transaction
	// request goes down to the ledger's digest and grew a fresh
	// goroutine's stack every time (5% of a transactional load's CPU).
	workers *gopool.Pool
	// lookups and topicLoads bound concurrent work as Pulsar's
	// maxConcurrentLookupRequest and maxConcurrentTopicLoadRequest do.
	lookups, topicLoads *semaphore.Weighted
	// replicatorLoads gates the topic loads of remote clusters'
	// replicators (replicatorTopicLoads at a time), ahead of topicLoads.
	replicatorLoads *semaphore.Weighted
	// txnCoords are the transaction coordinators hosted here (txncoord.go).
	txnCoords coordinators

	mu     sync.Mutex
	topics map[string]*topic
	// unloading has a channel per topic taken out of topics and still
	// closing; it is closed when that close ends. A load of the name waits
	// for it: the managed-ledger factory would hand the new topic the very
	// ledger the unload is about to close (admin_cluster.go).
	unloading map[string]chan struct{}
	conns     map[*serverConn]struct{}
	closed    bool
	stop      chan struct{}
}

// New returns a broker storing topics in ledgers.
func New(cfg Config, ledgers managedledger.Factory) *Broker {
	cfg = cfg.withDefaults()
	b := &Broker{cfg: cfg, ledgers: ledgers, log: cfg.Logger, inflate: newInflateBudget(), topics: map[string]*topic{},
		workers:   gopool.New(500 * time.Millisecond),
		unloading: map[string]chan struct{}{},
		conns:     map[*serverConn]struct{}{}, stop: make(chan struct{}),
		lookups:    semaphore.NewWeighted(int64(cfg.MaxConcurrentLookupRequest)),
		topicLoads: semaphore.NewWeighted(int64(cfg.MaxConcurrentTopicLoadRequest)), replicatorLoads: semaphore.NewWeighted(replicatorTopicLoads)}
	b.peers = &admin.Peers{Credentials: cfg.BrokerClient}
	if cfg.BrokerClientTLSEnabled {
		t, err := cfg.BrokerClientTLS.Config(cfg.BrokerClient)
		if err != nil {
			// The command checks the settings before starting a broker.
			b.log.Error("brokerClientTlsEnabled: calls to other brokers will fail", "err", err)
		}
		b.peers.TLS = t
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.dyn.Store(startedSettings(cfg))
	if cfg.Metadata != nil {
		b.spawn(b.watchDynamicConfig)
	}
	b.spawn(func() { b.every(cfg.KeepAliveInterval, b.pingAll) })
	if cfg.Authentication != nil {
		b.spawn(func() {
			b.every(cfg.AuthenticationRefreshCheck, func() { b.forEachConn(func(c *serverConn) { c.checkAuthExpiry(time.Now()) }) })
		})
	}
	b.spawn(func() { b.every(cfg.StatsUpdateFrequency, b.updateRates) })
	b.spawn(func() { b.every(console.HistoryInterval, b.sampleHistory) })
	if cfg.TransactionCoordinatorEnabled {
		b.spawn(func() { b.every(time.Second, b.tickCoordinators) })
	}
	b.spawn(func() { b.every(dispatchRateRefresh, func() { b.refreshDispatchRates(b.ctx) }) })
	b.spawn(func() {
		b.every(cfg.SubscriptionExpiryCheckInterval, func() { b.expireSubscriptions(b.ctx, time.Now()) })
	})
	b.spawn(func() { b.every(cfg.CompactionMonitorInterval, func() { b.checkCompactions(b.ctx) }) })
	// Namespace policies and dynamic configuration may set a quota or a
	// TTL at any time, so both checks always run (cheap with none set).
	b.spawn(func() { b.every(cfg.BacklogQuotaCheckInterval, func() { b.enforceBacklogQuotas(b.ctx) }) })
	b.spawn(func() { b.every(cfg.RetentionCheckInterval, func() { b.applyRetention(b.ctx) }) })
	b.spawn(func() { b.every(cfg.MessageExpiryCheckInterval, func() { b.expireByPolicy(b.ctx, time.Now()) }) })
	if cfg.Resources != nil && cfg.ClusterName != "" {
		b.spawn(func() { b.every(cfg.ReplicationPolicyCheckInterval, b.checkReplication) })
		if !cfg.ReplicatedSubscriptionsDisabled {
			b.spawn(func() { b.every(cfg.ReplicatedSubscriptionsSnapshotFrequency, b.snapshotReplicatedSubscriptions) })
		}
	}
	return b
}

// spawn runs fn on a goroutine Close waits for; after Close it runs
// nothing (the broker is gone: a command arriving then is not served).
func (b *Broker) spawn(fn func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.tasks.Add(1) // under mu: never concurrent with Close's Wait from zero
	b.mu.Unlock()
	b.workers.Go(func() {
		defer b.tasks.Done()
		fn()
	})
}

// getTopic returns the loaded topic, loading (and creating) it if needed.
// A load waits for an unload of the same name to end, and starts again if
// one began while it opened the ledger.
func (b *Broker) getTopic(ctx context.Context, name TopicName) (*topic, error) {
	for {
		t, closing, err := b.loadedOrUnloading(name)
		switch {
		case err != nil:
			return nil, err
		case t != nil:
			return t, nil
		case closing != nil:
			select {
			case <-closing:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("topic %s: waiting for its unload to end: %w", name, ctx.Err())
			}
		}
		t, err = b.loadTopic(ctx, name)
		if !errors.Is(err, errUnloadedWhileLoading) {
			return t, err
		}
	}
}

// errUnloadedWhileLoading makes getTopic load again: the topic's ledger
// may be the instance an unload is closing.
var errUnloadedWhileLoading = errors.New("unloaded while loading")

// loadedOrUnloading is the topic loaded under name, or the channel an unload of
// it closes when it ends; both nil if neither.
func (b *Broker) loadedOrUnloading(name TopicName) (*topic, chan struct{}, error) {
	key := name.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, nil, fmt.Errorf("broker is shutting down")
	}
	return b.topics[key], b.unloading[key], nil
}

// loadTopic opens the topic's storage and adds it to the loaded topics.
func (b *Broker) loadTopic(ctx context.Context, name TopicName) (*topic, error) {
	if !b.servesTopic(name) && !b.takeOver(ctx, name) {
		return nil, fmt.Errorf("topic %s: %w", name, errNotOwner)
	}
	if !name.Persistent() {
		return b.addTopic(ctx, newTopic(b, name, newStreamOfNothing(name.String())))
	}
	if forReplicator(ctx) {
		if err := b.replicatorLoads.Acquire(ctx, 1); err != nil {
			return nil, fmt.Errorf("topic %s: waiting to load for a remote replicator: %w", name, err)
		}
		defer b.replicatorLoads.Release(1)
	}
	// Bounded as Pulsar's maxConcurrentTopicLoadRequest: a storm of
	// lookups for cold topics waits here instead of opening them all at
	// once against the metadata store and the bookies.
	if err := b.topicLoads.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("topic %s: waiting to load: %w", name, err)
	}
	ml, err := b.ledgers.Open(ctx, name.ManagedLedgerName())
	b.topicLoads.Release(1)
	if err != nil {
		return nil, fmt.Errorf("topic %s: open managed ledger: %w", name, err)
	}
	t := newTopic(b, name, ml)
	if t.stamper, err = newEntryStamper(ctx, b.cfg, ml); err != nil {
		_ = ml.Close(ctx)
		return nil, fmt.Errorf("topic %s: %w", name, err)
	}
	ml.SetRetention(t.retention(ctx))
	if err := t.loadDedup(ctx); err != nil {
		_ = ml.Close(ctx)
		return nil, fmt.Errorf("topic %s: %w", name, err)
	}
	if err := t.loadTxnBuffer(ctx); err != nil {
		_ = ml.Close(ctx)
		return nil, err
	}
	if err := t.openReplicatorCursors(ctx); err != nil {
		_ = ml.Close(ctx)
		return nil, err
	}
	if err := t.openCompactionCursor(ctx); err != nil {
		_ = ml.Close(ctx)
		return nil, err
	}
	return b.addTopic(ctx, t)
}

// addTopic makes a topic just loaded visible, unless another load of it
// won (that one is returned) or the bundle was unloaded meanwhile.
func (b *Broker) addTopic(ctx context.Context, t *topic) (*topic, error) {
	name, ml, key := t.name, t.ml, t.name.String()
	b.mu.Lock()
	if existing, ok := b.topics[key]; ok { // loaded concurrently: keep the first (same ledger)
		b.mu.Unlock()
		return existing, nil
	}
	if b.unloading[key] != nil {
		// Loaded concurrently and unloaded since: ml may be the ledger the
		// unload closes (closing it again does nothing) or a new one that
		// would be left open.
		b.mu.Unlock()
		_ = ml.Close(ctx)
		return nil, fmt.Errorf("topic %s: %w", name, errUnloadedWhileLoading)
	}
	// Checked again under b.mu: a bundle unloaded while the ledger opened
	// has already closed its topics, so this one must not stay.
	if !b.servesTopic(name) || b.closed {
		b.mu.Unlock()
		_ = ml.Close(ctx)
		return nil, fmt.Errorf("topic %s: %w", name, errNotOwner)
	}
	b.topics[key] = t
	b.mu.Unlock()
	if name.Persistent() && b.cfg.Resources != nil {
		b.spawn(func() { t.reconcileReplication(b.ctx) }) // replicators start as the topic loads
	}
	if name.Persistent() {
		b.namespaceTopicsChanged(name.Tenant, name.Namespace) // a topic may be new (topicwatch.go)
	}
	return t, nil
}

// loadedTopics is a snapshot of the loaded topics.
func (b *Broker) loadedTopics() []*topic {
	b.mu.Lock()
	defer b.mu.Unlock()
	topics := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		topics = append(topics, t)
	}
	return topics
}

// UnloadAll unloads every topic: clients are disconnected from them
// (CLOSE_PRODUCER / CLOSE_CONSUMER) and reconnect, which loads the topic
// again from storage. Admin unload and ownership transfer use this path.
func (b *Broker) UnloadAll(ctx context.Context) {
	b.unloadWhere(ctx, func(*topic) bool { return true })
}

// Close cancels the broker's context, closes every topic and waits (up
// to ctx) for the goroutines the broker and its commands started.
func (b *Broker) Close(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		close(b.stop)
	}
	b.closed = true
	topics := b.topics
	b.topics = map[string]*topic{}
	b.mu.Unlock()
	b.cancel()
	b.closeCoordinators()
	closeTopics(ctx, slices.Collect(maps.Values(topics)))
	done := make(chan struct{})
	go func() { b.tasks.Wait(); close(done) }()
	select {
	case <-done:
		b.workers.Close()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker close: background work still running: %w", ctx.Err())
	}
}

// every runs fn each interval until the broker closes.
func (b *Broker) every(interval time.Duration, fn func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			fn()
		}
	}
}

// pingAll pings every connection; the network layer closes connections
// idle for two keep-alive intervals.
func (b *Broker) pingAll() {
	b.forEachConn(func(c *serverConn) {
		// Not before CONNECTED: a client expects that as the first answer.
		if c.isConnected() {
			_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
		}
	})
}

// forEachConn calls fn for every open connection (outside b.mu).
func (b *Broker) forEachConn(fn func(c *serverConn)) {
	b.mu.Lock()
	conns := make([]*serverConn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		fn(c)
	}
}

func (b *Broker) track(c *serverConn, open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if open {
		b.conns[c] = struct{}{}
	} else {
		delete(b.conns, c)
	}
}

// replicatorTopicLoads is how many topics remote clusters' replicators
// load at once here. After a failover they reconnect to every replicated
// topic the broker took over, all at once; loaded alongside, the topics
// local clients wait for recovered their ledgers among theirs. Two at a
// time keeps replication catching up (a load takes tens of
// milliseconds) without crowding the rest.
const replicatorTopicLoads = 2

// replicatorLoadKey marks a context whose topic load is for a remote
// cluster's replicator (loadTopic gates those: replicatorTopicLoads).
type replicatorLoadKey struct{}

func withReplicatorLoad(ctx context.Context) context.Context {
	return context.WithValue(ctx, replicatorLoadKey{}, true)
}

func forReplicator(ctx context.Context) bool {
	v, _ := ctx.Value(replicatorLoadKey{}).(bool)
	return v
}
