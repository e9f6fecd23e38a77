package wire_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// frameBytes assembles a frame from raw parts: totalSize is computed unless
// overridden, commandSize is len(cmd) unless overridden.
type frameBytes struct {
	total, cmdSize *uint32
	cmd            []byte
	rest           []byte // whatever follows the command
}

func (fb frameBytes) build() []byte {
	total := uint32(4 + len(fb.cmd) + len(fb.rest))
	if fb.total != nil {
		total = *fb.total
	}
	cmdSize := uint32(len(fb.cmd))
	if fb.cmdSize != nil {
		cmdSize = *fb.cmdSize
	}
	b := binary.BigEndian.AppendUint32(nil, total)
	b = binary.BigEndian.AppendUint32(b, cmdSize)
	return append(append(b, fb.cmd...), fb.rest...)
}

func u32(v uint32) *uint32 { return &v }

func entryBytes(magic uint16, crc, mdSize uint32, tail []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, magic)
	b = binary.BigEndian.AppendUint32(b, crc)
	b = binary.BigEndian.AppendUint32(b, mdSize)
	return append(b, tail...)
}

func TestMalformedFrames(t *testing.T) {
	send, err := proto.Marshal(sendCommand(1, 2, 1))
	must(t, err)
	md, err := proto.Marshal(batchMetadata("p", 2, 1))
	must(t, err)
	goodEntry := entryBytes(0x0e01, 0, uint32(len(md)), append(md, "payload"...))
	noType, err := proto.MarshalOptions{AllowPartial: true}.Marshal(&pb.BaseCommand{Send: &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(2)}})
	must(t, err)
	sendMissingSeq, err := proto.MarshalOptions{AllowPartial: true}.Marshal(&pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: proto.Uint64(1)}})
	must(t, err)
	bem := func(size uint32, body []byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, 0x0e02)
		return append(binary.BigEndian.AppendUint32(b, size), body...)
	}

	cases := []struct {
		name string
		buf  []byte
		want error
		text string // must appear in the error message
	}{
		{"totalSize zero", frameBytes{total: u32(0)}.build(), wire.ErrMalformedFrame, "totalSize 0"},
		{"totalSize only covers commandSize", binary.BigEndian.AppendUint32(nil, 4), wire.ErrMalformedFrame, "totalSize 4"},
		{"commandSize zero", frameBytes{cmdSize: u32(0), cmd: send}.build(), wire.ErrMalformedFrame, "commandSize is 0"},
		{"commandSize beyond totalSize", frameBytes{cmdSize: u32(uint32(len(send) + 1)), cmd: send}.build(), wire.ErrMalformedFrame, "exceeds totalSize"},
		{"commandSize huge", frameBytes{cmdSize: u32(0xffffffff), cmd: send}.build(), wire.ErrMalformedFrame, "commandSize 4294967295"},
		{"oversize frame", binary.BigEndian.AppendUint32(nil, testMaxFrame+1), wire.ErrFrameTooLarge, "exceeds limit"},
		{"oversize max uint32", binary.BigEndian.AppendUint32(nil, 0xffffffff), wire.ErrFrameTooLarge, "totalSize 4294967295"},
		{"command not protobuf", frameBytes{cmd: []byte{0xff, 0xff, 0xff}}.build(), wire.ErrMalformedFrame, "BaseCommand"},
		{"command without type", frameBytes{cmd: noType}.build(), wire.ErrMalformedFrame, "type"},
		{"command body missing required field", frameBytes{cmd: sendMissingSeq}.build(), wire.ErrMalformedFrame, "sequence_id"},
		{"payload shorter than magic", frameBytes{cmd: send, rest: []byte{0x0e}}.build(), wire.ErrMalformedFrame, "shorter than"},
		{"payload shorter than entry header", frameBytes{cmd: send, rest: []byte{0x0e, 0x01, 0, 0, 0, 0, 0}}.build(), wire.ErrMalformedFrame, "shorter than"},
		{"bad magic", frameBytes{cmd: send, rest: entryBytes(0x0e03, 0, uint32(len(md)), md)}.build(), wire.ErrMalformedFrame, "magic 0x0e03"},
		{"no magic, old un-checksummed layout", frameBytes{cmd: send, rest: append(binary.BigEndian.AppendUint32(nil, uint32(len(md))), md...)}.build(), wire.ErrMalformedFrame, "magic"},
		{"metadataSize zero", frameBytes{cmd: send, rest: entryBytes(0x0e01, 0, 0, md)}.build(), wire.ErrMalformedFrame, "metadataSize is 0"},
		{"metadataSize beyond frame", frameBytes{cmd: send, rest: entryBytes(0x0e01, 0, uint32(len(md)+1), md)}.build(), wire.ErrMalformedFrame, "metadataSize"},
		{"metadataSize huge", frameBytes{cmd: send, rest: entryBytes(0x0e01, 0, 0xffffffff, md)}.build(), wire.ErrMalformedFrame, "metadataSize 4294967295"},
		{"broker entry metadata header truncated", frameBytes{cmd: send, rest: []byte{0x0e, 0x02, 0, 0}}.build(), wire.ErrMalformedFrame, "broker entry metadata header"},
		{"broker entry metadata beyond frame", frameBytes{cmd: send, rest: bem(100, []byte{8, 1})}.build(), wire.ErrMalformedFrame, "broker entry metadata size 100"},
		{"broker entry metadata without entry", frameBytes{cmd: send, rest: bem(2, []byte{8, 1})}.build(), wire.ErrMalformedFrame, "entry of 0 bytes"},
		{"good frame for contrast", frameBytes{cmd: send, rest: goodEntry}.build(), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cmd pb.BaseCommand
			_, n, err := wire.ParseFrame(tc.buf, testMaxFrame, &cmd)
			if tc.want == nil {
				if err != nil || n != len(tc.buf) {
					t.Fatalf("consumed %d of %d, err %v", n, len(tc.buf), err)
				}
				return
			}
			if !errors.Is(err, tc.want) || n != 0 {
				t.Fatalf("err %v (consumed %d), want %v", err, n, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q does not say %q", err, tc.text)
			}
			for _, other := range []error{wire.ErrMalformedFrame, wire.ErrFrameTooLarge, wire.ErrChecksumMismatch} {
				if other != tc.want && errors.Is(err, other) {
					t.Fatalf("error %v also matches %v", err, other)
				}
			}
		})
	}
}

