package schema

import (
	"errors"
	"strings"
	"testing"
)

// Avro record definitions of one record, User, as it evolves.
const (
	userV1         = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}`
	userAgeDefault = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`
	userAgeNoDef   = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}`
	userAgeLong    = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"long"}]}`
	userNameInt    = `{"type":"record","name":"User","fields":[{"name":"name","type":"int"}]}`
	personV1       = `{"type":"record","name":"Person","fields":[{"name":"name","type":"string"}]}`
	// userV1Spaced is userV1 with other spacing and key order.
	userV1Spaced = `{ "name": "User", "type": "record",
		"fields": [ { "type": "string", "name": "name" } ] }`
)

func avroInfo(def string) Info { return Info{Type: Avro, Data: []byte(def)} }

func TestAvroStrategies(t *testing.T) {
	// want holds the verdict per strategy, in the order of strategies.
	strategies := []Strategy{Backward, Forward, Full, AlwaysCompatible, AlwaysIncompatible}
	cases := []struct {
		name     string
		from, to string
		want     []bool
	}{
		{"add field with default", userV1, userAgeDefault, []bool{true, true, true, true, false}},
		{"add field without default", userV1, userAgeNoDef, []bool{false, true, false, true, false}},
		{"remove field without default", userAgeNoDef, userV1, []bool{true, false, false, true, false}},
		{"remove field with default", userAgeDefault, userV1, []bool{true, true, true, true, false}},
		{"change field type", userV1, userNameInt, []bool{false, false, false, true, false}},
		{"promote int to long", userAgeNoDef, userAgeLong, []bool{true, false, false, true, false}},
		{"rename record", userV1, personV1, []bool{false, false, false, true, false}},
		{"same schema respaced", userV1, userV1Spaced, []bool{true, true, true, true, true}},
	}
	for _, c := range cases {
		for i, s := range strategies {
			err := checkPair(avroInfo(c.from), avroInfo(c.to), s)
			if got := err == nil; got != c.want[i] {
				t.Errorf("%s with %s: compatible = %v, want %v (err %v)", c.name, s, got, c.want[i], err)
			}
			if err != nil && !errors.Is(err, ErrIncompatible) {
				t.Errorf("%s with %s: error %v does not wrap ErrIncompatible", c.name, s, err)
			}
		}
	}
}

func TestIncompatibleReasonNamesTheProblem(t *testing.T) {
	err := checkPair(avroInfo(userV1), avroInfo(userAgeNoDef), Backward)
	if err == nil || !strings.Contains(err.Error(), "age") || !strings.Contains(err.Error(), "no default") {
		t.Fatalf("reason should name the field without default: %v", err)
	}
	err = checkPair(avroInfo(userV1), Info{Type: String}, Full)
	if err == nil || !strings.Contains(err.Error(), "AVRO") || !strings.Contains(err.Error(), "STRING") {
		t.Fatalf("reason should name both types: %v", err)
	}
}

func TestTypeChange(t *testing.T) {
	for _, s := range []Strategy{Backward, Forward, Full, BackwardTransitive, AlwaysIncompatible} {
		if err := checkPair(Info{Type: String}, Info{Type: Int32}, s); !errors.Is(err, ErrIncompatible) {
			t.Errorf("%s: STRING -> INT32 = %v, want incompatible", s, err)
		}
	}
	if err := checkPair(Info{Type: String}, Info{Type: Int32}, AlwaysCompatible); err != nil {
		t.Errorf("ALWAYS_COMPATIBLE allows a type change: %v", err)
	}
}

func TestPrimitiveAndProtobufByTypeAlone(t *testing.T) {
	if err := checkPair(Info{Type: Int64}, Info{Type: Int64, Properties: map[string]string{"a": "b"}}, Full); err != nil {
		t.Errorf("same primitive type: %v", err)
	}
	// Pulsar's default checkers leave PROTOBUF to the type-only default.
	if err := checkPair(Info{Type: Protobuf, Data: []byte(userV1)}, Info{Type: Protobuf, Data: []byte(personV1)}, Full); err != nil {
		t.Errorf("PROTOBUF is checked by type alone: %v", err)
	}
}

