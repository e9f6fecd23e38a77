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
	// Local holds the other topic-level policies set for one cluster (a
	// Pulsar topic policy is local unless set with isGlobal): cluster,
	// then the policy's REST name (messageTTL, retention, ...), then its
	// value as the admin API validated it.
	Local map[string]map[string]json.RawMessage `json:"localPolicies,omitempty"`
	// Global holds those set with isGlobal, for every cluster without a
	// local value.
	Global map[string]json.RawMessage `json:"globalPolicies,omitempty"`

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

// Value is the topic-level policy name in force in cluster: its local
// value, else its global one.
func (p TopicPolicies) Value(cluster, name string) (json.RawMessage, bool) {
	if v, ok := p.Local[cluster][name]; ok {
		return v, true
	}
	v, ok := p.Global[name]
	return v, ok
}

// Own is the policy's value as set for cluster ("": the global one),
// without falling back to the other scope.
func (p TopicPolicies) Own(cluster, name string) (json.RawMessage, bool) {
	if cluster == "" {
		v, ok := p.Global[name]
		return v, ok
	}
	v, ok := p.Local[cluster][name]
	return v, ok
}

// TopicPolicy decodes the policy name in force in cluster (ok false when
// the topic has none, or its stored value does not decode).
func TopicPolicy[T any](p TopicPolicies, cluster, name string) (v T, ok bool) {
	raw, found := p.Value(cluster, name)
	if !found || json.Unmarshal(raw, &v) != nil {
		return v, false
	}
	return v, true
}

// SetTopicPolicy sets a topic-level policy for cluster ("": global,
// Pulsar's isGlobal) to value, already validated; a nil value removes it.
func (r *Resources) SetTopicPolicy(ctx context.Context, t TopicName, cluster, name string, value json.RawMessage) error {
	if err := t.validate(); err != nil {
		return err
	}
	return r.updateTopicPolicies(ctx, t, func(p *TopicPolicies) {
		scope := p.Global
		if cluster != "" {
			scope = p.Local[cluster]
		}
		if value == nil {
			delete(scope, name)
		} else {
			if scope == nil {
				scope = map[string]json.RawMessage{}
			}
			scope[name] = value
		}
		if cluster == "" {
			p.Global = scope
			return
		}
		if p.Local == nil {
			p.Local = map[string]map[string]json.RawMessage{}
		}
		p.Local[cluster] = scope
		if len(scope) == 0 {
			delete(p.Local, cluster)
		}
	})
}

// TopicPoliciesShared returns a topic's policies through the cache (zero
// when none are set): the value is shared, to read only. Topics read
// their policies on every producer, consumer and periodic check; a loaded
// topic holds a TopicPoliciesRef and reads with TopicPoliciesAt.
func (r *Resources) TopicPoliciesShared(ctx context.Context, t TopicName) (TopicPolicies, error) {
	ref, err := NewTopicPoliciesRef(t)
	if err != nil {
		return TopicPolicies{}, err
	}
	return r.TopicPoliciesAt(ctx, ref)
}

// TopicPoliciesRef is where a topic's policies are stored, its name
// checked and encoded once: with 10,000 topics the broker read policies
// 20,000 times a second (SENDs refreshing a limit, the dispatch-rate
// pass), and checking and encoding the name each time was half of it.
type TopicPoliciesRef struct {
	topic TopicName
	path  string
}

// NewTopicPoliciesRef validates t and returns the reference to its
// policies.
func NewTopicPoliciesRef(t TopicName) (TopicPoliciesRef, error) {
	if err := t.validate(); err != nil {
		return TopicPoliciesRef{}, err
	}
	return TopicPoliciesRef{topic: t, path: topicPoliciesPath(t)}, nil
}

// TopicPoliciesVersion is the topic policies cache's Version: while it
// stays, what TopicPoliciesAt returned for a topic after it was taken is
// still current.
func (r *Resources) TopicPoliciesVersion() (v uint64, live bool) { return r.topicPolicies.Version() }

// TopicPoliciesAt is TopicPoliciesShared for a reference.
func (r *Resources) TopicPoliciesAt(ctx context.Context, ref TopicPoliciesRef) (TopicPolicies, error) {
	if ref.path == "" {
		return TopicPolicies{}, invalidf("topic", "no topic: a zero TopicPoliciesRef")
	}
	p, _, found, err := r.topicPolicies.Get(ctx, ref.path)
	if err != nil {
		return TopicPolicies{}, fmt.Errorf("read policies of topic %s: %w", ref.topic, err)
	}
	if !found {
		return TopicPolicies{}, nil
	}
	return p, nil
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
		r.topicPolicies.Invalidate(topicPoliciesPath(t))
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
