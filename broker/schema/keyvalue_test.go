package schema

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

func TestSplitJoinKeyValue(t *testing.T) {
	data := JoinKeyValue([]byte("k"), []byte("value"))
	want := []byte{0, 0, 0, 1, 'k', 0, 0, 0, 5, 'v', 'a', 'l', 'u', 'e'}
	if !bytes.Equal(data, want) {
		t.Fatalf("JoinKeyValue = %v, want %v", data, want)
	}
	k, v, err := SplitKeyValue(data)
	if err != nil || string(k) != "k" || string(v) != "value" {
		t.Fatalf("SplitKeyValue = %q, %q, %v", k, v, err)
	}
	// Java writes -1 for a missing part.
	k, v, err = SplitKeyValue([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 'v'})
	if err != nil || k != nil || string(v) != "v" {
		t.Fatalf("SplitKeyValue(-1 key) = %q, %q, %v", k, v, err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0}, {0, 0, 0, 9, 'k'}, {0, 0, 0, 0, 0, 0, 0, 0, 'x'}, {0x80, 0, 0, 0, 0, 0, 0, 0}} {
		if _, _, err := SplitKeyValue(bad); err == nil {
			t.Errorf("SplitKeyValue(%v) accepted", bad)
		}
	}
}

// FuzzSplitKeyValue: the splitter never panics, never reads past its
// input, and what it accepts survives a join and split unchanged.
func FuzzSplitKeyValue(f *testing.F) {
	f.Add(JoinKeyValue([]byte(userV1), nil))
	f.Add(JoinKeyValue(nil, []byte("v")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		k, v, err := SplitKeyValue(data)
		if err != nil {
			return
		}
		if len(k)+len(v)+8 != len(data) {
			t.Fatalf("split %d bytes into %d + %d + 8", len(data), len(k), len(v))
		}
		k2, v2, err := SplitKeyValue(JoinKeyValue(k, v))
		if err != nil || !bytes.Equal(k, k2) || !bytes.Equal(v, v2) {
			t.Fatalf("join/split changed the parts: %v", err)
		}
	})
}

// kvInfo is a KEY_VALUE schema as Pulsar clients build it.
func kvInfo(keyType Type, keyData []byte, valueType Type, valueData []byte) Info {
	return Info{Type: KeyValue, Data: JoinKeyValue(keyData, valueData), Properties: map[string]string{
		kvKeyName: "key", kvKeyType: keyType.String(), kvKeyProps: "{}",
		kvValueName: "value", kvValueType: valueType.String(), kvValueProps: `{"__alwaysAllowNull":"true"}`,
		"kv.encoding.type": "SEPARATED",
	}}
}

func TestKeyValueCompatibility(t *testing.T) {
	base := kvInfo(String, nil, Avro, []byte(userV1))
	if err := validate(base); err != nil {
		t.Fatalf("valid KEY_VALUE: %v", err)
	}
	key, value, err := splitKeyValueInfo(base)
	if err != nil || key.Type != String || value.Type != Avro || value.Properties["__alwaysAllowNull"] != "true" {
		t.Fatalf("splitKeyValueInfo = %+v, %+v, %v", key, value, err)
	}
	if err := checkPair(base, kvInfo(String, nil, Avro, []byte(userAgeDefault)), Full); err != nil {
		t.Errorf("value adds a field with default: %v", err)
	}
	err = checkPair(base, kvInfo(String, nil, Avro, []byte(userAgeNoDef)), Full)
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "value schema") {
		t.Errorf("value adds a field without default under FULL = %v, want incompatible value schema", err)
	}
	err = checkPair(base, kvInfo(Int32, nil, Avro, []byte(userV1)), Full)
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "key schema") {
		t.Errorf("key type change = %v, want incompatible key schema", err)
	}
	if !sameSchema(base, kvInfo(String, nil, Avro, []byte(userV1Spaced))) {
		t.Error("KEY_VALUE schemas whose Avro parts differ in spacing are the same")
	}
	if sameSchema(base, kvInfo(Int32, nil, Avro, []byte(userV1))) {
		t.Error("KEY_VALUE schemas with other part types are not the same")
	}
	bad := kvInfo(String, nil, Avro, []byte(`{"type":"record"}`))
	if err := validate(bad); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("invalid value schema = %v, want ErrInvalidSchema", err)
	}
}

func TestKeyValueAdminForm(t *testing.T) {
	info := kvInfo(String, nil, Avro, []byte(userV1))
	s, err := keyValueToAdmin(info)
	if err != nil {
		t.Fatal(err)
	}
	var form map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &form); err != nil || string(form["key"]) != `""` {
		t.Fatalf("admin form %s: %v", s, err)
	}
	data, err := keyValueFromAdmin(s)
	if err != nil || !bytes.Equal(data, info.Data) {
		t.Fatalf("keyValueFromAdmin(%s) = %q, %v; want %q", s, data, err, info.Data)
	}
	if _, err := keyValueFromAdmin("nope"); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("bad admin form = %v, want ErrInvalidSchema", err)
	}
}

// protobufNative builds PROTOBUF_NATIVE schema data for a file holding
// messages of the given names (each with the given fields, all strings).
func protobufNative(t *testing.T, root string, fields ...string) []byte {
	t.Helper()
	msg := &descriptorpb.DescriptorProto{Name: proto.String(root)}
	for i, f := range fields {
		msg.Field = append(msg.Field, &descriptorpb.FieldDescriptorProto{
			Name: proto.String(f), Number: proto.Int32(int32(i + 1)), JsonName: proto.String(f),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:  descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
		})
	}
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{{
		Name: proto.String("user.proto"), Package: proto.String("app"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{msg},
	}}}
	raw, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(protobufNativeData{FileDescriptorSet: base64.StdEncoding.EncodeToString(raw),
		RootMessageTypeName: "app." + root, RootFileDescriptorName: "user.proto"})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestProtobufNative(t *testing.T) {
	v1 := Info{Type: ProtobufNative, Data: protobufNative(t, "User", "name")}
	if err := validate(v1); err != nil {
		t.Fatalf("valid PROTOBUF_NATIVE: %v", err)
	}
	// Pulsar's default check looks at the root message name only.
	v2 := Info{Type: ProtobufNative, Data: protobufNative(t, "User", "name", "email")}
	for _, s := range []Strategy{Backward, Forward, Full, FullTransitive} {
		if err := checkPair(v1, v2, s); err != nil {
			t.Errorf("%s: same root, new field: %v", s, err)
		}
	}
	renamed := Info{Type: ProtobufNative, Data: protobufNative(t, "Person", "name")}
	if err := checkPair(v1, renamed, Backward); !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "app.Person") {
		t.Errorf("root message change = %v, want incompatible naming app.Person", err)
	}
	if err := checkPair(v1, v2, AlwaysIncompatible); !errors.Is(err, ErrIncompatible) {
		t.Errorf("ALWAYS_INCOMPATIBLE = %v", err)
	}
	var d protobufNativeData
	_ = json.Unmarshal(v1.Data, &d)
	d.RootMessageTypeName = "app.Missing"
	missing, _ := json.Marshal(d)
	if err := validate(Info{Type: ProtobufNative, Data: missing}); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("missing root message = %v, want ErrInvalidSchema", err)
	}
}
