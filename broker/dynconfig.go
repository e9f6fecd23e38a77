package broker

// Dynamic configuration (pulsar-admin brokers update-dynamic-config):
// settings an operator changes on every broker at once, without a
// restart. As in Pulsar, overrides live in the configuration metadata
// store at /admin/configuration, a JSON object of key -> value (strings);
// every broker watches the node and applies it over the values it was
// started with. Deleting an override reverts to the started value.
//
// Package broker/admin serves the endpoints (pulsaradmin's Brokers)
// through the DynamicConfig methods below:
//
//	GET    /admin/v2/brokers/configuration                  dynamic keys
//	GET    /admin/v2/brokers/configuration/values           the overrides stored
//	POST   /admin/v2/brokers/configuration/{key}/{value}    set one (412: not dynamic, or invalid)
//	DELETE /admin/v2/brokers/configuration/{key}            remove one
//	GET    /admin/v2/brokers/configuration/runtime          every setting's value in effect here
//	GET    /admin/v2/brokers/internal-configuration         the metadata stores

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// DynamicConfigPath is where the overrides are stored (Pulsar's node).
const DynamicConfigPath = "/admin/configuration"

// dynamicSettings are the settings that can change at run time; the
// broker reads them through Broker.settings, never from cfg.
type dynamicSettings struct {
	maxPendingPublish int
	dispatcherBatch   int
	messageTTL        time.Duration
	quotaBytes        int64
	quotaPolicy       string
	retentionMinutes  int
	retentionMB       int64
	// replMsgRate and replByteRate are
	// dispatchThrottlingRatePerReplicatorIn{Msg,Byte}: each replicator's
	// limit a second without a namespace policy (0: none).
	replMsgRate, replByteRate int64
	// topicMsgRate, topicByteRate, subMsgRate and subByteRate are
	// dispatchThrottlingRatePer{Topic,Subscription}In{Msg,Byte}.
	topicMsgRate, topicByteRate, subMsgRate, subByteRate int64
	// publishMsgRate and publishByteRate are maxPublishRatePerTopicIn{Messages,Bytes}.
	publishMsgRate, publishByteRate int64
	// subscribeRate and subscribePeriod are subscribeThrottlingRatePerConsumer
	// and subscribeRatePeriodPerConsumerInSecond.
	subscribeRate, subscribePeriod int64
	// autoSubscriptionCreation is allowAutoSubscriptionCreation.
	autoSubscriptionCreation bool
}

// retention is the broker default retention these settings give.
func (s *dynamicSettings) retention() managedledger.Retention {
	return RetentionOf(s.retentionMinutes, s.retentionMB)
}

// dynamicKey is one dynamic setting: how to set it from a string, and
// how to print it.
type dynamicKey struct {
	set func(s *dynamicSettings, v string) error
	get func(s *dynamicSettings) string
}

