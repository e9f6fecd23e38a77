package wire_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

const fuzzMaxFrame = 1 << 16

// FuzzParseFrame feeds arbitrary bytes to the decoder. It must never panic,
// never consume more than it was given, keep everything it returns inside
// the consumed bytes, and report need-more for every strict prefix of a
// frame it accepts. Whatever it accepts must survive re-encoding.
func FuzzParseFrame(f *testing.F) {
	f.Add(simpleFrame(f, flowCommand(1, 1000)))
	f.Add(refPayloadFrame(f, sendCommand(7, 42, 3), batchMetadata("p", 42, 3), []byte("payload")))
	f.Add(payloadFrame(f, messageCommand(1, 2, 3), &pb.BrokerEntryMetadata{Index: proto.Uint64(5)}, batchMetadata("p", 1, 1), []byte("x")))
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 1, 8})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		buf := data[:len(data):len(data)] // any read past len panics
		var cmd pb.BaseCommand
		fr, n, err := wire.ParseFrame(buf, fuzzMaxFrame, &cmd)
		if err != nil || n == 0 {
			if n != 0 {
				t.Fatalf("consumed %d with error %v", n, err)
			}
			return
		}
		if n > len(buf) {
			t.Fatalf("consumed %d of %d", n, len(buf))
		}
		if !within(fr.Entry.Bytes(), buf, n) || !within(fr.BrokerEntryMetadata, buf, n) {
			t.Fatal("returned bytes lie outside the consumed frame")
		}
		_ = fr.Entry.VerifyChecksum()
		_ = fr.Entry.DecodeMetadata(new(pb.MessageMetadata))
		if len(fr.Entry.Metadata())+len(fr.Entry.Payload())+10 != fr.Entry.Len() && fr.HasPayload() {
			t.Fatal("entry parts do not add up")
		}
		for _, cut := range []int{0, 3, 4, n / 2, n - 1} {
			if cut < n {
				if _, m, err := wire.ParseFrame(buf[:cut:cut], fuzzMaxFrame, &cmd); m != 0 || err != nil {
					t.Fatalf("prefix %d of a %d-byte frame: consumed %d, err %v", cut, n, m, err)
				}
			}
		}
		reencode(t, fr, buf[:n])
	})
}

// reencode rebuilds the frame from what was parsed (the protobuf encoding may
// differ, the entry may not) and checks it parses to the same thing.
func reencode(t *testing.T, fr wire.Frame, frame []byte) {
	var cmd pb.BaseCommand
	_, _, err := wire.ParseFrame(frame, fuzzMaxFrame, &cmd)
	must(t, err)
	var out []byte
	if fr.HasPayload() {
		var bem *pb.BrokerEntryMetadata
		if fr.BrokerEntryMetadata != nil {
			bem = new(pb.BrokerEntryMetadata)
			if proto.Unmarshal(fr.BrokerEntryMetadata, bem) != nil {
				return
			}
		}
		out, err = wire.AppendPayloadFrameHeader(nil, &cmd, bem, fr.Entry.Len())
		out = append(out, fr.Entry.Bytes()...)
	} else {
		out, err = wire.AppendSimpleFrame(nil, &cmd)
	}
	must(t, err)
	var again pb.BaseCommand
	fr2, n, err := wire.ParseFrame(out, 1<<30, &again)
	must(t, err)
	if n != len(out) || !proto.Equal(&cmd, &again) || !bytes.Equal(fr2.Entry.Bytes(), fr.Entry.Bytes()) {
		t.Fatalf("re-encoded frame parses differently")
	}
}

// FuzzRoundTrip encodes a SEND or MESSAGE frame from fuzzed fields and checks
// that decoding gives back the same command, entry bytes and metadata, also
// when the frame is followed by another and when it arrives split.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(7), uint64(42), int32(3), "producer", []byte("payload"), false, uint64(0), 10)
	f.Add(uint64(0), uint64(1<<63), int32(-1), "", []byte{}, true, uint64(1<<40), 0)
	f.Fuzz(func(t *testing.T, id, seq uint64, n int32, name string, payload []byte, withBEM bool, ts uint64, split int) {
		cmd := sendCommand(id, seq, n)
		var bem *pb.BrokerEntryMetadata
		if withBEM {
			cmd = messageCommand(id, seq, uint64(n))
			bem = &pb.BrokerEntryMetadata{BrokerTimestamp: &ts, Index: &seq}
		}
		md := batchMetadata(name, seq, n)
		frame := payloadFrame(t, cmd, bem, md, payload)
		buf := append(bytes.Clone(frame), simpleFrame(t, flowCommand(id, uint32(n)))...)
		if split = split % len(frame); split < 0 {
			split = -split
		}
		var got pb.BaseCommand
		if _, c, err := wire.ParseFrame(buf[:split], 1<<30, &got); c != 0 || err != nil {
			t.Fatalf("split at %d: consumed %d, err %v", split, c, err)
		}
		fr, c, err := wire.ParseFrame(buf, 1<<30, &got)
		must(t, err)
		if c != len(frame) || !proto.Equal(&got, cmd) {
			t.Fatalf("consumed %d of %d; command %v, want %v", c, len(frame), &got, cmd)
		}
		must(t, fr.Entry.VerifyChecksum())
		var gotMD pb.MessageMetadata
		must(t, fr.Entry.DecodeMetadata(&gotMD))
		if !proto.Equal(&gotMD, md) || !bytes.Equal(fr.Entry.Payload(), payload) {
			t.Fatalf("metadata %v payload %q", &gotMD, fr.Entry.Payload())
		}
		if (fr.BrokerEntryMetadata != nil) != withBEM {
			t.Fatalf("broker entry metadata present: %v", fr.BrokerEntryMetadata != nil)
		}
	})
}
