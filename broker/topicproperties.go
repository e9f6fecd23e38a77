package broker

// Topic properties (pulsar-admin topics get-properties, update-properties,
// remove-properties, and the properties given at creation). As in Pulsar,
// a non-partitioned topic keeps them in its managed ledger's metadata, so
// they move with the topic and go with its deletion; a partitioned topic
// keeps them in its partitioned metadata, next to the partition count.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/magnetar-io/magnetar/metadata"
)

// TopicProperties implements admin.Topics.
func (b *Broker) TopicProperties(ctx context.Context, name string) (map[string]string, error) {
	t, err := adminTopic(name)
	if err != nil {
		return nil, err
	}
	if ok, err := b.isPartitioned(ctx, t); err != nil || ok {
		if err != nil {
			return nil, err
		}
		md, _, err := b.partitionedNode(ctx, t)
		if err != nil {
			return nil, err
		}
		return propertiesOf(md), nil
	}
	tp, err := b.existingTopic(ctx, t)
	if err != nil {
		return nil, err
	}
	return tp.ml.Properties(), nil
}

// UpdateTopicProperties implements admin.Topics.
func (b *Broker) UpdateTopicProperties(ctx context.Context, name string, set map[string]string, remove []string) error {
	t, err := adminTopic(name)
	if err != nil {
		return err
	}
	if ok, err := b.isPartitioned(ctx, t); err != nil || ok {
		if err != nil {
			return err
		}
		return b.updatePartitionedProperties(ctx, t, set, remove)
	}
	tp, err := b.existingTopic(ctx, t)
	if err != nil {
		return err
	}
	if err := tp.ml.UpdateProperties(ctx, set, remove); err != nil {
		return fmt.Errorf("topic %s: properties: %w", t, err)
	}
	b.log.Info("topic properties changed", "topic", t.String(), "set", len(set), "removed", len(remove))
	return nil
}

// partitionedNode reads a partitioned topic's metadata whole, so members
// this broker does not model survive an update.
func (b *Broker) partitionedNode(ctx context.Context, t TopicName) (map[string]any, int64, error) {
	raw, st, err := b.cfg.Metadata.Get(ctx, partitionedPath(t))
	if errors.Is(err, metadata.ErrNotFound) {
		return nil, 0, fmt.Errorf("topic %s: %w", t, errNotPartitioned)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("partitioned metadata of %s: %w", t, err)
	}
	var md map[string]any
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, 0, fmt.Errorf("partitioned metadata of %s: %w", t, err)
	}
	return md, st.Version, nil
}

// propertiesOf are the string members of a partitioned metadata's
// properties.
func propertiesOf(md map[string]any) map[string]string {
	in, _ := md["properties"].(map[string]any)
	out := make(map[string]string, len(in))
	for k, v := range in {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// updatePartitionedProperties changes the properties in a partitioned
// topic's metadata by compare-and-set, retrying a concurrent change.
func (b *Broker) updatePartitionedProperties(ctx context.Context, t TopicName, set map[string]string, remove []string) error {
	for range 5 {
		md, version, err := b.partitionedNode(ctx, t)
		if err != nil {
			return err
		}
		props := propertiesOf(md)
		maps.Copy(props, set)
		for _, k := range remove {
			delete(props, k)
		}
		md["properties"] = props
		out, _ := json.Marshal(md)
		_, err = b.cfg.Metadata.Put(ctx, partitionedPath(t), out, version)
		if errors.Is(err, metadata.ErrBadVersion) {
			continue
		}
		if err != nil {
			return fmt.Errorf("partitioned metadata of %s: %w", t, err)
		}
		b.log.Info("topic properties changed", "topic", t.String(), "set", len(set), "removed", len(remove))
		return nil
	}
	return fmt.Errorf("partitioned metadata of %s: changed concurrently five times; try again", t)
}
