package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// Our encoders must produce exactly the bytes the client's layout gives.
func TestPayloadFrameMatchesClientLayout(t *testing.T) {
	cmd := sendCommand(7, 42, 3)
	md := batchMetadata("prod-1", 42, 3)
	payload := []byte("three messages worth of batch payload")
	want := refPayloadFrame(t, cmd, md, payload)
	if got := payloadFrame(t, cmd, nil, md, payload); !bytes.Equal(got, want) {
		t.Fatalf("frame differs from the client's layout:\n got %x\nwant %x", got, want)
	}
}

func TestParseSendFrame(t *testing.T) {
	md := batchMetadata("prod-1", 42, 3)
	payload := []byte("payload bytes")
	buf := refPayloadFrame(t, sendCommand(7, 42, 3), md, payload)
	var cmd pb.BaseCommand
	f, n, err := wire.ParseFrame(buf, testMaxFrame, &cmd)
	must(t, err)
	if n != len(buf) {
		t.Fatalf("consumed %d of %d", n, len(buf))
	}
	if f.Command.GetType() != pb.BaseCommand_SEND || f.Command.GetSend().GetSequenceId() != 42 {
		t.Fatalf("command %v", f.Command)
	}
	if !f.HasPayload() || f.BrokerEntryMetadata != nil {
		t.Fatalf("HasPayload %v, BrokerEntryMetadata %x", f.HasPayload(), f.BrokerEntryMetadata)
	}
	// The entry is the client's bytes from the magic on, aliased, not copied.
	entryStart := len(buf) - f.Entry.Len()
	if binary.BigEndian.Uint16(buf[entryStart:]) != wire.MagicChecksum || !within(f.Entry.Bytes(), buf, n) {
		t.Fatalf("entry does not start at the magic inside the buffer")
	}
	if &f.Entry.Bytes()[0] != &buf[entryStart] {
		t.Fatalf("entry was copied")
	}
	must(t, f.Entry.VerifyChecksum())
	if !bytes.Equal(f.Entry.Payload(), payload) {
		t.Fatalf("payload %q", f.Entry.Payload())
	}
	var got pb.MessageMetadata
	must(t, f.Entry.DecodeMetadata(&got))
	if !proto.Equal(&got, md) {
		t.Fatalf("metadata %v, want %v", &got, md)
	}
}

func TestMessageWithBrokerEntryMetadata(t *testing.T) {
	md := batchMetadata("p", 1, 1)
	entry, err := wire.AppendEntry(nil, md, []byte("x"))
	must(t, err)
	bem := &pb.BrokerEntryMetadata{BrokerTimestamp: proto.Uint64(123), Index: proto.Uint64(9)}
	hdr, err := wire.AppendPayloadFrameHeader(nil, messageCommand(3, 10, 20), bem, len(entry))
	must(t, err)
	buf := append(hdr, entry...)
	var cmd pb.BaseCommand
	f, n, err := wire.ParseFrame(buf, testMaxFrame, &cmd)
	must(t, err)
	if n != len(buf) || !bytes.Equal(f.Entry.Bytes(), entry) {
		t.Fatalf("consumed %d of %d; entry %x want %x", n, len(buf), f.Entry.Bytes(), entry)
	}
	var gotBEM pb.BrokerEntryMetadata
	must(t, proto.Unmarshal(f.BrokerEntryMetadata, &gotBEM))
	if !proto.Equal(&gotBEM, bem) {
		t.Fatalf("broker entry metadata %v", &gotBEM)
	}
}

