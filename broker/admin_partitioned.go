package broker

// The admin calls about a whole partitioned topic (admin.Topics):
// partitioned-stats, partition count, DELETE .../partitions. A partitioned
// topic has no owner of its own, so these run on any broker and reach
// each partition where it is served: here, or through the admin API of
// its owner (admin.Peers, following redirects).
//
// Behaviour:
//   - partitioned-stats sums the partitions' stats (subscriptions merged
//     by name). A partition never used has zero stats.
//   - DELETE .../partitions first checks every partition (errInUse while
//     one has producers or consumers, unless force), then deletes the
//     stored partitions, then the partition count and the schema. A
//     partition that cannot be deleted stops it before the partition
//     count goes.

import (
	"context"
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/metadata"
)

// Partitions is a topic's partition count, 0 if it is not partitioned
// (admin.Topics).
func (b *Broker) Partitions(ctx context.Context, name string) (int, error) {
	t, err := ParseTopicName(name)
	if err != nil {
		return 0, err
	}
	return b.partitions(ctx, t)
}

// CreatePartitioned records a partitioned topic with n partitions and its
// properties (admin.Topics).
func (b *Broker) CreatePartitioned(ctx context.Context, name string, n int, props map[string]string) error {
	t, err := ParseTopicName(name)
	if err != nil {
		return err
	}
	if err := b.admitNewTopics(ctx, t, n); err != nil {
		return err
	}
	return b.createPartitionedTopic(ctx, t, n, props)
}

// PartitionedStats sums the partitions' stats and lists them by
// partition name (admin.Topics).
func (b *Broker) PartitionedStats(ctx context.Context, name string) (admin.PartitionedTopicStats, error) {
	t, err := adminTopic(name)
	if err != nil {
		return admin.PartitionedTopicStats{}, err
	}
	n, err := b.partitions(ctx, t)
	if err == nil && n == 0 {
		err = fmt.Errorf("topic %s: %w", t, errNotPartitioned)
	}
	if err != nil {
		return admin.PartitionedTopicStats{}, err
	}
	out := admin.NewPartitionedTopicStats(n)
	for i := range n {
		p := partitionName(t, i)
		st, err := b.partitionStats(ctx, p)
		if err != nil {
			return admin.PartitionedTopicStats{}, err
		}
		out.Add(st)
		out.Partitions[p.String()] = st
	}
	// Created with its partitioned metadata (the partitions' storage may
	// not exist yet).
	if _, st, err := b.cfg.Metadata.Get(ctx, partitionedPath(t)); err == nil && !st.Created.IsZero() {
		out.TopicCreationTimeStamp = st.Created.UnixMilli()
	}
	return out, nil
}

// partitionStats is one partition's stats, from the broker serving it;
// zero for a partition that does not exist yet.
func (b *Broker) partitionStats(ctx context.Context, p TopicName) (admin.TopicStats, error) {
	empty := admin.TopicStats{Subscriptions: map[string]admin.SubscriptionStats{}, Publishers: []admin.PublisherStats{}}
	res, err := b.lookup(ctx, p, false)
	if err != nil {
		return empty, err
	}
	if !res.Self {
		st, ok, err := b.peers.RemoteTopicStats(ctx, res, topicPath(p))
		if !ok && err == nil {
			return empty, nil
		}
		return st, err
	}
	ok, err := b.topicExists(ctx, p)
	if err != nil || !ok {
		return empty, err
	}
	t, err := b.getTopic(ctx, p)
	if err != nil {
		return empty, err
	}
	return b.statsOf(t), nil
}

// DeletePartitioned deletes a partitioned topic: its partitions, wherever
// they are served, then its partition count and schema (admin.Topics).
func (b *Broker) DeletePartitioned(ctx context.Context, topicName string, force bool) error {
	name, err := adminTopic(topicName)
	if err != nil {
		return err
	}
	n, err := b.partitions(ctx, name)
	if err == nil && n == 0 {
		err = fmt.Errorf("topic %s: %w", name, errNotPartitioned)
	}
	if err == nil && !force {
		err = b.checkPartitionsIdle(ctx, name, n)
	}
	for i := 0; i < n && err == nil; i++ {
		err = b.deletePartition(ctx, partitionName(name, i))
	}
	if err == nil {
		err = b.cfg.Metadata.Delete(ctx, partitionedPath(name), metadata.AnyVersion)
	}
	if err == nil {
		b.log.Info("partitioned topic deleted", "topic", name.String(), "partitions", n, "force", force)
		b.namespaceTopicsChanged(name.Tenant, name.Namespace)
		err = b.deleteSchema(ctx, name)
	}
	return err
}

// checkPartitionsIdle fails with errInUse if a partition has producers or
// consumers.
func (b *Broker) checkPartitionsIdle(ctx context.Context, name TopicName, n int) error {
	for i := range n {
		p := partitionName(name, i)
		st, err := b.partitionStats(ctx, p)
		if err != nil {
			return err
		}
		consumers := 0
		for _, s := range st.Subscriptions {
			consumers += len(s.Consumers)
		}
		if len(st.Publishers)+consumers > 0 {
			return fmt.Errorf("partition %s %w: %d producers, %d consumers", p, errInUse, len(st.Publishers), consumers)
		}
	}
	return nil
}

// deletePartition deletes one partition (disconnecting its clients) where
// it is served; a partition never stored is skipped.
func (b *Broker) deletePartition(ctx context.Context, p TopicName) error {
	res, err := b.lookup(ctx, p, false)
	if err != nil {
		return err
	}
	if !res.Self {
		return b.peers.RemoteDeleteTopic(ctx, res, topicPath(p))
	}
	if err := b.deleteTopic(ctx, p, true); !errors.Is(err, errTopicNotFound) {
		return err
	}
	return nil
}

// topicPath is p's parts for a call to another broker's admin API.
func topicPath(p TopicName) admin.TopicPath {
	return admin.TopicPath{Domain: p.Domain, Tenant: p.Tenant, Namespace: p.Namespace, Local: p.Local}
}
