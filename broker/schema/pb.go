package schema

import (
	"encoding/binary"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// The binary protocol's Schema.Type shares Pulsar's numbers for the
// non-negative types; of the negative (client-side) ones only AutoConsume
// (-3) travels, and Pulsar maps any other negative number to None.

// InfoFromPB converts a schema from a PRODUCER, SUBSCRIBE or
// GET_OR_CREATE_SCHEMA command. Its name is not kept: Pulsar names stored
// schemas by topic.
func InfoFromPB(s *pb.Schema) Info {
	t := Type(s.GetType())
	if t < 0 && t != AutoConsume {
		t = None
	}
	info := Info{Type: t, Data: slices.Clone(s.GetSchemaData())}
	if kvs := s.GetProperties(); len(kvs) > 0 {
		info.Properties = make(map[string]string, len(kvs))
		for _, kv := range kvs {
			info.Properties[kv.GetKey()] = kv.GetValue()
		}
	}
	return info
}

// ToPB converts a schema for GET_SCHEMA's response. name is what Pulsar
// puts there, the schema id (ID.String()). Properties go out sorted by key
// so that responses are deterministic.
func (i Info) ToPB(name string) *pb.Schema {
	t := pb.Schema_Type(i.Type)
	if i.Type < 0 && i.Type != AutoConsume {
		t = pb.Schema_None
	}
	s := &pb.Schema{Name: proto.String(name), SchemaData: slices.Clone(i.Data), Type: t.Enum()}
	if s.SchemaData == nil {
		s.SchemaData = []byte{} // a required field: present even when empty
	}
	keys := make([]string, 0, len(i.Properties))
	for k := range i.Properties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s.Properties = append(s.Properties, &pb.KeyValue{Key: proto.String(k), Value: proto.String(i.Properties[k])})
	}
	return s
}

// VersionBytes encodes a version as the protocol carries it
// (schema_version fields): 8 bytes, big-endian.
func VersionBytes(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}

// ParseVersionBytes decodes a protocol schema_version. Empty means "the
// latest" and returns -1.
func ParseVersionBytes(b []byte) (int64, error) {
	switch len(b) {
	case 0:
		return -1, nil
	case 8:
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	return 0, fmt.Errorf("schema version: %d bytes, want 8", len(b))
}