func TestPartialFrameNeedsMoreWithoutAllocating(t *testing.T) {
	buf := append(simpleFrame(t, flowCommand(1, 1000)),
		refPayloadFrame(t, sendCommand(1, 2, 1), batchMetadata("p", 2, 1), []byte("abc"))...)
	var cmd pb.BaseCommand
	firstLen, err := wire.FrameLen(buf, testMaxFrame)
	must(t, err)
	for _, frame := range [][]byte{buf[:firstLen], buf[firstLen:]} {
		for cut := 0; cut < len(frame); cut++ {
			f, n, err := wire.ParseFrame(frame[:cut:cut], testMaxFrame, &cmd)
			if n != 0 || err != nil || f.Command != nil {
				t.Fatalf("prefix %d of %d: consumed %d, err %v", cut, len(frame), n, err)
			}
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		wire.ParseFrame(buf[firstLen:len(buf)-1], testMaxFrame, &cmd)
		wire.ParseFrame(buf[:firstLen-1], testMaxFrame, &cmd)
	})
	if allocs != 0 {
		t.Fatalf("need-more path allocates %v times", allocs)
	}
}

// The reused BaseCommand must not carry fields over from the previous frame.
func TestCommandReuseResets(t *testing.T) {
	buf := append(refPayloadFrame(t, sendCommand(1, 2, 1), batchMetadata("p", 2, 1), nil),
		simpleFrame(t, flowCommand(5, 10))...)
	var cmd pb.BaseCommand
	_, n, err := wire.ParseFrame(buf, testMaxFrame, &cmd)
	must(t, err)
	f, _, err := wire.ParseFrame(buf[n:], testMaxFrame, &cmd)
	must(t, err)
	if f.Command.Send != nil || f.HasPayload() || f.Command.GetFlow().GetMessagePermits() != 10 {
		t.Fatalf("second frame: %v, payload %v", f.Command, f.HasPayload())
	}
}

// Appending to a returned entry must never overwrite the next frame.
func TestEntryIsCapped(t *testing.T) {
	one := refPayloadFrame(t, sendCommand(1, 2, 1), batchMetadata("p", 2, 1), []byte("a"))
	buf := append(append([]byte{}, one...), one...)
	var cmd pb.BaseCommand
	f, n, err := wire.ParseFrame(buf, testMaxFrame, &cmd)
	must(t, err)
	_ = append(f.Entry.Bytes(), 0xff)
	_ = append(f.Entry.Metadata(), 0xff)
	if !bytes.Equal(buf[n:], one) {
		t.Fatal("appending to the entry overwrote the next frame")
	}
}

func TestChecksumMismatch(t *testing.T) {
	buf := refPayloadFrame(t, sendCommand(1, 2, 1), batchMetadata("p", 2, 1), []byte("payload"))
	buf[len(buf)-1] ^= 0x01
	var cmd pb.BaseCommand
	f, _, err := wire.ParseFrame(buf, testMaxFrame, &cmd)
	must(t, err) // the CRC is checked only on request
	err = f.Entry.VerifyChecksum()
	var ce *wire.ChecksumMismatchError
	if !errors.Is(err, wire.ErrChecksumMismatch) || !errors.As(err, &ce) {
		t.Fatalf("err %v", err)
	}
	if ce.Sent != f.Entry.Checksum() || ce.Computed != crc32c(f.Entry.Bytes()[6:]) || ce.Sent == ce.Computed {
		t.Fatalf("sums %#x / %#x", ce.Sent, ce.Computed)
	}
	if !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("message %q", err)
	}
}

func TestEncodeErrorsLeaveDstUnchanged(t *testing.T) {
	dst := []byte("keep")
	// CONNECTED without its required server_version would make the client
	// drop the connection: the encoder must refuse it.
	bad := &pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{}}
	out, err := wire.AppendSimpleFrame(dst, bad)
	if err == nil || string(out) != "keep" || !strings.Contains(err.Error(), "server_version") {
		t.Fatalf("out %q err %v", out, err)
	}
	out, err = wire.AppendPayloadFrameHeader(dst, messageCommand(1, 2, 3), nil, -1)
	if err == nil || string(out) != "keep" {
		t.Fatalf("negative entry length: out %q err %v", out, err)
	}
	out, err = wire.AppendEntry(dst, &pb.MessageMetadata{}, nil)
	if err == nil || string(out) != "keep" {
		t.Fatalf("metadata without required fields: out %q err %v", out, err)
	}
}
