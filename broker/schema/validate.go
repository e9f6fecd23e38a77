package schema

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// MaxDataSize bounds one version's schema data: a stored version is one
// metadata node (limit 1 MiB) holding the data in base64 plus properties.
const MaxDataSize = 512 << 10

// maxKeyValueDepth bounds KEY_VALUE nesting (Pulsar clients nest at most
// once; the bound keeps validation's recursion finite on crafted data).
const maxKeyValueDepth = 4

// validate checks that the schema data is well formed for its type, as
// Pulsar's SchemaDataValidator does before storing or checking a schema.
func validate(info Info) error {
	if len(info.Data) > MaxDataSize {
		return fmt.Errorf("%w: %s schema data is %d bytes, over the %d-byte limit",
			ErrInvalidSchema, info.Type, len(info.Data), MaxDataSize)
	}
	return validateDepth(info, 0)
}

func validateDepth(info Info, depth int) error {
	switch {
	case info.Type.avroBased():
		return validateStruct(info)
	case info.Type == ProtobufNative:
		_, err := protobufNativeRoot(info.Data)
		return err
	case info.Type == String:
		// Python clients send "null" for a string schema.
		if len(info.Data) > 0 && string(info.Data) != "null" {
			return fmt.Errorf("%w: STRING schema data must be empty, got %q", ErrInvalidSchema, clip(info.Data))
		}
		return nil
	case info.Type == None || info.Type == Bytes:
		return nil
	case info.Type == KeyValue:
		return validateKeyValue(info, depth)
	case info.Type.primitive():
		if len(info.Data) > 0 {
			return fmt.Errorf("%w: %s schema data must be empty, got %d bytes", ErrInvalidSchema, info.Type, len(info.Data))
		}
		return nil
	case info.Type < 0:
		return fmt.Errorf("%w: %s is a client-side schema type", ErrInvalidSchema, info.Type)
	}
	return fmt.Errorf("%w: unknown schema type %s", ErrInvalidSchema, info.Type)
}

func validateKeyValue(info Info, depth int) error {
	if depth >= maxKeyValueDepth {
		return fmt.Errorf("%w: key/value schemas nested more than %d deep", ErrInvalidSchema, maxKeyValueDepth)
	}
	key, value, err := splitKeyValueInfo(info)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	if err := validateDepth(key, depth+1); err != nil {
		return fmt.Errorf("key schema: %w", err)
	}
	if err := validateDepth(value, depth+1); err != nil {
		return fmt.Errorf("value schema: %w", err)
	}
	return nil
}

// validateStruct: AVRO and PROTOBUF data must be an Avro definition; JSON
// may also be a legacy Jackson JSON Schema (Pulsar clients before 2.1).
func validateStruct(info Info) error {
	_, err := parseAvro(info.Data)
	if err == nil {
		return nil
	}
	if info.Type == JSON && legacyJSONSchema(info.Data) {
		return nil
	}
	return fmt.Errorf("%w: %s schema is not a valid Avro definition: %v", ErrInvalidSchema, info.Type, err)
}

// parseAvro parses with a cache of its own: hamba/avro's default cache is
// process-wide, and would let a schema refer to types another defined.
func parseAvro(data []byte) (avro.Schema, error) {
	return avro.ParseBytesWithCache(data, "", &avro.SchemaCache{})
}

// legacyJSONSchema reports whether data is a JSON object with a "type",
// the shape of the Jackson JSON Schema old Pulsar clients registered.
func legacyJSONSchema(data []byte) bool {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return false
	}
	_, ok := obj["type"]
	return ok
}

// protobufNativeData is Pulsar's ProtobufNativeSchemaData, the JSON a
// PROTOBUF_NATIVE schema's data holds.
type protobufNativeData struct {
	FileDescriptorSet      string `json:"fileDescriptorSet"` // base64 FileDescriptorSet
	RootMessageTypeName    string `json:"rootMessageTypeName"`
	RootFileDescriptorName string `json:"rootFileDescriptorName"`
}

// protobufNativeRoot resolves the root message a PROTOBUF_NATIVE schema
// names, as ProtobufNativeSchemaDataValidator does, and returns its full name.
func protobufNativeRoot(data []byte) (protoreflect.FullName, error) {
	var d protobufNativeData
	if err := json.Unmarshal(data, &d); err != nil {
		return "", fmt.Errorf("%w: PROTOBUF_NATIVE schema data is not ProtobufNativeSchemaData JSON: %v", ErrInvalidSchema, err)
	}
	raw, err := base64.StdEncoding.DecodeString(d.FileDescriptorSet)
	if err != nil {
		return "", fmt.Errorf("%w: PROTOBUF_NATIVE fileDescriptorSet is not base64: %v", ErrInvalidSchema, err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return "", fmt.Errorf("%w: PROTOBUF_NATIVE fileDescriptorSet: %v", ErrInvalidSchema, err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return "", fmt.Errorf("%w: PROTOBUF_NATIVE fileDescriptorSet: %v", ErrInvalidSchema, err)
	}
	return protobufNativeMessage(files, d)
}

func protobufNativeMessage(files *protoregistry.Files, d protobufNativeData) (protoreflect.FullName, error) {
	if d.RootFileDescriptorName != "" {
		if _, err := files.FindFileByPath(d.RootFileDescriptorName); err != nil {
			return "", fmt.Errorf("%w: PROTOBUF_NATIVE root file %q: %v", ErrInvalidSchema, d.RootFileDescriptorName, err)
		}
	}
	desc, err := files.FindDescriptorByName(protoreflect.FullName(d.RootMessageTypeName))
	if err != nil {
		return "", fmt.Errorf("%w: PROTOBUF_NATIVE root message %q: %v", ErrInvalidSchema, d.RootMessageTypeName, err)
	}
	msg, ok := desc.(protoreflect.MessageDescriptor)
	if !ok {
		return "", fmt.Errorf("%w: PROTOBUF_NATIVE root %q is not a message", ErrInvalidSchema, d.RootMessageTypeName)
	}
	return msg.FullName(), nil
}

// sameSchema reports whether two schemas are the same for the registry's
// "already registered" lookup. Like Pulsar, it compares the type and the
// data (Avro-based data by its JSON content, not its spacing or key
// order) and not the properties; KEY_VALUE compares its parts so, with
// the parts' types, which live in the properties.
func sameSchema(a, b Info) bool {
	if a.Type != b.Type {
		return false
	}
	if a.Type == KeyValue {
		ak, av, errA := splitKeyValueInfo(a)
		bk, bv, errB := splitKeyValueInfo(b)
		if errA == nil && errB == nil {
			return sameSchema(ak, bk) && sameSchema(av, bv)
		}
	}
	if bytes.Equal(a.Data, b.Data) {
		return a.Type != KeyValue || (a.Properties[kvKeyType] == b.Properties[kvKeyType] &&
			a.Properties[kvValueType] == b.Properties[kvValueType])
	}
	if !a.Type.avroBased() {
		return false
	}
	na, errA := normalJSON(a.Data)
	nb, errB := normalJSON(b.Data)
	return errA == nil && errB == nil && bytes.Equal(na, nb)
}

// normalJSON re-encodes JSON with sorted keys and no spacing, keeping
// numbers exactly as written.
func normalJSON(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// clip shortens data for an error message.
func clip(b []byte) string {
	const n = 64
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
