package broker

// Schemas over the binary protocol (the official Go client and raw
// commands) and the registry's admin endpoints on the broker's handler.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/wire/pb"
)

const (
	userV1 = `{"type":"record","name":"User","namespace":"test","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}`
	// userV2 adds a field with a default: compatible both ways (FULL).
	userV2 = `{"type":"record","name":"User","namespace":"test","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"},{"name":"email","type":"string","default":""}]}`
	// userBad changes a field's type: incompatible.
	userBad = `{"type":"record","name":"User","namespace":"test","fields":[{"name":"name","type":"string"},{"name":"age","type":"string"}]}`
)

type user struct {
	Name string `json:"name" avro:"name"`
	Age  int    `json:"age" avro:"age"`
}

// roundTrip sends one user with the schema and reads it back through a
// consumer with the same schema, decoding with the version the message
// carries (a GET_SCHEMA).
func roundTrip(t *testing.T, c pulsar.Client, topic string, sch func() pulsar.Schema) {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Schema: sch(),
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: sch()})
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer p.Close()
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Value: &user{Name: "ada", Age: 36}}); err != nil {
		t.Fatalf("send: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got user
	if err := m.GetSchemaValue(&got); err != nil || got != (user{Name: "ada", Age: 36}) {
		t.Fatalf("decoded %+v, %v (schema version %x)", got, err, m.SchemaVersion())
	}
}

func TestSchemaRoundTrips(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), true)
	c := newClient(t, env.url)
	roundTrip(t, c, "json-users", func() pulsar.Schema { return pulsar.NewJSONSchema(userV1, nil) })
	roundTrip(t, c, "avro-users", func() pulsar.Schema { return pulsar.NewAvroSchema(userV1, nil) })
	for topic, typ := range map[string]string{"json-users": "JSON", "avro-users": "AVRO"} {
		info, err := env.admin.Schemas().GetSchemaInfo("persistent://public/default/" + topic)
		// The client sends the definition in Avro's canonical form.
		if err != nil || info.Type != typ || !strings.Contains(string(info.Schema), `"test.User"`) {
			t.Fatalf("admin schema of %s: %+v, %v", topic, info, err)
		}
	}
}

func TestSchemaCompatibility(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), true)
	c := newClient(t, env.url)
	const topic = "persistent://public/default/evolving"
	for i, def := range []string{userV1, userV2} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewAvroSchema(def, nil)})
		if err != nil {
			t.Fatalf("producer %d: %v", i, err)
		}
		p.Close()
	}
	if info, err := env.admin.Schemas().GetSchemaInfoWithVersion(topic); err != nil || info.Version != 1 {
		t.Fatalf("latest version = %+v, %v", info, err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewAvroSchema(userBad, nil)}); err == nil {
		t.Fatal("a producer with an incompatible schema was accepted")
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewJSONSchema(userV1, nil)}); err == nil {
		t.Fatal("a producer changing the schema type was accepted")
	}
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "bad",
		Schema: pulsar.NewAvroSchema(userBad, nil)}); err == nil {
		t.Fatal("a consumer with an incompatible schema was accepted")
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "good", Schema: pulsar.NewAvroSchema(userV1, nil)})
	if err != nil {
		t.Fatalf("compatible consumer: %v", err)
	}
	cons.Close()

	// A topic with data but no schema does not take a consumer's schema.
	produce(t, c, "schemaless", 1, false)
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "schemaless", SubscriptionName: "s",
		Schema: pulsar.NewJSONSchema(userV1, nil)}); err == nil {
		t.Fatal("a consumer schema was accepted on a used topic without a schema")
	}
}

