package schema

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
)

// Errors the registry returns (wrapped with context); test with errors.Is.
var (
	// ErrNotFound: the topic has no schema, or not the version asked for
	// (versions before the last deletion are gone for readers, as in Pulsar).
	ErrNotFound = errors.New("schema: not found")
	// ErrIncompatible: the strategy refuses the schema; the broker answers
	// ServerError IncompatibleSchema, the admin API 409.
	ErrIncompatible = errors.New("schema: incompatible")
	// ErrInvalidSchema: the schema data is malformed for its type, too
	// large, or of a client-side type; the admin API answers 422.
	ErrInvalidSchema = errors.New("schema: invalid schema data")
	// ErrInvalidTopic: the topic name does not name a schema.
	ErrInvalidTopic = errors.New("schema: invalid topic name")
	// ErrCorrupt: a stored version cannot be decoded. Never reported as
	// "not found": the history exists and must not be silently replaced.
	ErrCorrupt = errors.New("schema: corrupt stored schema")
)

// Type is Pulsar's SchemaType, with its numbers (which the binary
// protocol's Schema.Type shares for the non-negative ones).
type Type int32

// Pulsar's schema types. The negative ones are client-side and never stored.
const (
	None           Type = 0
	String         Type = 1
	JSON           Type = 2
	Protobuf       Type = 3
	Avro           Type = 4
	Boolean        Type = 5
	Int8           Type = 6
	Int16          Type = 7
	Int32          Type = 8
	Int64          Type = 9
	Float          Type = 10
	Double         Type = 11
	Date           Type = 12
	Time           Type = 13
	Timestamp      Type = 14
	KeyValue       Type = 15
	Instant        Type = 16
	LocalDate      Type = 17
	LocalTime      Type = 18
	LocalDateTime  Type = 19
	ProtobufNative Type = 20
	Bytes          Type = -1
	Auto           Type = -2
	AutoConsume    Type = -3
	AutoPublish    Type = -4
)

// typeNames are the names Pulsar's REST API and stored records use.
var typeNames = map[Type]string{
	None: "NONE", String: "STRING", JSON: "JSON", Protobuf: "PROTOBUF", Avro: "AVRO",
	Boolean: "BOOLEAN", Int8: "INT8", Int16: "INT16", Int32: "INT32", Int64: "INT64",
	Float: "FLOAT", Double: "DOUBLE", Date: "DATE", Time: "TIME", Timestamp: "TIMESTAMP",
	KeyValue: "KEY_VALUE", Instant: "INSTANT", LocalDate: "LOCAL_DATE", LocalTime: "LOCAL_TIME",
	LocalDateTime: "LOCAL_DATE_TIME", ProtobufNative: "PROTOBUF_NATIVE",
	Bytes: "BYTES", Auto: "AUTO", AutoConsume: "AUTO_CONSUME", AutoPublish: "AUTO_PUBLISH",
}

// String is Pulsar's name for the type.
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "TYPE(" + strconv.Itoa(int(t)) + ")"
}

