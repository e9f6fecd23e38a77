package schema

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire/pb"
)

func TestPBRoundTrip(t *testing.T) {
	info := Info{Type: KeyValue, Data: JoinKeyValue(nil, []byte(userV1)),
		Properties: map[string]string{"z": "1", "a": "2", kvValueType: "AVRO"}}
	s := info.ToPB("t/ns/orders")
	if s.GetName() != "t/ns/orders" || s.GetType() != pb.Schema_KeyValue || !bytes.Equal(s.GetSchemaData(), info.Data) {
		t.Fatalf("ToPB = %v", s)
	}
	if keys := []string{s.Properties[0].GetKey(), s.Properties[1].GetKey()}; keys[0] != "a" || keys[1] != "value.schema.type" {
		t.Fatalf("properties not sorted: %v", keys)
	}
	// Through the wire encoding and back.
	b, err := proto.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back pb.Schema
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got := InfoFromPB(&back)
	if got.Type != KeyValue || !bytes.Equal(got.Data, info.Data) || !mapsEqual(got.Properties, info.Properties) {
		t.Fatalf("InfoFromPB = %+v", got)
	}
	// Required fields stay present for an empty primitive schema.
	if _, err := proto.Marshal(Info{Type: String}.ToPB("x")); err != nil {
		t.Fatalf("empty STRING schema: %v", err)
	}
	if InfoFromPB(&pb.Schema{Type: pb.Schema_Type(-1).Enum()}).Type != None {
		t.Error("negative wire types other than AutoConsume read as None, as in Pulsar")
	}
}

func TestVersionBytes(t *testing.T) {
	if b := VersionBytes(258); !bytes.Equal(b, []byte{0, 0, 0, 0, 0, 0, 1, 2}) {
		t.Fatalf("VersionBytes(258) = %v", b)
	}
	if v, err := ParseVersionBytes(VersionBytes(1 << 40)); v != 1<<40 || err != nil {
		t.Fatalf("round trip = %d, %v", v, err)
	}
	if v, err := ParseVersionBytes(nil); v != -1 || err != nil {
		t.Fatalf("empty = %d, %v; want latest (-1)", v, err)
	}
	if _, err := ParseVersionBytes([]byte{1, 2}); err == nil {
		t.Fatal("short version accepted")
	}
}