func TestJSONIsCheckedAsAvro(t *testing.T) {
	from := Info{Type: JSON, Data: []byte(userV1)}
	if err := checkPair(from, Info{Type: JSON, Data: []byte(userAgeNoDef)}, Backward); !errors.Is(err, ErrIncompatible) {
		t.Errorf("JSON add field without default under BACKWARD = %v, want incompatible", err)
	}
	if err := checkPair(from, Info{Type: JSON, Data: []byte(userAgeDefault)}, Full); err != nil {
		t.Errorf("JSON add field with default under FULL: %v", err)
	}
}

func TestLegacyJSONSchema(t *testing.T) {
	legacy := func(id string) Info {
		return Info{Type: JSON, Data: []byte(`{"type":"object","id":"` + id + `","properties":{"a":{"type":"string"}}}`)}
	}
	if err := validate(legacy("urn:a")); err != nil {
		t.Fatalf("legacy Jackson JSON schema is valid: %v", err)
	}
	if err := checkPair(legacy("urn:a"), legacy("urn:b"), Full); !errors.Is(err, ErrIncompatible) {
		t.Errorf("legacy id change = %v, want incompatible", err)
	}
	if err := checkPair(legacy("urn:a"), Info{Type: JSON, Data: []byte(userV1)}, Full); err != nil {
		t.Errorf("legacy -> Avro definition is allowed: %v", err)
	}
	if err := checkPair(Info{Type: JSON, Data: []byte(userV1)}, legacy("urn:a"), Full); err != nil {
		t.Errorf("Avro definition -> legacy is allowed: %v", err)
	}
}

func TestTransitiveTargets(t *testing.T) {
	// v2 reads v1's data but not v0's: BACKWARD accepts, BACKWARD_TRANSITIVE refuses.
	live := []Version{
		{Info: avroInfo(userV1), Version: 0},
		{Info: avroInfo(userAgeDefault), Version: 1},
	}
	next := avroInfo(userAgeNoDef)
	if err := checkAgainst(producerTargets(live, Backward), next, Backward); err != nil {
		t.Errorf("BACKWARD checks only the latest: %v", err)
	}
	err := checkAgainst(producerTargets(live, BackwardTransitive), next, BackwardTransitive)
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "version 0") {
		t.Errorf("BACKWARD_TRANSITIVE = %v, want incompatible against version 0", err)
	}
	if got := producerTargets(live, AlwaysCompatible); len(got) != 0 {
		t.Errorf("ALWAYS_COMPATIBLE checks nothing, got %d targets", len(got))
	}
}

func TestConsumerCheck(t *testing.T) {
	live := []Version{{Info: avroInfo(userAgeNoDef), Version: 0}}
	// A consumer that knows only "name" reads data with name and age.
	if err := consumerCheck(live, avroInfo(userV1), Full); err != nil {
		t.Errorf("older consumer schema under FULL: %v", err)
	}
	email := avroInfo(`{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]}`)
	if err := consumerCheck(live, email, Forward); !errors.Is(err, ErrIncompatible) {
		t.Errorf("consumer needing a field producers do not write = %v, want incompatible", err)
	}
	if err := consumerCheck(nil, avroInfo(userV1), Full); !errors.Is(err, ErrNotFound) {
		t.Errorf("no schema = %v, want ErrNotFound", err)
	}
	if err := consumerCheck(live, Info{Type: AutoConsume}, Full); err != nil {
		t.Errorf("AUTO_CONSUME: %v", err)
	}
	if err := consumerCheck(live, Info{Type: String}, AlwaysCompatible); err != nil {
		t.Errorf("ALWAYS_COMPATIBLE: %v", err)
	}
}

