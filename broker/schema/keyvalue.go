package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// A KEY_VALUE schema's data packs the key's and the value's schema data,
// as Pulsar's KeyValue.encode writes it:
//
//	+------------------+-----------+--------------------+-------------+
//	| key length int32 | key bytes | value length int32 | value bytes |
//	+------------------+-----------+--------------------+-------------+
//
// Lengths are big-endian; -1 stands for "no schema data" (Java's null).
// The parts' types, names and properties live in the KEY_VALUE schema's
// own properties, under the keys below (missing type means BYTES).
const (
	kvKeyName    = "key.schema.name"
	kvKeyType    = "key.schema.type"
	kvKeyProps   = "key.schema.properties"
	kvValueName  = "value.schema.name"
	kvValueType  = "value.schema.type"
	kvValueProps = "value.schema.properties"
)

// SplitKeyValue splits KEY_VALUE schema data into the key's and the
// value's schema data. Trailing bytes are an error: Pulsar never writes them.
func SplitKeyValue(data []byte) (key, value []byte, err error) {
	key, rest, err := kvPart(data, "key")
	if err != nil {
		return nil, nil, err
	}
	value, rest, err = kvPart(rest, "value")
	if err != nil {
		return nil, nil, err
	}
	if len(rest) != 0 {
		return nil, nil, fmt.Errorf("key/value schema data: %d bytes after the value schema", len(rest))
	}
	return key, value, nil
}

func kvPart(b []byte, what string) (part, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("key/value schema data: %d bytes left, need 4 for the %s length", len(b), what)
	}
	n := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	switch {
	case n == -1:
		return nil, b, nil
	case n < 0 || int64(n) > int64(len(b)):
		return nil, nil, fmt.Errorf("key/value schema data: %s length %d, %d bytes left", what, n, len(b))
	}
	return b[:n], b[n:], nil
}

// JoinKeyValue packs key and value schema data as SplitKeyValue reads it.
func JoinKeyValue(key, value []byte) []byte {
	out := make([]byte, 0, 8+len(key)+len(value))
	out = binary.BigEndian.AppendUint32(out, uint32(len(key)))
	out = append(out, key...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(value)))
	return append(out, value...)
}

// splitKeyValueInfo decodes a KEY_VALUE schema into its two parts, with
// the types and properties its own properties give them.
func splitKeyValueInfo(kv Info) (key, value Info, err error) {
	k, v, err := SplitKeyValue(kv.Data)
	if err != nil {
		return Info{}, Info{}, err
	}
	if key, err = kvSubInfo(kv.Properties, kvKeyType, kvKeyProps, k); err != nil {
		return Info{}, Info{}, err
	}
	if value, err = kvSubInfo(kv.Properties, kvValueType, kvValueProps, v); err != nil {
		return Info{}, Info{}, err
	}
	return key, value, nil
}

func kvSubInfo(props map[string]string, typeKey, propsKey string, data []byte) (Info, error) {
	info := Info{Type: Bytes, Data: data}
	if name, ok := props[typeKey]; ok && name != "" {
		t, err := ParseType(name)
		if err != nil {
			return Info{}, fmt.Errorf("key/value schema property %s: %w", typeKey, err)
		}
		info.Type = t
	}
	if s := props[propsKey]; s != "" {
		if err := json.Unmarshal([]byte(s), &info.Properties); err != nil {
			return Info{}, fmt.Errorf("key/value schema property %s: %w", propsKey, err)
		}
	}
	return info, nil
}

// kvAdminForm is how Pulsar's REST API shows KEY_VALUE schema data:
// {"key": <key schema JSON or "">, "value": <value schema JSON or "">},
// "" standing for a primitive part (SchemaUtils.convertKeyValueSchemaInfoDataToString).
type kvAdminForm struct {
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

// keyValueToAdmin renders stored KEY_VALUE data in the REST API's form.
func keyValueToAdmin(kv Info) (string, error) {
	key, value, err := splitKeyValueInfo(kv)
	if err != nil {
		return "", err
	}
	var f kvAdminForm
	if f.Key, err = kvAdminPart(key); err != nil {
		return "", err
	}
	if f.Value, err = kvAdminPart(value); err != nil {
		return "", err
	}
	b, err := json.Marshal(f)
	return string(b), err
}

func kvAdminPart(part Info) (json.RawMessage, error) {
	if part.Type.primitive() {
		return json.RawMessage(`""`), nil
	}
	if !json.Valid(part.Data) {
		return nil, fmt.Errorf("key/value %s part is not JSON", part.Type)
	}
	return json.RawMessage(part.Data), nil
}

// keyValueFromAdmin packs the REST API's KEY_VALUE form into schema data
// (SchemaUtils.convertKeyValueDataStringToSchemaInfoSchema).
func keyValueFromAdmin(s string) ([]byte, error) {
	var f kvAdminForm
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return nil, fmt.Errorf("%w: key/value schema must be {\"key\": ..., \"value\": ...}: %v", ErrInvalidSchema, err)
	}
	return JoinKeyValue(kvAdminPartData(f.Key), kvAdminPartData(f.Value)), nil
}

// kvAdminPartData: "" (or nothing) is a primitive part with no data;
// anything else is the part's JSON definition, compacted.
func kvAdminPartData(raw json.RawMessage) []byte {
	if len(raw) == 0 || bytes.Equal(raw, []byte(`""`)) || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return raw
	}
	return out.Bytes()
}
