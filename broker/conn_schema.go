package broker

// Schema commands: GET_SCHEMA, GET_OR_CREATE_SCHEMA, and the schema checks
// of PRODUCER and SUBSCRIBE, over the registry in Config.Schemas
// (broker/schema).
//
// Behaviour:
//   - GET_SCHEMA answers the topic's latest schema, or the version asked
//     for (schema_version, 8 bytes big-endian), with its version. A topic
//     without a schema or without that version answers error_code
//     TopicNotFound, as Pulsar ("Topic not found or no-schema"); so does
//     every GET_SCHEMA without a registry. Any broker answers: histories
//     live in the shared metadata store, not with the topic's owner.
//   - GET_OR_CREATE_SCHEMA returns the version of an identical schema or
//     stores it if the namespace's strategy accepts it (PutIfCompatible);
//     refused with IncompatibleSchema. Without a registry it answers
//     without a version: nothing is stored and the client sends its
//     messages without one, as when producers' schemas are not checked.
//   - PRODUCER with a schema registers it the same way before the producer
//     is added; PRODUCER_SUCCESS carries schema_version.
//   - SUBSCRIBE with a schema is checked with CheckConsumerCompatibility.
//     On a topic without a schema, the consumer's is registered if the
//     topic is idle (no producer, no consumer, nothing stored), else it is
//     refused, as Pulsar's addSchemaIfIdleOrCheckCompatible.
//   - A NONE schema (what BYTES and client-side types arrive as: the
//     protocol enum has no negative values) counts as no schema: storing it
//     would lock the topic against typed producers.
//   - Registry errors map to IncompatibleSchema (incompatible or invalid
//     schema data), InvalidTopicName, TopicNotFound (no schema), else
//     MetadataError; the message says which.

import (
	"context"
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// errNoRegistry: GET_SCHEMA on a broker without a schema registry.
var errNoRegistry = errors.New("this broker stores no schemas (no schema registry configured)")

func (c *serverConn) handleGetSchema(cmd *pb.CommandGetSchema) error {
	reqID, topic, version := cmd.GetRequestId(), cmd.GetTopic(), cmd.GetSchemaVersion()
	if cmd.SchemaVersion != nil && len(version) == 0 { // Pulsar checks this first
		return c.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA_RESPONSE.Enum(), GetSchemaResponse: &pb.CommandGetSchemaResponse{
			RequestId: &reqID, ErrorCode: pb.ServerError_IncompatibleSchema.Enum(), ErrorMessage: ptr("Empty schema version")}})
	}
	c.goSafe("GET_SCHEMA", func() {
		v, err := c.b.schemaVersion(c.ctx, topic, version)
		resp := &pb.CommandGetSchemaResponse{RequestId: &reqID}
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = schemaErrorCode(err).Enum(), ptr(err.Error())
		} else {
			resp.Schema = v.ToPB(schemaName(topic))
			resp.SchemaVersion = schema.VersionBytes(v.Version)
		}
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA_RESPONSE.Enum(), GetSchemaResponse: resp})
	})
	return nil
}

// schemaVersion looks up a topic's schema: the latest when version is
// empty.
func (b *Broker) schemaVersion(ctx context.Context, topic string, version []byte) (schema.Version, error) {
	if b.cfg.Schemas == nil {
		return schema.Version{}, errNoRegistry
	}
	n, err := schema.ParseVersionBytes(version)
	if err != nil {
		return schema.Version{}, fmt.Errorf("%w: %v", schema.ErrNotFound, err)
	}
	if n < 0 {
		return b.cfg.Schemas.GetLatest(ctx, topic)
	}
	return b.cfg.Schemas.GetVersion(ctx, topic, n)
}

// schemaName is what Pulsar names a schema in responses: its id.
func schemaName(topic string) string {
	id, err := schema.ParseID(topic)
	if err != nil {
		return topic
	}
	return id.String()
}

