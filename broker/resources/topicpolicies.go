package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/metadata"
)

// topicPoliciesRoot holds topic-level policies. Pulsar keeps them in the
// namespace's __change_events system topic; Magnetar keeps them in the
// configuration store, one node per topic, so every cluster of an
// instance reads the same ones:
// /admin/topic-policies/<tenant>/<namespace>/<domain>/<encoded topic>.
const topicPoliciesRoot = "/admin/topic-policies"

// TopicPolicies are a topic's own policies (only what is modelled:
// replication clusters and the replicators' dispatch rate). Nil means not
// set: the namespace's apply.
type TopicPolicies struct {
	ReplicationClusters []string `json:"replicationClusters,omitempty"`
	// ReplicatorDispatchRate limits each of the topic's replicators in the
	// cluster it is keyed by: a local topic policy, as Pulsar's topic
	// policies are unless set with isGlobal.
	ReplicatorDispatchRate map[string]DispatchRate `json:"replicatorDispatchRate,omitempty"`
	// GlobalReplicatorDispatchRate (isGlobal) applies in every cluster
	// without a local one.
	GlobalReplicatorDispatchRate *DispatchRate `json:"globalReplicatorDispatchRate,omitempty"`

	// Extra holds the members this type does not model, verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

type plainTopicPolicies TopicPolicies

// UnmarshalJSON keeps unknown members in Extra.
func (p *TopicPolicies) UnmarshalJSON(data []byte) error {
	var v plainTopicPolicies
	extra, err := decodeWithExtra(data, &v)
	if err != nil {
		return err
	}
	v.Extra = extra
	*p = TopicPolicies(v)
	return nil
}

// MarshalJSON writes the modelled and the Extra members.
func (p TopicPolicies) MarshalJSON() ([]byte, error) {
	return encodeWithExtra(plainTopicPolicies(p), p.Extra)
}

func topicPoliciesPath(t TopicName) string {
	return topicPoliciesRoot + "/" + t.Tenant + "/" + t.Namespace + "/" + t.Domain + "/" + encodeLocalName(t.Local)
}

// GetTopicPolicies returns a topic's policies (zero when none are set).
func (r *Resources) GetTopicPolicies(ctx context.Context, t TopicName) (TopicPolicies, error) {
	if err := t.validate(); err != nil {
		return TopicPolicies{}, err
	}
	p, _, err := getJSON[TopicPolicies](ctx, r.store, topicPoliciesPath(t), "policies of topic "+t.String())
	if errors.Is(err, ErrNotFound) {
		return TopicPolicies{}, nil
	}
	return p, err
}

// SetTopicReplicationClusters sets a topic's replication clusters (nil or
// empty: removed, the namespace's apply). Each must exist and be allowed
// for the namespace (its allowed clusters, else its tenant's), as for a
// namespace's.
func (r *Resources) SetTopicReplicationClusters(ctx context.Context, t TopicName, clusters []string) error {
	if err := t.validate(); err != nil {
		return err
	}
	if len(clusters) > 0 {
		ns, err := r.GetNamespace(ctx, t.Tenant, t.Namespace)
		if err != nil {
			return err
		}
		info, err := r.GetTenant(ctx, t.Tenant)
		if err != nil {
			return err
		}
		check := ns
		check.ReplicationClusters = sortedSet(clusters)
		if err := r.checkReplication(ctx, t.Tenant, info, &check); err != nil {
			return err
		}
		clusters = check.ReplicationClusters
	}
	return r.updateTopicPolicies(ctx, t, func(p *TopicPolicies) { p.ReplicationClusters = clusters })
}

// SetTopicReplicatorDispatchRate sets (nil: removes) the dispatch rate of
// a topic's replicators in cluster, or with cluster "" (Pulsar's
// isGlobal) in every cluster without one of its own.
func (r *Resources) SetTopicReplicatorDispatchRate(ctx context.Context, t TopicName, cluster string, rate *DispatchRate) error {
	if err := t.validate(); err != nil {
		return err
	}
	if rate != nil && rate.RatePeriodInSecond < 1 {
		return invalidf("replicatorDispatchRate.ratePeriodInSecond", "must be >= 1, got %d", rate.RatePeriodInSecond)
	}
	return r.updateTopicPolicies(ctx, t, func(p *TopicPolicies) {
		switch {
		case cluster == "":
			p.GlobalReplicatorDispatchRate = rate
		case rate == nil:
			delete(p.ReplicatorDispatchRate, cluster)
		default:
			if p.ReplicatorDispatchRate == nil {
				p.ReplicatorDispatchRate = map[string]DispatchRate{}
			}
			p.ReplicatorDispatchRate[cluster] = *rate
		}
	})
}

// ReplicatorDispatchRateIn is the topic-level rate in force in cluster:
// its own, else the global one (nil: none).
func (p TopicPolicies) ReplicatorDispatchRateIn(cluster string) *DispatchRate {
	if r, ok := p.ReplicatorDispatchRate[cluster]; ok {
		return &r
	}
	return p.GlobalReplicatorDispatchRate
}

// updateTopicPolicies applies change to a topic's policies by
// compare-and-set, keeping what it does not touch.
func (r *Resources) updateTopicPolicies(ctx context.Context, t TopicName, change func(*TopicPolicies)) error {
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		cur, stat, err := getJSON[TopicPolicies](ctx, r.store, topicPoliciesPath(t), "policies of topic "+t.String())
		version := stat.Version
		if errors.Is(err, ErrNotFound) {
			version = metadata.AnyVersion
		} else if err != nil {
			return err
		}
		change(&cur)
		raw, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		_, err = r.store.Put(ctx, topicPoliciesPath(t), raw, version)
		if errors.Is(err, metadata.ErrBadVersion) || errors.Is(err, metadata.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write policies of topic %s: %w", t, err)
		}
		return nil
	}
	return fmt.Errorf("update policies of topic %s: %w", t, ErrConflict)
}
