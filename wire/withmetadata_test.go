package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// An entry re-encoded with new metadata (WithMetadata) is a valid entry:
// its checksum verifies, it decodes to the new metadata and the same
// payload, and the sum handed to storage is the CRC32C of its bytes. Small
// and large payloads (the checksum is hashed below CombineWorthFrom and
// taken out of the producer's above it), after bytes already in dst.
func TestWithMetadataKeepsAValidEntry(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e, md, payload := drawEntry(t)
		n := len(payload)
		with := proto.Clone(md).(*pb.MessageMetadata)
		with.TxnidMostBits, with.TxnidLeastBits = proto.Uint64(rapid.Uint64().Draw(t, "most")), proto.Uint64(rapid.Uint64().Draw(t, "least"))
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "prefix")
		out, sum, err := e.WithMetadata(bytes.Clone(prefix), with)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out[:len(prefix)], prefix) {
			t.Fatal("the bytes already in dst changed")
		}
		got, err := ParseEntry(out[len(prefix):])
		if err != nil {
			t.Fatal(err)
		}
		if err := got.VerifyChecksum(); err != nil {
			t.Fatalf("re-encoded entry: %v", err)
		}
		var gotMD pb.MessageMetadata
		if err := got.DecodeMetadata(&gotMD); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&gotMD, with) || !bytes.Equal(got.Payload(), payload) {
			t.Fatalf("decoded %v and %d payload bytes, want %v and %d", &gotMD, len(got.Payload()), with, len(payload))
		}
		if n >= crc32c.CombineWorthFrom && !sum.OK {
			t.Fatalf("no storage sum for a %d-byte payload", n)
		}
		if !sum.Matches(out[len(prefix):]) {
			t.Fatalf("storage sum %08x is not the entry's CRC32C", sum.CRC)
		}
	})
}

// AppendHeadWith appends the head a whole re-encoding would have — the
// entry's metadata and the extra parts, with the CRC32C hashed over
// metadataSize, them and the payload — whether it hashes the payload's
// checksum (small) or takes it out of the producer's (large), after bytes
// already in dst.
func TestAppendHeadWithMatchesHashing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e, _, payload := drawEntry(t)
		extra := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 30), 0, 3).Draw(t, "extra")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "prefix")
		got := e.AppendHeadWith(bytes.Clone(prefix), extra...)
		want := hashedHead(bytes.Clone(prefix), payload, append([][]byte{e.Metadata()}, extra...)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendHeadWith\n%x\nwant\n%x", got, want)
		}
	})
}

// drawEntry draws an entry with a payload of 0 to 3 x CombineWorthFrom
// bytes (its checksum hashed below that, combined above), returning it,
// its metadata and its payload.
func drawEntry(t *rapid.T) (Entry, *pb.MessageMetadata, []byte) {
	n := rapid.IntRange(0, 3*crc32c.CombineWorthFrom).Draw(t, "payload length")
	seed := rapid.Byte().Draw(t, "payload seed")
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i*7+n) ^ seed
	}
	md := &pb.MessageMetadata{ProducerName: proto.String(rapid.StringN(1, 20, -1).Draw(t, "producer")),
		SequenceId: proto.Uint64(rapid.Uint64().Draw(t, "seq")), PublishTime: proto.Uint64(rapid.Uint64().Draw(t, "time"))}
	raw, err := AppendEntry(nil, md, payload)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseEntry(raw)
	if err != nil {
		t.Fatal(err)
	}
	return e, md, payload
}

// hashedHead is an entry's head for payload with the metadata parts, its
// CRC32C hashed over everything it covers.
func hashedHead(dst, payload []byte, metadata ...[]byte) []byte {
	var md []byte
	for _, part := range metadata {
		md = append(md, part...)
	}
	covered := binary.BigEndian.AppendUint32(nil, uint32(len(md)))
	covered = append(append(covered, md...), payload...)
	out := binary.BigEndian.AppendUint16(dst, MagicChecksum)
	out = binary.BigEndian.AppendUint32(out, crc32c.Checksum(covered))
	return append(out, covered[:len(covered)-len(payload)]...)
}
