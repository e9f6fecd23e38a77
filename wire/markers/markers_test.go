package markers

import (
	"reflect"
	"testing"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

func TestRoundTrip(t *testing.T) {
	req := Request{SnapshotID: "s1", SourceCluster: "a"}
	if got, err := ParseRequest(req.Encode()); err != nil || got != req {
		t.Fatalf("request: %+v %v", got, err)
	}
	resp := Response{SnapshotID: "s1", Cluster: ClusterID{"b", MessageID{7, 1 << 40}}}
	if got, err := ParseResponse(resp.Encode()); err != nil || got != resp {
		t.Fatalf("response: %+v %v", got, err)
	}
	snap := SnapshotData{SnapshotID: "s1", Local: MessageID{3, 4},
		Clusters: []ClusterID{{"b", MessageID{5, 6}}, {"c", MessageID{^uint64(0), 0}}}}
	if got, err := ParseSnapshot(snap.Encode()); err != nil || !reflect.DeepEqual(got, snap) {
		t.Fatalf("snapshot: %+v %v", got, err)
	}
	up := UpdateData{Subscription: "sub", Clusters: snap.Clusters}
	if got, err := ParseUpdate(up.Encode()); err != nil || !reflect.DeepEqual(got, up) {
		t.Fatalf("update: %+v %v", got, err)
	}
}

// A marker entry parses as a stored entry with marker_type and
// replicate_to set and the payload intact.
func TestEntry(t *testing.T) {
	payload := Request{SnapshotID: "x", SourceCluster: "a"}.Encode()
	b, err := Entry(SnapshotRequest, payload, []string{"b"}, 42)
	if err != nil {
		t.Fatal(err)
	}
	e, err := wire.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.VerifyChecksum(); err != nil {
		t.Fatal(err)
	}
	var md pb.MessageMetadata
	if err := e.DecodeMetadata(&md); err != nil {
		t.Fatal(err)
	}
	if md.GetMarkerType() != int32(SnapshotRequest) || !reflect.DeepEqual(md.ReplicateTo, []string{"b"}) ||
		md.GetProducerName() != ProducerName || md.GetPublishTime() != 42 {
		t.Fatalf("metadata: %v", &md)
	}
	if r, err := ParseRequest(e.Payload()); err != nil || r.SnapshotID != "x" {
		t.Fatalf("payload: %+v %v", r, err)
	}
}

func TestMalformed(t *testing.T) {
	for _, b := range [][]byte{{0x0a}, {0x0a, 5, 'a'}, {0x12, 2, 0x08}} {
		if _, err := ParseSnapshot(b); err == nil {
			t.Errorf("%x: no error", b)
		}
	}
	if _, err := ParseRequest(nil); err == nil {
		t.Error("empty request accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(SnapshotData{SnapshotID: "s", Local: MessageID{1, 2}, Clusters: []ClusterID{{"b", MessageID{3, 4}}}}.Encode())
	f.Add(UpdateData{Subscription: "s", Clusters: []ClusterID{{"b", MessageID{3, 4}}}}.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := ParseSnapshot(b); err == nil {
			if _, err := ParseSnapshot(s.Encode()); err != nil {
				t.Fatalf("re-encoded snapshot does not parse: %v", err)
			}
		}
		_, _ = ParseRequest(b)
		_, _ = ParseResponse(b)
		_, _ = ParseUpdate(b)
	})
}