// dynamicKeys are the settings update-dynamic-config accepts, under
// Pulsar's names.
func dynamicKeys() map[string]dynamicKey {
	return map[string]dynamicKey{
		"maxPendingPublishRequestsPerConnection": intKey(1, func(s *dynamicSettings) *int { return &s.maxPendingPublish }),
		"dispatcherMaxReadBatchSize":             intKey(1, func(s *dynamicSettings) *int { return &s.dispatcherBatch }),
		"defaultRetentionTimeInMinutes":          intKey(-1, func(s *dynamicSettings) *int { return &s.retentionMinutes }),
		"defaultRetentionSizeInMB": {
			set: func(s *dynamicSettings, v string) error { return parseInt64(v, -1, &s.retentionMB) },
			get: func(s *dynamicSettings) string { return strconv.FormatInt(s.retentionMB, 10) },
		},
		"ttlDurationDefaultInSeconds": {
			set: func(s *dynamicSettings, v string) error {
				var secs int64
				err := parseInt64(v, 0, &secs)
				s.messageTTL = time.Duration(secs) * time.Second
				return err
			},
			get: func(s *dynamicSettings) string { return strconv.FormatInt(int64(s.messageTTL/time.Second), 10) },
		},
		"dispatchThrottlingRatePerReplicatorInMsg":    rateKey(func(s *dynamicSettings) *int64 { return &s.replMsgRate }),
		"dispatchThrottlingRatePerReplicatorInByte":   rateKey(func(s *dynamicSettings) *int64 { return &s.replByteRate }),
		"dispatchThrottlingRatePerTopicInMsg":         rateKey(func(s *dynamicSettings) *int64 { return &s.topicMsgRate }),
		"dispatchThrottlingRatePerTopicInByte":        rateKey(func(s *dynamicSettings) *int64 { return &s.topicByteRate }),
		"dispatchThrottlingRatePerSubscriptionInMsg":  rateKey(func(s *dynamicSettings) *int64 { return &s.subMsgRate }),
		"dispatchThrottlingRatePerSubscriptionInByte": rateKey(func(s *dynamicSettings) *int64 { return &s.subByteRate }),
		"maxPublishRatePerTopicInMessages":            rateKey(func(s *dynamicSettings) *int64 { return &s.publishMsgRate }),
		"maxPublishRatePerTopicInBytes":               rateKey(func(s *dynamicSettings) *int64 { return &s.publishByteRate }),
		"subscribeThrottlingRatePerConsumer":          rateKey(func(s *dynamicSettings) *int64 { return &s.subscribeRate }),
		"subscribeRatePeriodPerConsumerInSecond": {
			set: func(s *dynamicSettings, v string) error { return parseInt64(v, 1, &s.subscribePeriod) },
			get: func(s *dynamicSettings) string { return strconv.FormatInt(s.subscribePeriod, 10) },
		},
		// As Pulsar reads a boolean setting (Boolean.valueOf): "true" in
		// any case is true and every other value false, never an error.
		"allowAutoSubscriptionCreation": {
			set: func(s *dynamicSettings, v string) error {
				s.autoSubscriptionCreation = strings.EqualFold(v, "true")
				return nil
			},
			get: func(s *dynamicSettings) string { return strconv.FormatBool(s.autoSubscriptionCreation) },
		},
		"backlogQuotaDefaultLimitBytes": {
			set: func(s *dynamicSettings, v string) error { return parseInt64(v, -1, &s.quotaBytes) },
			get: func(s *dynamicSettings) string { return strconv.FormatInt(s.quotaBytes, 10) },
		},
		"backlogQuotaDefaultRetentionPolicy": {
			set: func(s *dynamicSettings, v string) error {
				if !ValidBacklogPolicy(v) {
					return fmt.Errorf("want producer_request_hold, producer_exception or consumer_backlog_eviction")
				}
				s.quotaPolicy = v
				return nil
			},
			get: func(s *dynamicSettings) string { return s.quotaPolicy },
		},
	}
}

// rateKey is a rate limit setting: 0 (no limit) or more.
func rateKey(field func(*dynamicSettings) *int64) dynamicKey {
	return dynamicKey{
		set: func(s *dynamicSettings, v string) error { return parseInt64(v, 0, field(s)) },
		get: func(s *dynamicSettings) string { return strconv.FormatInt(*field(s), 10) },
	}
}

func intKey(minimum int, field func(*dynamicSettings) *int) dynamicKey {
	return dynamicKey{
		set: func(s *dynamicSettings, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < minimum {
				return fmt.Errorf("want a whole number >= %d", minimum)
			}
			*field(s) = n
			return nil
		},
		get: func(s *dynamicSettings) string { return strconv.Itoa(*field(s)) },
	}
}

func parseInt64(v string, minimum int64, dst *int64) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < minimum {
		return fmt.Errorf("want a whole number >= %d", minimum)
	}
	*dst = n
	return nil
}

// startedSettings are the dynamic settings as the broker was started.
func startedSettings(c Config) *dynamicSettings {
	return &dynamicSettings{maxPendingPublish: c.MaxPendingPublishRequestsPerConnection,
		dispatcherBatch: c.DispatcherMaxReadBatchSize, messageTTL: c.MessageTTL,
		quotaBytes: c.BacklogQuotaDefaultLimitBytes, quotaPolicy: c.BacklogQuotaDefaultRetentionPolicy,
		retentionMinutes: c.DefaultRetentionMinutes, retentionMB: c.DefaultRetentionMB,
		replMsgRate: c.DispatchThrottlingRatePerReplicatorInMsg, replByteRate: c.DispatchThrottlingRatePerReplicatorInByte,
		topicMsgRate: c.DispatchThrottlingRatePerTopicInMsg, topicByteRate: c.DispatchThrottlingRatePerTopicInByte,
		subMsgRate: c.DispatchThrottlingRatePerSubscriptionInMsg, subByteRate: c.DispatchThrottlingRatePerSubscriptionInByte,
		publishMsgRate: c.MaxPublishRatePerTopicInMessages, publishByteRate: c.MaxPublishRatePerTopicInBytes,
		subscribeRate: c.SubscribeThrottlingRatePerConsumer, subscribePeriod: c.SubscribeRatePeriodPerConsumerInSecond,
		autoSubscriptionCreation: !c.AutoSubscriptionCreationDisabled}
}