func TestValidate(t *testing.T) {
	bad := []Info{
		{Type: Avro, Data: []byte(`{"type":"record","name":"X"}`)},
		{Type: Avro, Data: []byte(`not json`)},
		{Type: JSON, Data: []byte(`[1,2]`)},
		{Type: Int32, Data: []byte("x")},
		{Type: String, Data: []byte("x")},
		{Type: AutoConsume},
		{Type: Type(99)},
		{Type: String, Data: make([]byte, MaxDataSize+1)},
		{Type: KeyValue, Data: []byte{0, 0}},
		{Type: ProtobufNative, Data: []byte(`{}`)},
	}
	for _, info := range bad {
		if err := validate(info); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("validate(%s %q) = %v, want ErrInvalidSchema", info.Type, clip(info.Data), err)
		}
	}
	good := []Info{avroInfo(userV1), {Type: String}, {Type: String, Data: []byte("null")}, {Type: None}, {Type: Bytes}, {Type: Int8}}
	for _, info := range good {
		if err := validate(info); err != nil {
			t.Errorf("validate(%s %q) = %v", info.Type, clip(info.Data), err)
		}
	}
	err := validate(Info{Type: Avro, Data: []byte(`{"type":"record","name":"X"}`)})
	if !strings.Contains(err.Error(), "avro:") {
		t.Errorf("the parser's message is kept: %v", err)
	}
}

func TestSameSchema(t *testing.T) {
	if !sameSchema(avroInfo(userV1), avroInfo(userV1Spaced)) {
		t.Error("Avro definitions differing in spacing and key order are the same")
	}
	if sameSchema(avroInfo(userV1), Info{Type: JSON, Data: []byte(userV1)}) {
		t.Error("the type is part of the identity")
	}
	if !sameSchema(Info{Type: String, Properties: map[string]string{"a": "1"}}, Info{Type: String}) {
		t.Error("properties are not part of the identity (as in Pulsar)")
	}
	if sameSchema(avroInfo(userAgeDefault), avroInfo(userAgeNoDef)) {
		t.Error("a default is part of the identity")
	}
}

func TestStrategyNames(t *testing.T) {
	for s := Undefined; s <= FullTransitive; s++ {
		got, err := ParseStrategy(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStrategy(%q) = %v, %v", s.String(), got, err)
		}
	}
	if _, err := ParseStrategy("SIDEWAYS"); err == nil {
		t.Error("unknown strategy accepted")
	}
	for typ := range typeNames {
		got, err := ParseType(typ.String())
		if err != nil || got != typ {
			t.Errorf("ParseType(%q) = %v, %v", typ.String(), got, err)
		}
	}
	if KeyValue.String() != "KEY_VALUE" || ProtobufNative != 20 || AutoConsume != -3 {
		t.Error("Pulsar's names and numbers")
	}
}

func TestParseID(t *testing.T) {
	cases := map[string]string{
		"persistent://t/ns/topic":                     "t/ns/topic",
		"non-persistent://t/ns/topic-partition-3":     "t/ns/topic",
		"t/ns/topic-partition-12":                     "t/ns/topic",
		"topic":                                       "public/default/topic",
		"persistent://t/ns/my-partition-x":            "t/ns/my-partition-x",
		"persistent://t/ns/a-partition-1-partition-2": "t/ns/a-partition-1",
	}
	for in, want := range cases {
		id, err := ParseID(in)
		if err != nil || id.String() != want {
			t.Errorf("ParseID(%q) = %q, %v; want %q", in, id, err, want)
		}
	}
	for _, bad := range []string{"", "a/b", "http://t/ns/x", "t/ns/..", "t//x", "t/ns/a/b"} {
		if _, err := ParseID(bad); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("ParseID(%q) = %v, want ErrInvalidTopic", bad, err)
		}
	}
}
