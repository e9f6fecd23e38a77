package replclient

import (
	"testing"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// MarkReplicated keeps every original field and the payload, sets
// replicated_from, and leaves a valid checksum.
func TestMarkReplicated(t *testing.T) {
	name, seq, pub, key := "p-1", uint64(41), uint64(1_700_000_000_000), "k"
	md := &pb.MessageMetadata{ProducerName: &name, SequenceId: &seq, PublishTime: &pub, PartitionKey: &key,
		ReplicateTo: []string{"b"}, Properties: []*pb.KeyValue{{Key: ptr("x"), Value: ptr("y")}}}
	raw, err := wire.AppendEntry(nil, md, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := wire.ParseEntry(raw)
	if err != nil {
		t.Fatal(err)
	}
	out, err := wire.ParseEntry(MarkReplicated(e, "a").Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := out.VerifyChecksum(); err != nil {
		t.Fatal(err)
	}
	var got pb.MessageMetadata
	if err := out.DecodeMetadata(&got); err != nil {
		t.Fatal(err)
	}
	if got.GetReplicatedFrom() != "a" || got.GetProducerName() != name || got.GetSequenceId() != seq ||
		got.GetPublishTime() != pub || got.GetPartitionKey() != key || len(got.ReplicateTo) != 1 ||
		len(got.Properties) != 1 || string(out.Payload()) != "payload" {
		t.Fatalf("metadata %v payload %q", &got, out.Payload())
	}
	if ProducerName("a", "b") != "pulsar.repl.a-->b" {
		t.Fatal(ProducerName("a", "b"))
	}
}
