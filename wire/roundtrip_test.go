package wire_test

import (
	"bytes"
	"math/rand"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// sentFrame is what the generator encoded, to compare with what is parsed.
type sentFrame struct {
	cmd   *pb.BaseCommand
	bem   *pb.BrokerEntryMetadata // nil: none
	md    *pb.MessageMetadata     // nil: simple frame
	entry []byte
}

func randomFrame(t *testing.T, r *rand.Rand, dst []byte) ([]byte, sentFrame) {
	s := sentFrame{cmd: randomCommand(r)}
	if r.Intn(2) == 0 {
		out, err := wire.AppendSimpleFrame(dst, s.cmd)
		must(t, err)
		return out, s
	}
	s.md = randomMetadata(r)
	payload := make([]byte, r.Intn(300))
	r.Read(payload)
	var err error
	s.entry, err = wire.AppendEntry(nil, s.md, payload)
	must(t, err)
	if r.Intn(3) == 0 {
		s.bem = &pb.BrokerEntryMetadata{}
		randomFill(r, s.bem.ProtoReflect(), 0)
	}
	out, err := wire.AppendPayloadFrameHeader(dst, s.cmd, s.bem, len(s.entry))
	must(t, err)
	return append(out, s.entry...), s
}

// TestRoundTripStream encodes seeded random streams of frames, then decodes
// them as a connection would: from a buffer that grows by random-sized reads,
// parsing whatever whole frames it holds.
func TestRoundTripStream(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		var stream []byte
		var sent []sentFrame
		for range 50 {
			var s sentFrame
			stream, s = randomFrame(t, r, stream)
			sent = append(sent, s)
		}
		got := decodeInChunks(t, r, stream)
		if len(got) != len(sent) {
			t.Fatalf("seed %d: decoded %d frames, sent %d", seed, len(got), len(sent))
		}
		for i := range sent {
			checkFrame(t, seed, i, got[i], sent[i])
		}
	}
}

// decoded keeps copies, since a Frame is valid only until the next parse.
type decoded struct {
	cmd        *pb.BaseCommand
	bem, entry []byte
	hasPayload bool
}

func decodeInChunks(t *testing.T, r *rand.Rand, stream []byte) []decoded {
	var out []decoded
	var cmd pb.BaseCommand
	var buf []byte
	for len(stream) > 0 || len(buf) > 0 {
		k := min(len(stream), 1+r.Intn(200))
		buf, stream = append(buf, stream[:k]...), stream[k:]
		for {
			f, n, err := wire.ParseFrame(buf, testMaxFrame, &cmd)
			must(t, err)
			if n == 0 {
				break
			}
			out = append(out, decoded{
				cmd: proto.Clone(f.Command).(*pb.BaseCommand), hasPayload: f.HasPayload(),
				bem: bytes.Clone(f.BrokerEntryMetadata), entry: bytes.Clone(f.Entry.Bytes()),
			})
			must(t, f.Entry.VerifyChecksum())
			buf = buf[n:]
		}
		if len(stream) == 0 && len(buf) > 0 {
			t.Fatalf("%d bytes left over at the end of the stream", len(buf))
		}
	}
	return out
}

func checkFrame(t *testing.T, seed int64, i int, got decoded, want sentFrame) {
	t.Helper()
	if !proto.Equal(got.cmd, want.cmd) {
		t.Fatalf("seed %d frame %d: command\n got %v\nwant %v", seed, i, got.cmd, want.cmd)
	}
	if got.hasPayload != (want.md != nil) || !bytes.Equal(got.entry, want.entry) {
		t.Fatalf("seed %d frame %d: entry differs", seed, i)
	}
	if want.md == nil {
		return
	}
	e, err := wire.ParseEntry(got.entry)
	must(t, err)
	var md pb.MessageMetadata
	must(t, e.DecodeMetadata(&md))
	if !proto.Equal(&md, want.md) {
		t.Fatalf("seed %d frame %d: metadata\n got %v\nwant %v", seed, i, &md, want.md)
	}
	if (got.bem != nil) != (want.bem != nil) {
		t.Fatalf("seed %d frame %d: broker entry metadata present %v, want %v", seed, i, got.bem != nil, want.bem != nil)
	}
	if want.bem != nil {
		var bem pb.BrokerEntryMetadata
		must(t, proto.Unmarshal(got.bem, &bem))
		if !proto.Equal(&bem, want.bem) {
			t.Fatalf("seed %d frame %d: broker entry metadata %v, want %v", seed, i, &bem, want.bem)
		}
	}
}