// ParseType reads a Pulsar type name ("AVRO", "KEY_VALUE").
func ParseType(name string) (Type, error) {
	for t, n := range typeNames {
		if n == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown schema type %q", name)
}

// primitive reports whether Pulsar counts the type as primitive: its
// schema data is empty and carries no structure to evolve.
func (t Type) primitive() bool {
	switch t {
	case None, String, Boolean, Int8, Int16, Int32, Int64, Float, Double, Date, Time,
		Timestamp, Instant, LocalDate, LocalTime, LocalDateTime, Bytes:
		return true
	}
	return false
}

// avroBased reports whether the schema data is an Avro definition (Pulsar
// keeps JSON and PROTOBUF schemas as Avro records too).
func (t Type) avroBased() bool { return t == Avro || t == JSON || t == Protobuf }

// Strategy is Pulsar's SchemaCompatibilityStrategy.
type Strategy int

// The strategies. Undefined means "the broker default".
const (
	Undefined Strategy = iota
	AlwaysIncompatible
	AlwaysCompatible
	Backward
	Forward
	Full
	BackwardTransitive
	ForwardTransitive
	FullTransitive
)

var strategyNames = [...]string{
	Undefined: "UNDEFINED", AlwaysIncompatible: "ALWAYS_INCOMPATIBLE", AlwaysCompatible: "ALWAYS_COMPATIBLE",
	Backward: "BACKWARD", Forward: "FORWARD", Full: "FULL", BackwardTransitive: "BACKWARD_TRANSITIVE",
	ForwardTransitive: "FORWARD_TRANSITIVE", FullTransitive: "FULL_TRANSITIVE",
}

// String is Pulsar's name for the strategy.
func (s Strategy) String() string {
	if s >= 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return "STRATEGY(" + strconv.Itoa(int(s)) + ")"
}

// ParseStrategy reads a Pulsar strategy name ("FULL", "backward_transitive").
func ParseStrategy(name string) (Strategy, error) {
	for s, n := range strategyNames {
		if strings.EqualFold(n, name) {
			return Strategy(s), nil
		}
	}
	return 0, fmt.Errorf("unknown schema compatibility strategy %q", name)
}

func (s Strategy) valid() bool { return s >= Undefined && s <= FullTransitive }

// Transitive reports whether the strategy checks every version since the
// last deletion rather than only the latest.
func (s Strategy) Transitive() bool {
	return s == BackwardTransitive || s == ForwardTransitive || s == FullTransitive
}

// Info is a schema as producers, consumers and admins present it.
type Info struct {
	Type       Type
	Data       []byte
	Properties map[string]string
}

// Clone returns a deep copy, so that callers cannot alias stored state.
func (i Info) Clone() Info {
	return Info{Type: i.Type, Data: append([]byte(nil), i.Data...), Properties: maps.Clone(i.Properties)}
}

// Version is one stored version of a topic's schema.
type Version struct {
	Info
	// Version counts from 0 per schema id; deletion markers take numbers too.
	Version int64
	// Timestamp is when the version was stored (millisecond precision).
	Timestamp time.Time
	// User is the principal that stored it ("" when unknown).
	User string
	// Deleted marks a deletion: versions before it no longer count.
	Deleted bool
}

// ID names a schema history: the topic without domain or partition
// suffix, so persistent and non-persistent topics of one name, and all the
// partitions of a partitioned topic, share it (Pulsar's getSchemaName).
type ID struct {
	Tenant, Namespace, Topic string
}

// String is tenant/namespace/topic.
func (id ID) String() string { return id.Tenant + "/" + id.Namespace + "/" + id.Topic }

const partitionSuffix = "-partition-"

// ParseID accepts the topic forms clients send: "topic" (public/default),
// "tenant/ns/topic" and full names with a domain, with or without a
// partition suffix.
func ParseID(topic string) (ID, error) {
	rest := topic
	if d, r, ok := strings.Cut(topic, "://"); ok {
		if d != "persistent" && d != "non-persistent" {
			return ID{}, fmt.Errorf("%w %q: domain must be persistent or non-persistent", ErrInvalidTopic, topic)
		}
		rest = r
	}
	parts := strings.Split(rest, "/")
	var id ID
	switch len(parts) {
	case 1:
		id = ID{Tenant: "public", Namespace: "default", Topic: parts[0]}
	case 3:
		id = ID{Tenant: parts[0], Namespace: parts[1], Topic: parts[2]}
	default:
		return ID{}, fmt.Errorf("%w %q: want <topic>, <tenant>/<namespace>/<topic> or a full name", ErrInvalidTopic, topic)
	}
	id.Topic = stripPartition(id.Topic)
	for _, p := range []string{id.Tenant, id.Namespace, id.Topic} {
		if err := checkSegment(p); err != nil {
			return ID{}, fmt.Errorf("%w %q: %v", ErrInvalidTopic, topic, err)
		}
	}
	return id, nil
}

// stripPartition removes "-partition-N" when N is a number, as Pulsar's
// TopicName does; other uses of the text stay part of the name.
func stripPartition(local string) string {
	i := strings.LastIndex(local, partitionSuffix)
	if i < 0 {
		return local
	}
	if _, err := strconv.ParseUint(local[i+len(partitionSuffix):], 10, 31); err != nil {
		return local
	}
	return local[:i]
}

// checkSegment rejects what cannot be one metadata path segment.
func checkSegment(s string) error {
	if s == "" || s == "." || s == ".." {
		return fmt.Errorf("empty, . or .. name part")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '/' {
			return fmt.Errorf("character %U not allowed in a name part", r)
		}
	}
	return nil
}
