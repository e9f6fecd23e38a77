package broker

// Partitioned topics. A partitioned topic is metadata only: its partition
// count lives in the configuration store at
// /admin/partitioned-topics/{tenant}/{namespace}/{domain}/{topic} as
// {"partitions": N}, and each partition is an ordinary topic named
// {topic}-partition-{i}. Clients read the count (PARTITIONED_METADATA or
// HTTP) and route messages themselves.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/magnetar-io/magnetar/metadata"
)

const partitionSuffix = "-partition-"

// partitionedPath is where a topic's partition count is stored.
func partitionedPath(t TopicName) string {
	return "/admin/partitioned-topics/" + t.Tenant + "/" + t.Namespace + "/" + t.Domain + "/" + t.Local
}

type partitionedMetadata struct {
	Partitions int               `json:"partitions"`
	Properties map[string]string `json:"properties,omitempty"`
}

// partitions returns a topic's partition count (0: not partitioned).
func (b *Broker) partitions(ctx context.Context, t TopicName) (int, error) {
	n, err := b.recordedPartitions(ctx, t)
	if err == nil && n == 0 && t == assignTopic && b.cfg.TransactionCoordinatorEnabled {
		return b.ensureAssignTopic(ctx) // transactions on, nothing recorded yet (txncoord.go)
	}
	return n, err
}

// recordedPartitions is the partition count the metadata store records.
func (b *Broker) recordedPartitions(ctx context.Context, t TopicName) (int, error) {
	if b.cfg.Metadata == nil || strings.Contains(t.Local, partitionSuffix) {
		return 0, nil
	}
	raw, _, err := b.cfg.Metadata.Get(ctx, partitionedPath(t))
	if errors.Is(err, metadata.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("partitioned metadata of %s: %w", t, err)
	}
	var md partitionedMetadata
	if err := json.Unmarshal(raw, &md); err != nil {
		return 0, fmt.Errorf("partitioned metadata of %s: %w", t, err)
	}
	return md.Partitions, nil
}

// partitionsOfNamespace names every partition of tenant/ns's persistent
// partitioned topics, as the metadata store records them.
func (b *Broker) partitionsOfNamespace(ctx context.Context, tenant, ns string) ([]string, error) {
	if b.cfg.Metadata == nil {
		return nil, nil
	}
	dir := "/admin/partitioned-topics/" + tenant + "/" + ns + "/persistent"
	locals, err := b.cfg.Metadata.Children(ctx, dir)
	if errors.Is(err, metadata.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list partitioned topics of %s/%s: %w", tenant, ns, err)
	}
	var out []string
	for _, local := range locals {
		base := TopicName{Domain: "persistent", Tenant: tenant, Namespace: ns, Local: local}
		n, err := b.partitions(ctx, base)
		if err != nil {
			return nil, err
		}
		for i := range n {
			out = append(out, partitionName(base, i).String())
		}
	}
	return out, nil
}

// CreatePartitionedTopic records a partitioned topic with n partitions;
// it fails if the topic is already partitioned.
func (b *Broker) CreatePartitionedTopic(ctx context.Context, t TopicName, n int) error {
	return b.createPartitionedTopic(ctx, t, n, nil)
}

// createPartitionedTopic is CreatePartitionedTopic with the topic's
// properties (nil: none).
func (b *Broker) createPartitionedTopic(ctx context.Context, t TopicName, n int, props map[string]string) error {
	if b.cfg.Metadata == nil {
		return errors.New("no metadata store: partitioned topics are unavailable")
	}
	if n <= 0 || n > 10000 {
		return fmt.Errorf("partitions must be between 1 and 10000, got %d", n)
	}
	if strings.Contains(t.Local, partitionSuffix) {
		return fmt.Errorf("topic %s is itself a partition", t)
	}
	raw, _ := json.Marshal(partitionedMetadata{Partitions: n, Properties: props})
	_, _, err := b.cfg.Metadata.Create(ctx, partitionedPath(t), raw, metadata.CreateOptions{})
	if errors.Is(err, metadata.ErrExists) {
		return fmt.Errorf("topic %s is already partitioned: %w", t, err)
	}
	if err == nil {
		b.namespaceTopicsChanged(t.Tenant, t.Namespace)
	}
	return err
}