// settings are the dynamic settings in effect.
func (b *Broker) settings() *dynamicSettings { return b.dyn.Load() }

// applyOverrides sets the started settings with overrides on top. An
// override this broker cannot apply (another version wrote it) is logged
// and skipped, so the others still apply.
func (b *Broker) applyOverrides(overrides map[string]string) {
	s := startedSettings(b.cfg)
	keys := dynamicKeys()
	for k, v := range overrides {
		key, ok := keys[k]
		if !ok {
			b.log.Warn("dynamic configuration: unknown key ignored", "key", k)
			continue
		}
		if err := key.set(s, v); err != nil {
			b.log.Warn("dynamic configuration: invalid value ignored", "key", k, "value", v, "err", err)
		}
	}
	b.dyn.Store(s)
}

// watchDynamicConfig applies the stored overrides now and on every change
// until the broker closes.
func (b *Broker) watchDynamicConfig() {
	store := b.cfg.Metadata
	ctx := b.ctx // cancelled by Close, which ends the watch
	w, err := store.Watch(ctx, DynamicConfigPath)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("dynamic configuration: cannot watch the metadata store; overrides apply after a restart", "err", err)
		}
		return
	}
	defer w.Close()
	b.reloadOverrides(ctx)
	for {
		select {
		case <-ctx.Done(): // the watch need not end with ctx: Close waits for this loop
			return
		case _, ok := <-w.Events():
			if !ok {
				return
			}
			b.reloadOverrides(ctx)
		}
	}
}

func (b *Broker) reloadOverrides(ctx context.Context) {
	overrides, _, err := readOverrides(ctx, b.cfg.Metadata)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("dynamic configuration: cannot read the overrides", "err", err)
		}
		return
	}
	b.applyOverrides(overrides)
}

// readOverrides reads the stored overrides and the node's version (-1
// when there is no node yet).
func readOverrides(ctx context.Context, store metadata.Store) (map[string]string, int64, error) {
	raw, st, err := store.Get(ctx, DynamicConfigPath)
	if errors.Is(err, metadata.ErrNotFound) {
		return map[string]string{}, -1, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dynamic configuration: %w", err)
	}
	overrides := map[string]string{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &overrides); err != nil {
			return nil, 0, fmt.Errorf("dynamic configuration at %s is not a JSON object of strings: %w", DynamicConfigPath, err)
		}
	}
	return overrides, st.Version, nil
}

// changeOverrides applies change to the stored overrides by
// compare-and-set, retrying on a concurrent update.
func changeOverrides(ctx context.Context, store metadata.Store, change func(map[string]string) error) error {
	for {
		overrides, version, err := readOverrides(ctx, store)
		if err != nil {
			return err
		}
		if err := change(overrides); err != nil {
			return err
		}
		raw, _ := json.Marshal(overrides)
		if version < 0 {
			_, _, err = store.Create(ctx, DynamicConfigPath, raw, metadata.CreateOptions{})
		} else {
			_, err = store.Put(ctx, DynamicConfigPath, raw, version)
		}
		if errors.Is(err, metadata.ErrExists) || errors.Is(err, metadata.ErrBadVersion) {
			continue
		}
		if err != nil {
			return fmt.Errorf("dynamic configuration: %w", err)
		}
		return nil
	}
}

