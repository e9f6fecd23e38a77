package broker

// Auto topic creation (allowAutoTopicCreation, allowAutoTopicCreationType,
// defaultNumPartitions, or the namespace's autoTopicCreationOverride):
//
//   - Allowed (the default): a producer or consumer on a topic that does
//     not exist creates it; with the partitioned type, asking for a new
//     topic's partitions (PARTITIONED_METADATA, which clients do first)
//     creates it partitioned with defaultNumPartitions.
//   - Not allowed: producers and consumers of a topic that does not exist
//     are refused with TopicNotFound; the admin API still creates topics.

import (
	"context"
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// autoCreation is the rule for one namespace.
type autoCreation struct {
	allowed     bool
	partitioned bool
	partitions  int
}

func (b *Broker) autoCreation(ctx context.Context, name TopicName) autoCreation {
	a := autoCreation{allowed: !b.cfg.AutoTopicCreationDisabled,
		partitioned: b.cfg.AutoTopicCreationType == resources.TopicTypePartitioned, partitions: b.cfg.DefaultNumPartitions}
	if res := b.cfg.Resources; res != nil {
		if p, err := res.NamespaceShared(ctx, name.Tenant, name.Namespace); err == nil && p.AutoTopicCreationOverride != nil {
			o := p.AutoTopicCreationOverride
			a.allowed, a.partitioned = o.AllowAutoTopicCreation, o.TopicType == resources.TopicTypePartitioned
			if o.DefaultNumPartitions != nil {
				a.partitions = *o.DefaultNumPartitions
			}
		}
	}
	a.partitions = max(a.partitions, 1)
	return a
}

// clientTopic is getTopic for producers and consumers: a topic that does
// not exist is created only where auto creation is allowed.
func (b *Broker) clientTopic(ctx context.Context, name TopicName) (*topic, error) {
	if t := b.loadedTopic(name); t != nil {
		return t, nil
	}
	if !b.autoCreation(ctx, name).allowed {
		ok, err := b.topicExists(ctx, name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("topic %s does not exist and auto topic creation is off: %w", name, errTopicNotFound)
		}
	} else if err := b.admitAutoCreated(ctx, name); err != nil {
		return nil, err
	}
	return b.getTopic(ctx, name)
}

// admitAutoCreated applies the namespace's topic limit to a client's
// topic that may be about to be created (only when a limit is set: it
// costs a listing).
func (b *Broker) admitAutoCreated(ctx context.Context, name TopicName) error {
	if _, _, ok := partitionOf(name); ok {
		return nil // its partitioned topic was admitted with all its partitions
	}
	if err := b.admitNewTopics(ctx, name, 1); err == nil {
		return nil // room for one more, or no limit: creating it is fine
	}
	if exists, err := b.topicExists(ctx, name); err != nil || exists {
		return err
	}
	return b.admitNewTopics(ctx, name, 1)
}

// autoCreatePartitioned makes a new topic partitioned when its namespace
// auto-creates partitioned topics; it returns the partition count, or 0
// when the topic stays non-partitioned (it exists, or the rule says so).
func (b *Broker) autoCreatePartitioned(ctx context.Context, name TopicName) (int, error) {
	if _, _, isPartition := partitionOf(name); isPartition || b.cfg.Metadata == nil {
		return 0, nil
	}
	a := b.autoCreation(ctx, name)
	if !a.allowed || !a.partitioned {
		return 0, nil
	}
	if exists, err := b.topicExists(ctx, name); err != nil || exists {
		return 0, err
	}
	if err := b.admitNewTopics(ctx, name, a.partitions); err != nil {
		return 0, err
	}
	err := b.CreatePartitionedTopic(ctx, name, a.partitions)
	if errors.Is(err, metadata.ErrExists) { // created meanwhile: read what it has
		return b.partitions(ctx, name)
	}
	if err != nil {
		return 0, err
	}
	b.log.Info("topic auto-created as partitioned", "topic", name.String(), "partitions", a.partitions)
	return a.partitions, nil
}

// topicErrorCode is what a client is told when its topic cannot be
// served: TopicNotFound (final) for a topic that does not exist, else
// ServiceNotReady (retried: the topic moved, or is loading).
func topicErrorCode(err error) pb.ServerError {
	switch {
	case errors.Is(err, errTopicNotFound):
		return pb.ServerError_TopicNotFound
	case errors.Is(err, errTooManyTopics):
		return pb.ServerError_NotAllowedError // as Pulsar: not retried
	}
	return pb.ServerError_ServiceNotReady
}

// errTooManyTopics refuses a topic past its namespace's
// max_topics_per_namespace (Pulsar's words).
var errTooManyTopics = admin.Errorf(resources.ErrPrecondition, "Exceed maximum number of topics in namespace")

// admitNewTopics refuses creating n more persistent topics in name's
// namespace past its max_topics_per_namespace (unset or 0: no limit). The
// count is of the topics stored or loaded, so concurrent creations may pass
// the limit by the few racing, as in Pulsar.
func (b *Broker) admitNewTopics(ctx context.Context, name TopicName, n int) error {
	res := b.cfg.Resources
	if res == nil || !name.Persistent() {
		return nil
	}
	p, err := res.NamespaceShared(ctx, name.Tenant, name.Namespace)
	if err != nil || p.MaxTopicsPerNamespace == nil || *p.MaxTopicsPerNamespace <= 0 {
		return nil // a namespace that cannot be read fails the creation elsewhere
	}
	limit := *p.MaxTopicsPerNamespace
	topics, err := b.persistentTopics(ctx, name.Tenant, name.Namespace)
	if err != nil {
		return err
	}
	if len(topics)+n > limit {
		return fmt.Errorf("topic %s: namespace %s/%s has %d topics and a limit of %d (maxTopicsPerNamespace): %w",
			name, name.Tenant, name.Namespace, len(topics), limit, errTooManyTopics)
	}
	return nil
}
