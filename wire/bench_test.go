package wire_test

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// A SEND as the Go client writes it by default: a batch (here of 1) with a
// 1 KiB payload.
func benchSendFrame(b *testing.B) []byte {
	md := batchMetadata("standalone-0-17", 123456, 1)
	md.Properties = []*pb.KeyValue{{Key: proto.String("k"), Value: proto.String("v")}}
	return refPayloadFrame(b, sendCommand(1, 123456, 1), md, bytes.Repeat([]byte{'x'}, 1024))
}

func BenchmarkParseSend(b *testing.B) {
	frame := benchSendFrame(b)
	var cmd pb.BaseCommand
	var md pb.MessageMetadata
	run := func(b *testing.B, each func(wire.Frame)) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			f, _, err := wire.ParseFrame(frame, testMaxFrame, &cmd)
			if err != nil {
				b.Fatal(err)
			}
			each(f)
		}
	}
	b.Run("frame", func(b *testing.B) { run(b, func(wire.Frame) {}) })
	// No must() in the loops: t.Helper costs more than a CRC.
	b.Run("frame+crc", func(b *testing.B) {
		run(b, func(f wire.Frame) {
			if err := f.Entry.VerifyChecksum(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("frame+crc+metadata", func(b *testing.B) {
		run(b, func(f wire.Frame) {
			if err := errors.Join(f.Entry.VerifyChecksum(), f.Entry.DecodeMetadata(&md)); err != nil {
				b.Fatal(err)
			}
		})
	})
}

func BenchmarkParseSimple(b *testing.B) {
	ack := &pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{
		ConsumerId: proto.Uint64(3), AckType: pb.CommandAck_Individual.Enum(),
		MessageId: []*pb.MessageIdData{{LedgerId: proto.Uint64(10), EntryId: proto.Uint64(20)}},
	}}
	for _, c := range []struct {
		name string
		cmd  *pb.BaseCommand
	}{{"flow", flowCommand(3, 1000)}, {"ack", ack}} {
		frame := simpleFrame(b, c.cmd)
		b.Run(c.name, func(b *testing.B) {
			var cmd pb.BaseCommand
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := wire.ParseFrame(frame, testMaxFrame, &cmd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The encoders run on a command the caller keeps and updates in place (as a
// per-connection scratch command would be), appending to a reused buffer.
// The "build" variants construct the command for every frame instead, to
// show what the proto2 pointer fields cost.
func BenchmarkAppendMessageHeader(b *testing.B) {
	cmd := messageCommand(3, 10, 0)
	bem := &pb.BrokerEntryMetadata{BrokerTimestamp: proto.Uint64(1), Index: proto.Uint64(0)}
	dst := make([]byte, 0, 256)
	run := func(b *testing.B, bem *pb.BrokerEntryMetadata) {
		b.ReportAllocs()
		for b.Loop() {
			*cmd.Message.MessageId.EntryId++
			var err error
			if dst, err = wire.AppendPayloadFrameHeader(dst[:0], cmd, bem, 1100); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("reused", func(b *testing.B) { run(b, nil) })
	b.Run("reused+bem", func(b *testing.B) { run(b, bem) })
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		var entry uint64
		for b.Loop() {
			entry++
			var err error
			if dst, err = wire.AppendPayloadFrameHeader(dst[:0], messageCommand(3, 10, entry), nil, 1100); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAppendSimple(b *testing.B) {
	receipt := &pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
		ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(123456),
		MessageId: &pb.MessageIdData{LedgerId: proto.Uint64(10), EntryId: proto.Uint64(20)},
	}}
	ack := &pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{
		ConsumerId: proto.Uint64(3), AckType: pb.CommandAck_Individual.Enum(),
		MessageId: []*pb.MessageIdData{{LedgerId: proto.Uint64(10), EntryId: proto.Uint64(20)}},
	}}
	dst := make([]byte, 0, 256)
	for _, c := range []struct {
		name string
		cmd  *pb.BaseCommand
	}{{"send_receipt", receipt}, {"flow", flowCommand(3, 1000)}, {"ack", ack}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = wire.AppendSimpleFrame(dst[:0], c.cmd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("send_receipt/build", func(b *testing.B) {
		b.ReportAllocs()
		var seq uint64
		for b.Loop() {
			seq++
			cmd := &pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
				ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(seq),
				MessageId: &pb.MessageIdData{LedgerId: proto.Uint64(10), EntryId: proto.Uint64(seq)},
			}}
			var err error
			if dst, err = wire.AppendSimpleFrame(dst[:0], cmd); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkVerifyChecksum(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		entry, err := wire.AppendEntry(nil, batchMetadata("p", 1, 1), make([]byte, size))
		must(b, err)
		e, err := wire.ParseEntry(entry)
		must(b, err)
		b.Run(byteSize(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(entry)))
			for b.Loop() {
				if err := e.VerifyChecksum(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
