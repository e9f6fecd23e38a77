package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/magnetar-io/magnetar/metadata"
)

// partitionSuffix marks a partition of a partitioned topic.
const partitionSuffix = "-partition-"

// PartitionedTopicMetadata is Pulsar's PartitionedTopicMetadata, stored at
// /admin/partitioned-topics/<tenant>/<namespace>/<domain>/<encoded topic>:
// {"partitions": N} plus optional properties and a deleted mark.
type PartitionedTopicMetadata struct {
	Partitions int               `json:"partitions"`
	Properties map[string]string `json:"properties,omitempty"`
	Deleted    bool              `json:"deleted,omitempty"`

	// Extra holds the members this type does not model, verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

type plainPartitioned PartitionedTopicMetadata

// UnmarshalJSON keeps unknown members in Extra.
func (m *PartitionedTopicMetadata) UnmarshalJSON(data []byte) error {
	var v plainPartitioned
	extra, err := decodeWithExtra(data, &v)
	if err != nil {
		return err
	}
	v.Extra = extra
	*m = PartitionedTopicMetadata(v)
	return nil
}

// MarshalJSON writes the modelled and the Extra members.
func (m PartitionedTopicMetadata) MarshalJSON() ([]byte, error) {
	return encodeWithExtra(plainPartitioned(m), m.Extra)
}

func (m *PartitionedTopicMetadata) validate() error {
	if m.Partitions < 1 || m.Partitions > MaxPartitions {
		return invalidf("partitions", "must be between 1 and %d, got %d", MaxPartitions, m.Partitions)
	}
	return nil
}

// partitionedPath is Pulsar's path, with the local name URL-encoded.
func partitionedPath(t TopicName) string {
	return partitionedRoot + "/" + t.Tenant + "/" + t.Namespace + "/" + t.Domain + "/" + encodeLocalName(t.Local)
}

func partitionedWhat(t TopicName) string { return "partitioned topic " + t.String() }

// GetPartitionedTopic returns a partitioned topic's metadata; ErrNotFound
// means the topic is not partitioned.
func (r *Resources) GetPartitionedTopic(ctx context.Context, t TopicName) (PartitionedTopicMetadata, error) {
	if err := t.validate(); err != nil {
		return PartitionedTopicMetadata{}, err
	}
	m, _, err := getJSON[PartitionedTopicMetadata](ctx, r.store, partitionedPath(t), partitionedWhat(t))
	return m, err
}

// CreatePartitionedTopic records a partitioned topic of an existing
// namespace (ErrExists if it is already partitioned).
func (r *Resources) CreatePartitionedTopic(ctx context.Context, t TopicName, m PartitionedTopicMetadata) error {
	if err := t.validate(); err != nil {
		return err
	}
	if strings.Contains(t.Local, partitionSuffix) {
		return invalidf("topic", "%s is itself a partition", t)
	}
	if err := m.validate(); err != nil {
		return err
	}
	ok, err := r.NamespaceExists(ctx, t.Tenant, t.Namespace)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(namespaceWhat(t.Tenant, t.Namespace))
	}
	return createJSON(ctx, r.store, partitionedPath(t), partitionedWhat(t), m)
}

// UpdatePartitionedTopic applies mutate and writes the result if valid.
// Partitions can only be added: existing partitions hold data.
func (r *Resources) UpdatePartitionedTopic(ctx context.Context, t TopicName,
	mutate func(*PartitionedTopicMetadata) error) (PartitionedTopicMetadata, error) {
	if err := t.validate(); err != nil {
		return PartitionedTopicMetadata{}, err
	}
	return updateJSON(ctx, r.store, partitionedPath(t), partitionedWhat(t), func(m *PartitionedTopicMetadata) error {
		before := m.Partitions
		if err := mutate(m); err != nil {
			return err
		}
		if m.Partitions < before {
			return invalidf("partitions", "can only be increased, from %d, got %d", before, m.Partitions)
		}
		return m.validate()
	})
}

// DeletePartitionedTopic removes a partitioned topic's metadata.
func (r *Resources) DeletePartitionedTopic(ctx context.Context, t TopicName) error {
	if err := t.validate(); err != nil {
		return err
	}
	err := r.store.Delete(ctx, partitionedPath(t), metadata.AnyVersion)
	if errors.Is(err, metadata.ErrNotFound) {
		return notFound(partitionedWhat(t))
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", partitionedWhat(t), err)
	}
	return nil
}

// ListPartitionedTopics returns a namespace's partitioned topics, full
// names, persistent first, each domain sorted by encoded name.
func (r *Resources) ListPartitionedTopics(ctx context.Context, tenant, ns string) ([]string, error) {
	if err := validateNamespaceName(tenant, ns); err != nil {
		return nil, err
	}
	topics, err := r.partitionedTopicNames(ctx, tenant, ns)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.String()
	}
	return names, nil
}

func (r *Resources) partitionedTopicNames(ctx context.Context, tenant, ns string) ([]TopicName, error) {
	var out []TopicName
	for _, domain := range []string{DomainPersistent, DomainNonPersistent} {
		encoded, err := children(ctx, r.store, partitionedRoot+"/"+tenant+"/"+ns+"/"+domain)
		if err != nil {
			return nil, err
		}
		for _, e := range encoded {
			local, err := decodeLocalName(e)
			if err != nil {
				return nil, fmt.Errorf("partitioned topics of %s: %w: %v", namespaceWhat(tenant, ns), ErrCorrupt, err)
			}
			out = append(out, TopicName{Domain: domain, Tenant: tenant, Namespace: ns, Local: local})
		}
	}
	return out, nil
}