// An oversize frame is refused from its first four bytes, before the body.
func TestFrameTooLargeBeforeBody(t *testing.T) {
	buf := binary.BigEndian.AppendUint32(nil, 1000)
	_, _, err := wire.ParseFrame(buf, 999, new(pb.BaseCommand))
	var te *wire.FrameTooLargeError
	if !errors.As(err, &te) || te.Size != 1000 || te.Max != 999 {
		t.Fatalf("err %v", err)
	}
	if n, err := wire.FrameLen(buf, 1000); n != 1004 || err != nil {
		t.Fatalf("at the limit: FrameLen %d, %v", n, err)
	}
}

func TestMalformedCauseReachable(t *testing.T) {
	buf := frameBytes{cmd: []byte{0xff, 0xff, 0xff}}.build()
	_, _, err := wire.ParseFrame(buf, testMaxFrame, new(pb.BaseCommand))
	var me *wire.MalformedFrameError
	if !errors.As(err, &me) || me.Err == nil || me.What == "" {
		t.Fatalf("err %v", err)
	}
}

func TestParseEntryFromStorage(t *testing.T) {
	md := batchMetadata("p", 9, 4)
	stored, err := wire.AppendEntry(nil, md, []byte("batch"))
	must(t, err)
	e, err := wire.ParseEntry(stored)
	must(t, err)
	must(t, e.VerifyChecksum())
	if got := crc32c(stored[6:]); e.Checksum() != got || e.ComputeChecksum() != got {
		t.Fatalf("checksum %#x / %#x, independent %#x", e.Checksum(), e.ComputeChecksum(), got)
	}
	bad := append([]byte{}, stored...)
	bad[len(bad)-1] = 0xff // payload "batc\xff" still frames fine
	e, err = wire.ParseEntry(bad)
	must(t, err)
	if err := e.VerifyChecksum(); !errors.Is(err, wire.ErrChecksumMismatch) {
		t.Fatalf("err %v", err)
	}
	// Metadata that frames correctly but does not decode.
	junk := entryBytes(0x0e01, 0, 2, []byte{0xff, 0xff})
	e, err = wire.ParseEntry(junk)
	must(t, err)
	if err := e.DecodeMetadata(new(pb.MessageMetadata)); !errors.Is(err, wire.ErrMalformedFrame) || !strings.Contains(err.Error(), "MessageMetadata") {
		t.Fatalf("err %v", err)
	}
}
