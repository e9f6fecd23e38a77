package broker

import (
	"context"
	"fmt"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
)

// TopicReplicationClusters is a topic's own replication clusters, or
// with applied those in force (admin.TopicPolicies).
func (b *Broker) TopicReplicationClusters(ctx context.Context, name string, applied bool) ([]string, error) {
	t, err := b.policyTopic(name)
	if err != nil {
		return nil, err
	}
	c, set, err := b.topicReplicationClusters(ctx, t)
	if err != nil || set || !applied {
		return c, err
	}
	p, err := b.cfg.Resources.GetNamespace(ctx, t.Tenant, t.Namespace)
	return p.ReplicationClusters, err
}

// SetTopicReplicationClusters sets or (empty) removes a topic's
// replication clusters (admin.TopicPolicies); loaded topics pick the
// change up at their next replication check.
func (b *Broker) SetTopicReplicationClusters(ctx context.Context, name string, clusters []string) error {
	t, err := b.policyTopic(name)
	if err != nil {
		return err
	}
	if err := b.cfg.Resources.SetTopicReplicationClusters(ctx, resourceTopic(t), clusters); err != nil {
		return err
	}
	b.log.Info("topic replication clusters set", "topic", t.String(), "clusters", clusters)
	return nil
}

// TopicReplicatorDispatchRate is a topic's own replicator dispatch rate
// in this cluster (global: the one set for every cluster; nil: none), or
// with applied the one in force here: the topic's (this cluster's, else
// its global one), else its namespace's for this cluster, else the
// broker's (admin.TopicPolicies).
func (b *Broker) TopicReplicatorDispatchRate(ctx context.Context, name string, global, applied bool) (*resources.DispatchRate, error) {
	t, err := b.policyTopic(name)
	if err != nil {
		return nil, err
	}
	own, err := b.cfg.Resources.GetTopicPolicies(ctx, resourceTopic(t))
	if err != nil {
		return nil, err
	}
	if !applied {
		if global {
			return own.GlobalReplicatorDispatchRate, nil
		}
		r, ok := own.ReplicatorDispatchRate[b.cfg.ClusterName]
		if !ok {
			return nil, nil
		}
		return &r, nil
	}
	p, err := b.cfg.Resources.GetNamespace(ctx, t.Tenant, t.Namespace)
	if err != nil {
		return nil, err
	}
	r := b.replicatorRate(p, own.ReplicatorDispatchRateIn(b.cfg.ClusterName))
	return &r, nil
}

// SetTopicReplicatorDispatchRate sets or (nil) removes a topic's
// replicator dispatch rate in this cluster, or with global in every
// cluster without its own (admin.TopicPolicies); loaded topics apply it
// at their next replication check.
func (b *Broker) SetTopicReplicatorDispatchRate(ctx context.Context, name string, global bool, rate *resources.DispatchRate) error {
	t, err := b.policyTopic(name)
	if err != nil {
		return err
	}
	cluster := b.policyScope(global)
	if err := b.cfg.Resources.SetTopicReplicatorDispatchRate(ctx, resourceTopic(t), cluster, rate); err != nil {
		return err
	}
	b.log.Info("topic replicator dispatch rate set", "topic", t.String(), "cluster", cluster, "global", global, "rate", rate)
	return nil
}

// policyTopic parses a topic for its policies: a partition's are its
// partitioned topic's.
func (b *Broker) policyTopic(name string) (TopicName, error) {
	if b.cfg.Resources == nil {
		return TopicName{}, fmt.Errorf("topic policies: %w", admin.ErrMetadataRequired)
	}
	t, err := adminTopic(name)
	if err != nil {
		return TopicName{}, err
	}
	return policyName(t), nil
}

// policyName is the topic whose policies apply to t: a partition's are
// its partitioned topic's.
func policyName(t TopicName) TopicName {
	if base, _, ok := partitionOf(t); ok {
		return base
	}
	return t
}

// policyScope is the cluster a topic policy is set for: this broker's, or
// "" for every cluster (Pulsar's isGlobal).
func (b *Broker) policyScope(global bool) string {
	if global {
		return ""
	}
	return b.cfg.ClusterName
}

func resourceTopic(t TopicName) resources.TopicName {
	return resources.TopicName{Domain: t.Domain, Tenant: t.Tenant, Namespace: t.Namespace, Local: t.Local}
}