// DynamicKeys are the settings update-dynamic-config accepts, sorted
// (admin.DynamicConfig).
func (b *Broker) DynamicKeys() []string {
	keys := make([]string, 0, len(dynamicKeys()))
	for k := range dynamicKeys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// DynamicOverrides are the overrides stored (admin.DynamicConfig).
func (b *Broker) DynamicOverrides(ctx context.Context) (map[string]string, error) {
	if b.cfg.Metadata == nil {
		return nil, errMetadataRequired
	}
	overrides, _, err := readOverrides(ctx, b.cfg.Metadata)
	return overrides, err
}

// SetDynamic stores an override, checked against the started settings
// (admin.DynamicConfig); every broker applies it when it sees it.
func (b *Broker) SetDynamic(ctx context.Context, k, v string) error {
	key, ok := dynamicKeys()[k]
	switch {
	case b.cfg.Metadata == nil:
		return errMetadataRequired
	case !ok:
		return admin.Errorf(resources.ErrPrecondition, "%s is not a dynamic configuration (GET /admin/v2/brokers/configuration lists them)", k)
	}
	if err := key.set(startedSettings(b.cfg), v); err != nil {
		return admin.Errorf(resources.ErrPrecondition, "%s: invalid value %q: %v", k, v, err)
	}
	if err := changeOverrides(ctx, b.cfg.Metadata, func(o map[string]string) error { o[k] = v; return nil }); err != nil {
		return err
	}
	b.log.Info("dynamic configuration updated", "key", k, "value", v)
	return nil
}

// DeleteDynamic removes an override, reverting to the started value
// (admin.DynamicConfig); errNotSet if there is none.
func (b *Broker) DeleteDynamic(ctx context.Context, k string) error {
	if b.cfg.Metadata == nil {
		return errMetadataRequired
	}
	if _, ok := dynamicKeys()[k]; !ok {
		return admin.Errorf(resources.ErrPrecondition, "%s is not a dynamic configuration", k)
	}
	err := changeOverrides(ctx, b.cfg.Metadata, func(o map[string]string) error {
		if _, set := o[k]; !set {
			return fmt.Errorf("%w: no override of %s", errNotSet, k)
		}
		delete(o, k)
		return nil
	})
	if err != nil {
		return err
	}
	b.log.Info("dynamic configuration override removed", "key", k)
	return nil
}

var errNotSet = admin.ErrNotSet

// RuntimeConfig lists the settings in effect on this broker: the dynamic
// ones with their overrides applied, and the others it was started with
// (admin.DynamicConfig).
func (b *Broker) RuntimeConfig() map[string]string {
	out := map[string]string{
		"clusterName":                         b.cfg.ClusterName,
		"maxMessageSize":                      strconv.Itoa(b.cfg.MaxMessageSize),
		"brokerDeduplicationEnabled":          strconv.FormatBool(b.cfg.BrokerDeduplicationEnabled),
		"keepAliveIntervalSeconds":            strconv.Itoa(int(b.cfg.KeepAliveInterval / time.Second)),
		"statsUpdateFrequencyInSecs":          strconv.Itoa(int(b.cfg.StatsUpdateFrequency / time.Second)),
		"messageExpiryCheckIntervalInMinutes": strconv.FormatFloat(b.cfg.MessageExpiryCheckInterval.Minutes(), 'f', -1, 64),
		"backlogQuotaCheckIntervalInSeconds":  strconv.Itoa(int(b.cfg.BacklogQuotaCheckInterval / time.Second)),
		"retentionCheckIntervalInSeconds":     strconv.Itoa(int(b.cfg.RetentionCheckInterval / time.Second)),
		"allowAutoTopicCreation":              strconv.FormatBool(!b.cfg.AutoTopicCreationDisabled),
	}
	s := b.settings()
	for k, key := range dynamicKeys() {
		out[k] = key.get(s)
	}
	return out
}

// InternalConfig names the metadata stores, as Pulsar's
// InternalConfigurationData (admin.DynamicConfig).
func (b *Broker) InternalConfig() map[string]string {
	return map[string]string{"zookeeperServers": b.cfg.MetadataStoreURL, "metadataStoreUrl": b.cfg.MetadataStoreURL,
		"configurationStoreServers": b.cfg.ConfigurationStoreURL, "configurationMetadataStoreUrl": b.cfg.ConfigurationStoreURL,
		"bookkeeperMetadataServiceUri": b.cfg.MetadataStoreURL, "stateStorageServiceUrl": ""}
}
