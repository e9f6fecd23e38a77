package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
