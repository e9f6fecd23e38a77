package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/metadata"
)

// brokerSettings are the broker settings standalone and broker share,
// set from the configuration file under Pulsar's key names.
type brokerSettings struct {
	maxMessageSize      int
	maxPendingPublish   int
	dispatcherBatch     int
	keepAlive           time.Duration
	maxEntriesPerLedger int
	dedup               bool
	ttl                 time.Duration
	expiryCheck         time.Duration
	quotaBytes          int64
	quotaGB             float64
	quotaPolicy         string
	quotaCheck          time.Duration
	statsUpdate         time.Duration
}

func (s *brokerSettings) setters() map[string]confSetter {
	return map[string]confSetter{
		"maxMessageSize":                         setInt(&s.maxMessageSize),
		"maxPendingPublishRequestsPerConnection": setInt(&s.maxPendingPublish),
		"dispatcherMaxReadBatchSize":             setInt(&s.dispatcherBatch),
		"keepAliveIntervalSeconds":               setSeconds(&s.keepAlive),
		"managedLedgerMaxEntriesPerLedger":       setInt(&s.maxEntriesPerLedger),
		"brokerDeduplicationEnabled":             setBool(&s.dedup),
		"ttlDurationDefaultInSeconds":            setDuration(&s.ttl, time.Second),
		"messageExpiryCheckIntervalInMinutes":    setDuration(&s.expiryCheck, time.Minute),
		"backlogQuotaDefaultLimitBytes":          setInt64(&s.quotaBytes),
		"backlogQuotaDefaultLimitGB":             setFloat(&s.quotaGB),
		"backlogQuotaDefaultRetentionPolicy":     setString(&s.quotaPolicy),
		"backlogQuotaCheckIntervalInSeconds":     setSeconds(&s.quotaCheck),
		"statsUpdateFrequencyInSecs":             setSeconds(&s.statsUpdate),
	}
}

func (s *brokerSettings) validate(path string) error {
	if s.quotaPolicy != "" && !broker.ValidBacklogPolicy(s.quotaPolicy) {
		return fmt.Errorf("config %s: backlogQuotaDefaultRetentionPolicy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", path, s.quotaPolicy)
	}
	return nil
}

// backlogQuotaBytes is the quota in bytes: backlogQuotaDefaultLimitBytes,
// else the deprecated backlogQuotaDefaultLimitGB, else none.
func (s *brokerSettings) backlogQuotaBytes() int64 {
	if s.quotaBytes > 0 {
		return s.quotaBytes
	}
	return int64(s.quotaGB * (1 << 30))
}

// brokerConfig is the broker's configuration; configStore holds
// partitioned-topic metadata and namespace policies.
func (s *brokerSettings) brokerConfig(cluster, advertised string, configStore metadata.Store, res *resources.Resources, log *slog.Logger) (broker.Config, error) {
	schemas, err := schema.New(schema.Config{Store: configStore, NamespaceStrategy: broker.SchemaPolicies(res), Logger: log})
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
		BacklogQuotaCheckInterval: s.quotaCheck, StatsUpdateFrequency: s.statsUpdate}, nil
}
