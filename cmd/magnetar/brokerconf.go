package main

import (
	"github.com/magnetar-io/magnetar/internal/flightrec"

	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/managedledger/offload"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// brokerSettings are the broker settings standalone and broker share,
// set from the configuration file under Pulsar's key names.
type brokerSettings struct {
	// flightRecDir and flightRecThreshold are flightRecorderDir and
	// flightRecorderPublishThresholdMillis (ours; internal/flightrec).
	flightRecDir        string
	flightRecThreshold  time.Duration
	maxMessageSize      int
	maxPendingPublish   int
	dispatcherBatch     int
	keepAlive           time.Duration
	maxEntriesPerLedger int
	maxLedgerMB         int  // managedLedgerMaxSizePerLedgerMbytes
	noAutoSubscription  bool // allowAutoSubscriptionCreation=false
	dedup               bool
	ttl                 time.Duration
	expiryCheck         time.Duration
	quotaBytes          int64
	quotaGB             float64
	quotaPolicy         string
	quotaCheck          time.Duration
	statsUpdate         time.Duration
	retentionMinutes    int
	retentionMB         int
	retentionCheck      time.Duration
	cacheMB             int
	cacheWatermark      float64       // managedLedgerCacheEvictionWatermark
	cacheEvictAge       time.Duration // managedLedgerCacheEvictionTimeThresholdMillis
	maxProducers        int
	maxConsumers        int
	maxConsumersPerSub  int
	maxSubsPerTopic     int // maxSubscriptionsPerTopic
	maxUnackedPerCons   int
	maxUnackedPerSub    int
	entryInterceptors   string // brokerEntryMetadataInterceptors
	exposeEntryMetadata bool
	batchIndexAcks      bool // acknowledgmentAtBatchIndexLevelEnabled
	dedupInterval       int  // brokerDeduplicationEntriesInterval
	dedupSnapshotSecs   int  // brokerDeduplicationSnapshotIntervalSeconds
	// delayedEnabled, delayedTick and delayedMax are delayedDeliveryEnabled,
	// delayedDeliveryTickTimeMillis and delayedDeliveryMaxDelayInMillis.
	delayedEnabled          bool
	delayedTick, delayedMax time.Duration
	subExpiryMinutes        int   // subscriptionExpirationTimeMinutes
	subExpiryCheck          int   // subscriptionExpiryCheckIntervalInMinutes
	compactionThreshold     int64 // brokerServiceCompactionThresholdInBytes
	// txnEnabled, txnSnapshotCount, txnSnapshotMs and maxActiveTxns are
	// transactionCoordinatorEnabled, transactionBufferSnapshotMaxTransactionCount,
	// transactionBufferSnapshotMinTimeInMillis and maxActiveTransactionsPerCoordinator.
	txnEnabled                      bool
	txnSnapshotCount, txnSnapshotMs int
	// consoleEnabled and consoleReadOnly are the web console's keys.
	consoleEnabled, consoleReadOnly bool
	exposeTopicMetrics              bool // exposeTopicLevelMetricsInPrometheus
	maxActiveTxns                   int
	// offloadDriver, offloadRoot (fileSystemURI), offloadSize, offloadAge
	// and offloadLag are managedLedgerOffloadDriver, fileSystemURI,
	// managedLedgerOffloadAutoTriggerSizeThresholdBytes,
	// managedLedgerOffloadThresholdInSeconds and
	// managedLedgerOffloadDeletionLagMs (tiered storage).
	offloadDriver, offloadRoot string
	offloadSize, offloadAge    int64
	offloadLag                 int64
	compactionMonitorSecs      int  // brokerServiceCompactionMonitorIntervalInSeconds
	schemaEnforced             bool // isSchemaValidationEnforced
	noAutoCreate               bool // allowAutoTopicCreation=false (the zero value allows, as Pulsar's default)
	autoCreateType             string
	defaultPartitions          int
	maxLookups                 int // maxConcurrentLookupRequest
	maxConns                   int // brokerMaxConnections
	maxConnsPerIP              int // brokerMaxConnectionsPerIp
	maxTopicLoads              int // maxConcurrentTopicLoadRequest
	// Replicated subscriptions: enableReplicatedSubscriptions=false,
	// replicatedSubscriptionsSnapshot{FrequencyMillis,TimeoutSeconds,MaxCachedPerSubscription}.
	noReplSubs      bool
	replSubsFreq    time.Duration
	replSubsTimeout time.Duration
	replSubsCached  int
	replStartAt     string // replicationStartAt
	// dispatchThrottlingRatePerReplicatorIn{Msg,Byte}
	replMsgRate, replByteRate int64
	// dispatchThrottlingRatePer{Topic,Subscription}In{Msg,Byte}
	topicMsgRate, topicByteRate, subMsgRate, subByteRate int64
	// maxPublishRatePerTopicIn{Messages,Bytes}
	publishMsgRate, publishByteRate int64
	// subscribeThrottlingRatePerConsumer, subscribeRatePeriodPerConsumerInSecond
	subscribeRate, subscribePeriod int64
}

// defaultBrokerSettings are Pulsar's defaults where the zero value would
// mean something else (for the limits below, no limit).
func defaultBrokerSettings() brokerSettings {
	return brokerSettings{maxUnackedPerCons: 50000, maxUnackedPerSub: 200000, dedupSnapshotSecs: 120,
		delayedEnabled: true, delayedTick: time.Second, consoleEnabled: true, exposeTopicMetrics: true, offloadSize: -1, offloadAge: -1, offloadLag: 4 * 3600 * 1000}
}

func (s *brokerSettings) setters() map[string]confSetter {
	return map[string]confSetter{
		"flightRecorderDir":                                       setString(&s.flightRecDir),
		"flightRecorderPublishThresholdMillis":                    setDuration(&s.flightRecThreshold, time.Millisecond),
		"maxMessageSize":                                          setInt(&s.maxMessageSize),
		"maxPendingPublishRequestsPerConnection":                  setInt(&s.maxPendingPublish),
		"dispatcherMaxReadBatchSize":                              setInt(&s.dispatcherBatch),
		"keepAliveIntervalSeconds":                                setSeconds(&s.keepAlive),
		"managedLedgerMaxEntriesPerLedger":                        setInt(&s.maxEntriesPerLedger),
		"managedLedgerMaxSizePerLedgerMbytes":                     setInt(&s.maxLedgerMB),
		"allowAutoSubscriptionCreation":                           setNegatedBool(&s.noAutoSubscription),
		"brokerDeduplicationEnabled":                              setBool(&s.dedup),
		"delayedDeliveryEnabled":                                  setBool(&s.delayedEnabled),
		"delayedDeliveryTickTimeMillis":                           setDuration(&s.delayedTick, time.Millisecond),
		"delayedDeliveryMaxDelayInMillis":                         setDuration(&s.delayedMax, time.Millisecond),
		"ttlDurationDefaultInSeconds":                             setDuration(&s.ttl, time.Second),
		"messageExpiryCheckIntervalInMinutes":                     setDuration(&s.expiryCheck, time.Minute),
		"backlogQuotaDefaultLimitBytes":                           setInt64(&s.quotaBytes),
		"backlogQuotaDefaultLimitGB":                              setFloat(&s.quotaGB),
		"backlogQuotaDefaultRetentionPolicy":                      setString(&s.quotaPolicy),
		"backlogQuotaCheckIntervalInSeconds":                      setSeconds(&s.quotaCheck),
		"statsUpdateFrequencyInSecs":                              setSeconds(&s.statsUpdate),
		"defaultRetentionTimeInMinutes":                           setInt(&s.retentionMinutes),
		"defaultRetentionSizeInMB":                                setInt(&s.retentionMB),
		"retentionCheckIntervalInSeconds":                         setSeconds(&s.retentionCheck),
		"managedLedgerCacheSizeMB":                                setInt(&s.cacheMB),
		"managedLedgerCacheEvictionWatermark":                     setFloat(&s.cacheWatermark),
		"managedLedgerCacheEvictionTimeThresholdMillis":           setDuration(&s.cacheEvictAge, time.Millisecond),
		"maxProducersPerTopic":                                    setInt(&s.maxProducers),
		"maxConsumersPerTopic":                                    setInt(&s.maxConsumers),
		"maxConsumersPerSubscription":                             setInt(&s.maxConsumersPerSub),
		"maxSubscriptionsPerTopic":                                setNonNegInt(&s.maxSubsPerTopic),
		"maxUnackedMessagesPerConsumer":                           setInt(&s.maxUnackedPerCons),
		"maxUnackedMessagesPerSubscription":                       setInt(&s.maxUnackedPerSub),
		"maxConcurrentLookupRequest":                              setInt(&s.maxLookups),
		"brokerMaxConnections":                                    setNonNegInt(&s.maxConns),
		"brokerMaxConnectionsPerIp":                               setNonNegInt(&s.maxConnsPerIP),
		"maxConcurrentTopicLoadRequest":                           setInt(&s.maxTopicLoads),
		"brokerEntryMetadataInterceptors":                         setString(&s.entryInterceptors),
		"exposingBrokerEntryMetadataToClientEnabled":              setBool(&s.exposeEntryMetadata),
		"acknowledgmentAtBatchIndexLevelEnabled":                  setBool(&s.batchIndexAcks),
		"exposeTopicLevelMetricsInPrometheus":                     setBool(&s.exposeTopicMetrics),
		"brokerDeduplicationEntriesInterval":                      setInt(&s.dedupInterval),
		"brokerDeduplicationSnapshotIntervalSeconds":              setNonNegInt(&s.dedupSnapshotSecs),
		"subscriptionExpirationTimeMinutes":                       setNonNegInt(&s.subExpiryMinutes),
		"subscriptionExpiryCheckIntervalInMinutes":                setNonNegInt(&s.subExpiryCheck),
		"brokerServiceCompactionThresholdInBytes":                 setNonNegInt64(&s.compactionThreshold),
		"transactionCoordinatorEnabled":                           setBool(&s.txnEnabled),
		"consoleEnabled":                                          setBool(&s.consoleEnabled),
		"consoleReadOnly":                                         setBool(&s.consoleReadOnly),
		"transactionBufferSnapshotMaxTransactionCount":            setInt(&s.txnSnapshotCount),
		"transactionBufferSnapshotMinTimeInMillis":                setInt(&s.txnSnapshotMs),
		"maxActiveTransactionsPerCoordinator":                     setInt(&s.maxActiveTxns),
		"managedLedgerOffloadDriver":                              setString(&s.offloadDriver),
		"fileSystemURI":                                           setString(&s.offloadRoot),
		"managedLedgerOffloadAutoTriggerSizeThresholdBytes":       setInt64(&s.offloadSize),
		"managedLedgerOffloadThresholdInSeconds":                  setInt64(&s.offloadAge),
		"managedLedgerOffloadDeletionLagMs":                       setInt64(&s.offloadLag),
		"brokerServiceCompactionMonitorIntervalInSeconds":         setNonNegInt(&s.compactionMonitorSecs),
		"isSchemaValidationEnforced":                              setBool(&s.schemaEnforced),
		"allowAutoTopicCreation":                                  setNegatedBool(&s.noAutoCreate),
		"allowAutoTopicCreationType":                              setString(&s.autoCreateType),
		"defaultNumPartitions":                                    setInt(&s.defaultPartitions),
		"enableReplicatedSubscriptions":                           setNegatedBool(&s.noReplSubs),
		"replicatedSubscriptionsSnapshotFrequencyMillis":          setDuration(&s.replSubsFreq, time.Millisecond),
		"replicatedSubscriptionsSnapshotTimeoutSeconds":           setSeconds(&s.replSubsTimeout),
		"replicatedSubscriptionsSnapshotMaxCachedPerSubscription": setInt(&s.replSubsCached),
		"replicationStartAt":                                      setString(&s.replStartAt),
		"dispatchThrottlingRatePerReplicatorInMsg":                setInt64(&s.replMsgRate),
		"dispatchThrottlingRatePerReplicatorInByte":               setInt64(&s.replByteRate),
		"dispatchThrottlingRatePerTopicInMsg":                     setInt64(&s.topicMsgRate),
		"dispatchThrottlingRatePerTopicInByte":                    setInt64(&s.topicByteRate),
		"dispatchThrottlingRatePerSubscriptionInMsg":              setInt64(&s.subMsgRate),
		"dispatchThrottlingRatePerSubscriptionInByte":             setInt64(&s.subByteRate),
		"maxPublishRatePerTopicInMessages":                        setInt64(&s.publishMsgRate),
		"maxPublishRatePerTopicInBytes":                           setInt64(&s.publishByteRate),
		"subscribeThrottlingRatePerConsumer":                      setInt64(&s.subscribeRate),
		"subscribeRatePeriodPerConsumerInSecond":                  setInt64(&s.subscribePeriod),
	}
}

func (s *brokerSettings) validate(path string) error {
	if s.offloadDriver != "" {
		if _, err := offload.New(s.offloadDriver, offload.Config{Root: s.offloadRoot}); err != nil {
			return fmt.Errorf("config %s: managedLedgerOffloadDriver %q, fileSystemURI %q: %w", path, s.offloadDriver, s.offloadRoot, err)
		}
	}
	if s.retentionMinutes < -1 || s.retentionMB < -1 {
		return fmt.Errorf("config %s: defaultRetentionTimeInMinutes %d, defaultRetentionSizeInMB %d: each must be -1 (no limit) or more",
			path, s.retentionMinutes, s.retentionMB)
	}
	if t := s.autoCreateType; t != "" && t != resources.TopicTypePartitioned && t != resources.TopicTypeNonPartitioned {
		return fmt.Errorf("config %s: allowAutoTopicCreationType %q: want non-partitioned or partitioned", path, t)
	}
	if s.maxUnackedPerCons < 0 || s.maxUnackedPerSub < 0 {
		return fmt.Errorf("config %s: maxUnackedMessagesPerConsumer %d, maxUnackedMessagesPerSubscription %d: each must be 0 (no limit) or more",
			path, s.maxUnackedPerCons, s.maxUnackedPerSub)
	}
	if s.cacheWatermark < 0 || s.cacheWatermark > 1 {
		return fmt.Errorf("config %s: managedLedgerCacheEvictionWatermark %g: want a fraction between 0 and 1", path, s.cacheWatermark)
	}
	if _, _, err := broker.ParseEntryMetadataInterceptors(s.entryInterceptors); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	for key, v := range map[string]int64{"dispatchThrottlingRatePerTopicInMsg": s.topicMsgRate,
		"dispatchThrottlingRatePerTopicInByte": s.topicByteRate, "dispatchThrottlingRatePerSubscriptionInMsg": s.subMsgRate,
		"dispatchThrottlingRatePerSubscriptionInByte": s.subByteRate, "maxPublishRatePerTopicInMessages": s.publishMsgRate,
		"maxPublishRatePerTopicInBytes": s.publishByteRate, "subscribeThrottlingRatePerConsumer": s.subscribeRate,
		"subscribeRatePeriodPerConsumerInSecond": s.subscribePeriod} {
		if v < 0 {
			return fmt.Errorf("config %s: %s %d: must be 0 (no limit) or more", path, key, v)
		}
	}
	if s.replMsgRate < 0 || s.replByteRate < 0 {
		return fmt.Errorf("config %s: dispatchThrottlingRatePerReplicatorInMsg %d, dispatchThrottlingRatePerReplicatorInByte %d: each must be 0 (no limit) or more",
			path, s.replMsgRate, s.replByteRate)
	}
	if _, err := broker.ParseReplicationStartAt(s.replStartAt); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if s.quotaPolicy != "" && !broker.ValidBacklogPolicy(s.quotaPolicy) {
		return fmt.Errorf("config %s: backlogQuotaDefaultRetentionPolicy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", path, s.quotaPolicy)
	}
	return nil
}

// managedLedgerConfig is the part of the managed-ledger settings standalone
// and broker share (the caller adds the stores and the ensemble).
func (s *brokerSettings) managedLedgerConfig(log *slog.Logger) managedledger.Config {
	cfg := managedledger.Config{MaxEntriesPerLedger: int64(s.maxEntriesPerLedger), MaxSizePerLedger: int64(s.maxLedgerMB) << 20,
		CacheSize:              int64(s.cacheMB) << 20,
		CacheEvictionWatermark: s.cacheWatermark, CacheEvictionTime: s.cacheEvictAge, Retention: s.retention(), Logger: log}
	if s.offloadDriver != "" || s.offloadRoot != "" {
		cfg.Offload = &managedledger.OffloadConfig{Driver: s.offloadDriver, Config: offload.Config{Root: s.offloadRoot}}
	}
	return cfg
}

// offloadPolicy is the broker's tiered storage policy.
func (s *brokerSettings) offloadPolicy() managedledger.OffloadPolicy {
	p := managedledger.OffloadPolicy{Driver: s.offloadDriver, ThresholdBytes: s.offloadSize, ThresholdAge: -1, DeletionLag: -1}
	if s.offloadAge >= 0 {
		p.ThresholdAge = time.Duration(s.offloadAge) * time.Second
	}
	if s.offloadLag >= 0 {
		p.DeletionLag = time.Duration(s.offloadLag) * time.Millisecond
	}
	return p
}

// bookieFrameSize is the bookie frame limit this broker's ledger client
// needs (MaxFrameSize): room for the largest entry it stores
// (wire.MaxEntrySize of maxMessageSize). Bookies need at least as much
// (nettyMaxFrameSizeBytes; the default fits the default maxMessageSize).
func (s *brokerSettings) bookieFrameSize() int {
	m := s.maxMessageSize
	if m <= 0 {
		m = wire.DefaultMaxMessageSize
	}
	return bkproto.MaxFrameSize(wire.MaxEntrySize(m))
}

// retention is the broker's default retention of consumed ledgers.
func (s *brokerSettings) retention() managedledger.Retention {
	return broker.RetentionOf(s.retentionMinutes, int64(s.retentionMB))
}

// backlogQuotaBytes is the quota in bytes: backlogQuotaDefaultLimitBytes,
// else the deprecated backlogQuotaDefaultLimitGB, else none.
func (s *brokerSettings) backlogQuotaBytes() int64 {
	if s.quotaBytes > 0 {
		return s.quotaBytes
	}
	return int64(s.quotaGB * (1 << 30))
}

// startFlightRecorder starts the flight recorder when flightRecorderDir is
// set (nil otherwise; a nil recorder does nothing).
func (s *brokerSettings) startFlightRecorder(log *slog.Logger) (*flightrec.Recorder, error) {
	if s.flightRecDir == "" {
		return nil, nil
	}
	r, err := flightrec.Start(flightrec.Config{Dir: s.flightRecDir, Threshold: s.flightRecThreshold, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("flight recorder on: slow publishes write execution traces", "dir", s.flightRecDir)
	return r, nil
}

// brokerConfig is the broker's configuration; configStore holds
// partitioned-topic metadata and namespace policies.
func (s *brokerSettings) brokerConfig(cluster, advertised string, configStore metadata.Store, res *resources.Resources, log *slog.Logger) (broker.Config, error) {
	schemas, err := schema.New(schema.Config{Store: configStore, NamespaceStrategy: broker.SchemaPolicies(res),
		TopicStrategy: broker.TopicSchemaStrategy(res, cluster), Logger: log})
	if err != nil {
		return broker.Config{}, err
	}
	stampTime, stampIndex, err := broker.ParseEntryMetadataInterceptors(s.entryInterceptors)
	if err != nil {
		return broker.Config{}, err
	}
	return broker.Config{Schemas: schemas, ClusterName: cluster, Version: "magnetar-" + version, Logger: log,
		AdvertisedAddress: advertised,
		MaxMessageSize:    s.maxMessageSize, MaxPendingPublishRequestsPerConnection: s.maxPendingPublish,
		DispatcherMaxReadBatchSize: s.dispatcherBatch, KeepAliveInterval: s.keepAlive,
		BrokerDeduplicationEnabled: s.dedup, Metadata: configStore, Resources: res,
		MessageTTL: s.ttl, MessageExpiryCheckInterval: s.expiryCheck,
		BacklogQuotaDefaultLimitBytes: s.backlogQuotaBytes(), BacklogQuotaDefaultRetentionPolicy: s.quotaPolicy,
		AutoSubscriptionCreationDisabled: s.noAutoSubscription,
		BacklogQuotaCheckInterval:        s.quotaCheck, StatsUpdateFrequency: s.statsUpdate,
		DefaultRetentionMinutes: s.retentionMinutes, DefaultRetentionMB: int64(s.retentionMB),
		RetentionCheckInterval: s.retentionCheck, MaxProducersPerTopic: s.maxProducers,
		MaxConsumersPerTopic: s.maxConsumers, MaxConsumersPerSubscription: s.maxConsumersPerSub,
		MaxSubscriptionsPerTopic:      s.maxSubsPerTopic,
		MaxUnackedMessagesPerConsumer: s.maxUnackedPerCons, MaxUnackedMessagesPerSubscription: s.maxUnackedPerSub,
		BrokerEntryTimestamp: stampTime, BrokerEntryIndex: stampIndex, ExposeBrokerEntryMetadata: s.exposeEntryMetadata,
		AcknowledgmentAtBatchIndexLevelEnabled: s.batchIndexAcks, DeduplicationEntriesInterval: s.dedupInterval,
		DeduplicationSnapshotInterval:                time.Duration(s.dedupSnapshotSecs) * time.Second,
		SubscriptionExpirationTime:                   time.Duration(s.subExpiryMinutes) * time.Minute,
		SubscriptionExpiryCheckInterval:              time.Duration(s.subExpiryCheck) * time.Minute,
		CompactionThreshold:                          s.compactionThreshold,
		TransactionCoordinatorEnabled:                s.txnEnabled,
		ConsoleDisabled:                              !s.consoleEnabled,
		MetricsByNamespace:                           !s.exposeTopicMetrics,
		ConsoleReadOnly:                              s.consoleReadOnly,
		TransactionBufferSnapshotMaxTransactionCount: s.txnSnapshotCount,
		TransactionBufferSnapshotMinTime:             time.Duration(s.txnSnapshotMs) * time.Millisecond,
		MaxActiveTransactionsPerCoordinator:          s.maxActiveTxns,
		Offload:                                      s.offloadPolicy(),
		CompactionMonitorInterval:                    time.Duration(s.compactionMonitorSecs) * time.Second,
		SchemaValidationEnforced:                     s.schemaEnforced,
		DelayedDeliveryDisabled:                      !s.delayedEnabled, DelayedDeliveryTickTime: s.delayedTick,
		DelayedDeliveryMaxDelay:   s.delayedMax,
		AutoTopicCreationDisabled: s.noAutoCreate, AutoTopicCreationType: s.autoCreateType,
		DefaultNumPartitions: s.defaultPartitions, MaxConcurrentLookupRequest: s.maxLookups,
		MaxConcurrentTopicLoadRequest: s.maxTopicLoads,
		MaxConnections:                s.maxConns, MaxConnectionsPerIP: s.maxConnsPerIP,
		ReplicatedSubscriptionsDisabled: s.noReplSubs, ReplicatedSubscriptionsSnapshotFrequency: s.replSubsFreq,
		ReplicatedSubscriptionsSnapshotTimeout: s.replSubsTimeout, ReplicatedSubscriptionsSnapshotMaxCached: s.replSubsCached,
		ReplicationStartAt: s.replStartAt, DispatchThrottlingRatePerReplicatorInMsg: s.replMsgRate,
		DispatchThrottlingRatePerReplicatorInByte: s.replByteRate,
		DispatchThrottlingRatePerTopicInMsg:       s.topicMsgRate, DispatchThrottlingRatePerTopicInByte: s.topicByteRate,
		DispatchThrottlingRatePerSubscriptionInMsg: s.subMsgRate, DispatchThrottlingRatePerSubscriptionInByte: s.subByteRate,
		MaxPublishRatePerTopicInMessages: s.publishMsgRate, MaxPublishRatePerTopicInBytes: s.publishByteRate,
		SubscribeThrottlingRatePerConsumer: s.subscribeRate, SubscribeRatePeriodPerConsumerInSecond: s.subscribePeriod}, nil
}

// listenFlags are the addresses and cluster name standalone and broker
// share, as flags and under Pulsar's configuration keys.
type listenFlags struct {
	bindAddr   string
	advertised string
	brokerPort int
	webPort    int
	cluster    string
}

func (l *listenFlags) register(fs *flag.FlagSet, defaultCluster, clusterHelp string) {
	fs.StringVar(&l.bindAddr, "bind-address", "0.0.0.0", "bindAddress: the address to listen on")
	fs.StringVar(&l.advertised, "advertised-address", "localhost", "advertisedAddress: the host clients (and other brokers) are told to use")
	fs.IntVar(&l.brokerPort, "broker-port", 6650, "brokerServicePort: Pulsar binary protocol")
	fs.IntVar(&l.webPort, "web-port", 8080, "webServicePort: HTTP lookup, admin, /metrics, /debug/pprof")
	fs.StringVar(&l.cluster, "cluster", defaultCluster, clusterHelp)
}

// addSetters adds the configuration keys of these flags to setters.
func (l *listenFlags) addSetters(setters map[string]confSetter) {
	setters["clusterName"] = setString(&l.cluster)
	setters["bindAddress"] = setString(&l.bindAddr)
	setters["advertisedAddress"] = setString(&l.advertised)
	setters["brokerServicePort"] = setPort(&l.brokerPort)
	setters["webServicePort"] = setPort(&l.webPort)
}

// setByFlag returns the configuration keys given as flags (flags win
// over the file); extra maps further flag names to keys.
func setByFlag(fs *flag.FlagSet, extra map[string]string) map[string]bool {
	keys := map[string]string{"bind-address": "bindAddress", "advertised-address": "advertisedAddress",
		"broker-port": "brokerServicePort", "web-port": "webServicePort", "cluster": "clusterName"}
	for k, v := range extra {
		keys[k] = v
	}
	byFlag := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { byFlag[keys[fl.Name]] = true })
	return byFlag
}

// brokerAddr and webAddr are the advertised host:ports.
func (l *listenFlags) brokerAddr() string {
	return net.JoinHostPort(l.advertised, strconv.Itoa(l.brokerPort))
}

func (l *listenFlags) webAddr() string {
	return net.JoinHostPort(l.advertised, strconv.Itoa(l.webPort))
}

// ownershipConfig names this broker in the cluster's registry.
func (l *listenFlags) ownershipConfig(store metadata.Store, s securitySettings, sec security) ownership.Config {
	pulsarTLS, webTLS := s.tlsURLs(*l)
	return ownership.Config{Store: store, BrokerID: l.webAddr(), WebServiceURL: "http://" + l.webAddr(),
		PulsarServiceURL: "pulsar://" + l.brokerAddr(), PulsarServiceURLTLS: pulsarTLS, WebServiceURLTLS: webTLS,
		Version: "magnetar-" + version, HTTPClient: sec.peerHTTP(), PeerTLS: sec.clientTLS != nil}
}

// readyLine lists the URLs served, for the ready message.
func (l *listenFlags) readyLine(s securitySettings) string {
	var urls []string
	if l.brokerPort != portOff {
		urls = append(urls, "pulsar://"+l.brokerAddr())
	}
	if l.webPort != portOff {
		urls = append(urls, "http://"+l.webAddr())
	}
	pulsarTLS, webTLS := s.tlsURLs(*l)
	for _, u := range []string{pulsarTLS, webTLS} {
		if u != "" {
			urls = append(urls, u)
		}
	}
	return strings.Join(urls, " ")
}

// confFile is the configuration file to read: the one given, else def if
// it exists ("" when there is none).
func confFile(given, def string) string {
	if given != "" {
		return given
	}
	if _, err := os.Stat(def); err == nil {
		return def
	}
	return ""
}