func (c *serverConn) handleGetOrCreateSchema(cmd *pb.CommandGetOrCreateSchema) error {
	reqID, topic, s := cmd.GetRequestId(), cmd.GetTopic(), cmd.GetSchema()
	c.goSafe("GET_OR_CREATE_SCHEMA", func() {
		resp := &pb.CommandGetOrCreateSchemaResponse{RequestId: &reqID}
		name, err := ParseTopicName(topic)
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = pb.ServerError_InvalidTopicName.Enum(), ptr(err.Error())
		} else if resp.SchemaVersion, err = c.b.registerSchema(c.ctx, name, s); err != nil {
			resp.ErrorCode, resp.ErrorMessage = schemaErrorCode(err).Enum(), ptr(err.Error())
		}
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE.Enum(), GetOrCreateSchemaResponse: resp})
	})
	return nil
}

// registerSchema stores a producer's schema if it is new and compatible
// and returns its version for the client (nil when there is no schema to
// store, or no registry).
func (b *Broker) registerSchema(ctx context.Context, topic TopicName, s *pb.Schema) ([]byte, error) {
	if b.cfg.Schemas == nil || s == nil || s.GetType() == pb.Schema_None {
		return nil, nil
	}
	v, err := b.cfg.Schemas.PutIfCompatible(ctx, topic.String(), schema.InfoFromPB(s), "")
	if err != nil {
		return nil, fmt.Errorf("producer schema for %s: %w", topic, err)
	}
	return schema.VersionBytes(v), nil
}

// checkSchemaless refuses a producer without a schema on a topic that has
// one when the topic's schemaValidationEnforced (else its namespace's,
// else isSchemaValidationEnforced) is on, in Pulsar's words.
func (b *Broker) checkSchemaless(ctx context.Context, t *topic, s *pb.Schema) error {
	if b.cfg.Schemas == nil || (s != nil && s.GetType() != pb.Schema_None) {
		return nil
	}
	enforced, ok := topicPolicy[bool](ctx, t, "schemaValidationEnforced")
	if !ok {
		enforced = t.namespacePolicies(ctx).SchemaValidationEnforced || b.cfg.SchemaValidationEnforced
	}
	if !enforced {
		return nil
	}
	if _, err := b.cfg.Schemas.GetLatest(ctx, t.name.String()); errors.Is(err, schema.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("producer schema for %s: %w", t.name, err)
	}
	return fmt.Errorf("producer schema for %s: %w: Producers cannot connect or send message without a schema to "+
		"topics with a schema if SchemaValidationEnforced is enabled", t.name, schema.ErrIncompatible)
}

// checkConsumerSchema checks a subscribing consumer's schema against the
// topic's, registering it on an idle topic without one.
func (b *Broker) checkConsumerSchema(ctx context.Context, t *topic, s *pb.Schema) error {
	if b.cfg.Schemas == nil || s == nil || s.GetType() == pb.Schema_None {
		return nil
	}
	info := schema.InfoFromPB(s)
	err := b.cfg.Schemas.CheckConsumerCompatibility(ctx, t.name.String(), info)
	if !errors.Is(err, schema.ErrNotFound) {
		if err != nil {
			return fmt.Errorf("consumer schema for %s: %w", t.name, err)
		}
		return nil
	}
	if !t.idle() {
		return fmt.Errorf("consumer schema for %s: %w: the topic has no schema to check against and is in use",
			t.name, schema.ErrIncompatible)
	}
	if _, err := b.cfg.Schemas.PutIfCompatible(ctx, t.name.String(), info, ""); err != nil {
		return fmt.Errorf("consumer schema for %s: %w", t.name, err)
	}
	return nil
}

// idle reports whether the topic has no producer, no consumer and no
// stored data: a consumer's schema may then become the topic's.
func (t *topic) idle() bool {
	if t.ml.Size() > 0 {
		return false
	}
	producers, consumers := t.clients()
	return producers == 0 && consumers == 0
}

// schemaErrorCode is the protocol error for a registry error.
func schemaErrorCode(err error) pb.ServerError {
	switch {
	case errors.Is(err, schema.ErrIncompatible), errors.Is(err, schema.ErrInvalidSchema):
		return pb.ServerError_IncompatibleSchema
	case errors.Is(err, schema.ErrInvalidTopic):
		return pb.ServerError_InvalidTopicName
	case errors.Is(err, schema.ErrNotFound), errors.Is(err, errNoRegistry):
		return pb.ServerError_TopicNotFound
	}
	return pb.ServerError_MetadataError
}