// GET_SCHEMA and GET_OR_CREATE_SCHEMA as raw commands, with their errors.
func TestSchemaCommands(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), true)
	r := dialRaw(t, env.url)
	r.connect()
	const topic = "persistent://public/default/raw-schema"
	avro := func(def string) *pb.Schema {
		return &pb.Schema{Name: ptr("x"), Type: pb.Schema_Avro.Enum(), SchemaData: []byte(def)}
	}
	getOrCreate := func(req uint64, s *pb.Schema) *pb.CommandGetOrCreateSchemaResponse {
		t.Helper()
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA.Enum(), GetOrCreateSchema: &pb.CommandGetOrCreateSchema{
			RequestId: ptr(req), Topic: ptr(topic), Schema: s}})
		cmd, err := r.read()
		if err != nil || cmd.GetType() != pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE || cmd.GetGetOrCreateSchemaResponse().GetRequestId() != req {
			t.Fatalf("GET_OR_CREATE_SCHEMA answered %v, %v", cmd, err)
		}
		return cmd.GetGetOrCreateSchemaResponse()
	}
	getSchema := func(req uint64, version []byte) *pb.CommandGetSchemaResponse {
		t.Helper()
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{
			RequestId: ptr(req), Topic: ptr(topic), SchemaVersion: version}})
		cmd, err := r.read()
		if err != nil || cmd.GetType() != pb.BaseCommand_GET_SCHEMA_RESPONSE || cmd.GetGetSchemaResponse().GetRequestId() != req {
			t.Fatalf("GET_SCHEMA answered %v, %v", cmd, err)
		}
		return cmd.GetGetSchemaResponse()
	}

	if resp := getSchema(1, nil); resp.GetErrorCode() != pb.ServerError_TopicNotFound || resp.GetErrorMessage() == "" {
		t.Fatalf("GET_SCHEMA without a schema: %v", resp)
	}
	if resp := getOrCreate(2, avro(userV1)); resp.ErrorCode != nil || string(resp.GetSchemaVersion()) != string(schema.VersionBytes(0)) {
		t.Fatalf("first schema: %v", resp)
	}
	if resp := getOrCreate(3, avro(userV2)); resp.ErrorCode != nil || string(resp.GetSchemaVersion()) != string(schema.VersionBytes(1)) {
		t.Fatalf("compatible schema: %v", resp)
	}
	if resp := getOrCreate(4, avro(userBad)); resp.GetErrorCode() != pb.ServerError_IncompatibleSchema || resp.GetErrorMessage() == "" {
		t.Fatalf("incompatible schema: %v", resp)
	}
	if resp := getSchema(5, schema.VersionBytes(0)); resp.ErrorCode != nil || string(resp.GetSchema().GetSchemaData()) != userV1 ||
		resp.GetSchema().GetType() != pb.Schema_Avro || string(resp.GetSchemaVersion()) != string(schema.VersionBytes(0)) {
		t.Fatalf("GET_SCHEMA version 0: %v", resp)
	}
	if resp := getSchema(6, nil); string(resp.GetSchema().GetSchemaData()) != userV2 {
		t.Fatalf("GET_SCHEMA latest: %v", resp)
	}
	if resp := getSchema(7, schema.VersionBytes(9)); resp.GetErrorCode() != pb.ServerError_TopicNotFound {
		t.Fatalf("GET_SCHEMA of a missing version: %v", resp)
	}
	// PRODUCER with a schema answers its version.
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: ptr(topic), ProducerId: ptr(uint64(1)), RequestId: ptr(uint64(8)), Schema: avro(userV2)}})
	if cmd, err := r.read(); err != nil || string(cmd.GetProducerSuccess().GetSchemaVersion()) != string(schema.VersionBytes(1)) {
		t.Fatalf("PRODUCER with a schema: %v, %v", cmd, err)
	}
}

// Without a registry nothing is stored: GET_SCHEMA fails, and producers
// and consumers with schemas work as before.
func TestSchemaWithoutRegistry(t *testing.T) {
	_, url := startBroker(t)
	roundTrip(t, newClient(t, url), "no-registry", func() pulsar.Schema { return pulsar.NewJSONSchema(userV1, nil) })
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{
		RequestId: ptr(uint64(1)), Topic: ptr("no-registry")}})
	cmd, err := r.read()
	if err != nil || cmd.GetGetSchemaResponse().GetErrorCode() != pb.ServerError_TopicNotFound {
		t.Fatalf("GET_SCHEMA without a registry: %v, %v", cmd, err)
	}
}
