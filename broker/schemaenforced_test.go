package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/metadata"
)

// TestSchemaValidationEnforced: with the topic's schemaValidationEnforced
// (else its namespace's), a producer without a schema is refused on a
// topic that has one, with Pulsar's reason; a topic without a schema still
// takes it, and so does any topic while enforcement is off.
func TestSchemaValidationEnforced(t *testing.T) {
	reg, err := schema.New(schema.Config{Store: metadata.NewMemoryServer().NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	b, url := startPolicyBrokerWith(t, func(p *resources.Policies) {}, 0, Config{Schemas: reg})
	c := newClient(t, url)
	ctx := context.Background()
	const typed, plain = "persistent://t/ns/typed", "persistent://t/ns/plain"
	producer := func(topic string, s pulsar.Schema) error {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: s})
		if err == nil {
			p.Close()
		}
		return err
	}
	if err := producer(typed, pulsar.NewStringSchema(nil)); err != nil {
		t.Fatal(err)
	}
	if err := producer(typed, nil); err != nil {
		t.Fatalf("no schema, enforcement off: %v", err)
	}
	if err := b.SetTopicPolicy(ctx, typed, "schemaValidationEnforced", false, json.RawMessage("true")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a schemaless producer refused", func() error {
		err := producer(typed, nil)
		if err == nil || !strings.Contains(err.Error(), "SchemaValidationEnforced") {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	if err := producer(typed, pulsar.NewStringSchema(nil)); err != nil {
		t.Fatalf("with the topic's schema, enforced: %v", err)
	}
	if _, err := b.cfg.Resources.UpdateNamespace(ctx, "t", "ns", func(p *resources.Policies) error {
		p.SchemaValidationEnforced = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := producer(plain, nil); err != nil {
		t.Fatalf("a topic without a schema, enforced by its namespace: %v", err)
	}
}

// TestTopicSchemaCompatibilityStrategy: a topic's own
// schemaCompatibilityStrategy wins over its namespace's (here the broker's
// FULL) for producers' schemas, and removing it restores the namespace's;
// the applied value reads the same.
func TestTopicSchemaCompatibilityStrategy(t *testing.T) {
	// The registry is made before the broker it asks: the broker is
	// published through an atomic, since its connection goroutines read it
	// with no other edge to the test's write the race detector could see.
	var started atomic.Pointer[Broker]
	reg, err := schema.New(schema.Config{Store: metadata.NewMemoryServer().NewSession(),
		TopicStrategy: func(ctx context.Context, id schema.ID) (schema.Strategy, error) {
			b := started.Load()
			return TopicSchemaStrategy(b.cfg.Resources, b.cfg.ClusterName)(ctx, id)
		}})
	if err != nil {
		t.Fatal(err)
	}
	b, url := startPolicyBrokerWith(t, func(p *resources.Policies) {}, 0, Config{Schemas: reg})
	started.Store(b)
	c := newClient(t, url)
	ctx := context.Background()
	const topic = "persistent://t/ns/evolving"
	producer := func(s pulsar.Schema) error {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: s})
		if err == nil {
			p.Close()
		}
		return err
	}
	applied := func() string { // as the admin API answers it
		v, err := b.TopicPolicy(ctx, topic, "schemaCompatibilityStrategy", false, true)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	if err := producer(pulsar.NewStringSchema(nil)); err != nil {
		t.Fatal(err)
	}
	if err := producer(pulsar.NewInt64Schema(nil)); err == nil {
		t.Fatal("another schema type was accepted under FULL")
	}
	if v := applied(); v != `"FULL"` {
		t.Fatalf("applied strategy without a topic policy: %v, want FULL", v)
	}
	if err := b.SetTopicPolicy(ctx, topic, "schemaCompatibilityStrategy", false, json.RawMessage(`"NOT_A_STRATEGY"`)); err == nil {
		t.Fatal("an unknown strategy name was accepted")
	}
	if err := b.SetTopicPolicy(ctx, topic, "schemaCompatibilityStrategy", false, json.RawMessage(`"ALWAYS_COMPATIBLE"`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the topic's ALWAYS_COMPATIBLE in force", func() error { return producer(pulsar.NewInt64Schema(nil)) })
	if v := applied(); v != `"ALWAYS_COMPATIBLE"` {
		t.Fatalf("applied strategy: %v, want the topic's ALWAYS_COMPATIBLE", v)
	}
	if err := b.SetTopicPolicy(ctx, topic, "schemaCompatibilityStrategy", false, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the namespace's FULL in force again", func() error {
		if err := producer(pulsar.NewFloatSchema(nil)); err == nil {
			return errors.New("a third schema type was accepted after the topic's policy was removed")
		}
		return nil
	})
}
