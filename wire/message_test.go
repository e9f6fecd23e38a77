package wire_test

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// The hand-written MESSAGE header is byte for byte what the generated
// command encodes to, for any ids, redelivery count and ack set.
func TestMessageFrameHeaderMatchesGenerated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := wire.MessageHeader{
			ConsumerID:      rapid.Uint64().Draw(t, "consumer"),
			LedgerID:        rapid.Uint64().Draw(t, "ledger"),
			EntryID:         rapid.Uint64().Draw(t, "entry"),
			RedeliveryCount: rapid.Uint32().Draw(t, "redelivery"),
			AckSet:          rapid.SliceOfN(rapid.Int64(), 0, 4).Draw(t, "ackSet"),
			HasEpoch:        rapid.Bool().Draw(t, "hasEpoch"),
			ConsumerEpoch:   rapid.Uint64().Draw(t, "epoch"),
		}
		if len(h.AckSet) == 0 {
			h.AckSet = nil
		}
		entryLen := rapid.IntRange(0, 1<<20).Draw(t, "entryLen")
		got, err := wire.AppendMessageFrameHeader(nil, h, entryLen)
		if err != nil {
			t.Fatal(err)
		}
		cmd := &pb.BaseCommand{Type: pb.BaseCommand_MESSAGE.Enum(), Message: &pb.CommandMessage{
			ConsumerId: &h.ConsumerID, MessageId: &pb.MessageIdData{LedgerId: &h.LedgerID, EntryId: &h.EntryID},
			RedeliveryCount: &h.RedeliveryCount, AckSet: h.AckSet}}
		if h.HasEpoch {
			cmd.Message.ConsumerEpoch = &h.ConsumerEpoch
		}
		want, err := wire.AppendPayloadFrameHeader(nil, cmd, nil, entryLen)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("hand-written %x\ngenerated   %x", got, want)
		}
	})
}

func TestMessageFrameHeaderRejectsOversizedEntry(t *testing.T) {
	dst := []byte("keep")
	out, err := wire.AppendMessageFrameHeader(dst, wire.MessageHeader{}, 1<<32)
	if err == nil || string(out) != "keep" {
		t.Fatalf("an entry past the frame limit: %v, dst %q", err, out)
	}
}

func BenchmarkAppendMessageFrameHeader(b *testing.B) {
	dst := make([]byte, 0, 64)
	h := wire.MessageHeader{ConsumerID: 3, LedgerID: 10}
	b.ReportAllocs()
	for b.Loop() {
		h.EntryID++
		var err error
		if dst, err = wire.AppendMessageFrameHeader(dst[:0], h, 1100); err != nil {
			b.Fatal(err)
		}
	}
}

// The hand-written SEND_RECEIPT is byte for byte the generated encoding.
func TestSendReceiptFrameMatchesGenerated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := wire.SendReceipt{
			ProducerID:        rapid.Uint64().Draw(t, "producer"),
			SequenceID:        rapid.Uint64().Draw(t, "sequence"),
			HighestSequenceID: rapid.Uint64().Draw(t, "highest"),
			LedgerID:          rapid.Uint64().Draw(t, "ledger"),
			EntryID:           rapid.Uint64().Draw(t, "entry"),
		}
		got := wire.AppendSendReceiptFrame(nil, r)
		want, err := wire.AppendSimpleFrame(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(),
			SendReceipt: &pb.CommandSendReceipt{ProducerId: &r.ProducerID, SequenceId: &r.SequenceID,
				MessageId:         &pb.MessageIdData{LedgerId: &r.LedgerID, EntryId: &r.EntryID},
				HighestSequenceId: &r.HighestSequenceID}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("hand-written %x\ngenerated   %x", got, want)
		}
	})
}
