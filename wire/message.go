package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// MessageHeader is what a MESSAGE frame says about the entry that follows
// it: the fields the broker sets (BaseCommand.message, field 9).
type MessageHeader struct {
	ConsumerID      uint64
	LedgerID        uint64
	EntryID         uint64
	RedeliveryCount uint32
	AckSet          []int64 // a partly acknowledged batch's remaining messages, or nil
}

// Field numbers of the MESSAGE header (wire/proto/pulsar_api.proto).
const (
	fieldBaseType             = 1 // BaseCommand.type
	fieldBaseMessage          = 9 // BaseCommand.message
	fieldMsgConsumerID        = 1 // CommandMessage.consumer_id
	fieldMsgMessageID         = 2 // CommandMessage.message_id
	fieldMsgRedelivery        = 3 // CommandMessage.redelivery_count
	fieldMsgAckSet            = 4 // CommandMessage.ack_set (repeated, unpacked)
	fieldIDLedger             = 1 // MessageIdData.ledgerId
	fieldIDEntry              = 2 // MessageIdData.entryId
	typeMessage        uint64 = 9 // BaseCommand.Type MESSAGE
)

// AppendMessageFrameHeader appends the front of a MESSAGE frame for an
// entry of entryLen bytes: [totalSize][commandSize][BaseCommand], the
// bytes AppendPayloadFrameHeader writes for the same command (a test keeps
// the two equal), encoded by hand because it runs for every message
// dispatched: it allocates nothing beyond growing dst, where building the
// generated command costs several allocations per message.
func AppendMessageFrameHeader(dst []byte, h MessageHeader, entryLen int) ([]byte, error) {
	idLen := 1 + protowire.SizeVarint(h.LedgerID) + 1 + protowire.SizeVarint(h.EntryID)
	msgLen := 1 + protowire.SizeVarint(h.ConsumerID) + 1 + protowire.SizeBytes(idLen) +
		1 + protowire.SizeVarint(uint64(h.RedeliveryCount))
	for _, w := range h.AckSet {
		msgLen += 1 + protowire.SizeVarint(uint64(w))
	}
	cmdLen := 1 + protowire.SizeVarint(typeMessage) + 1 + protowire.SizeBytes(msgLen)
	total := uint64(sizeLen) + uint64(cmdLen) + uint64(entryLen)
	if entryLen < 0 || total > math.MaxUint32 {
		return dst, fmt.Errorf("wire: MESSAGE frame header: entry of %d bytes does not fit a frame", entryLen)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(total))
	dst = binary.BigEndian.AppendUint32(dst, uint32(cmdLen))
	dst = protowire.AppendTag(dst, fieldBaseType, protowire.VarintType)
	dst = protowire.AppendVarint(dst, typeMessage)
	dst = protowire.AppendTag(dst, fieldBaseMessage, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(msgLen))
	dst = protowire.AppendTag(dst, fieldMsgConsumerID, protowire.VarintType)
	dst = protowire.AppendVarint(dst, h.ConsumerID)
	dst = protowire.AppendTag(dst, fieldMsgMessageID, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(idLen))
	dst = protowire.AppendTag(dst, fieldIDLedger, protowire.VarintType)
	dst = protowire.AppendVarint(dst, h.LedgerID)
	dst = protowire.AppendTag(dst, fieldIDEntry, protowire.VarintType)
	dst = protowire.AppendVarint(dst, h.EntryID)
	dst = protowire.AppendTag(dst, fieldMsgRedelivery, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(h.RedeliveryCount))
	for _, w := range h.AckSet {
		dst = protowire.AppendTag(dst, fieldMsgAckSet, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(w))
	}
	return dst, nil
}

// SendReceipt is a SEND_RECEIPT (BaseCommand.send_receipt, field 7).
type SendReceipt struct {
	ProducerID        uint64
	SequenceID        uint64
	HighestSequenceID uint64
	LedgerID          uint64
	EntryID           uint64
}

// Field numbers of SEND_RECEIPT (wire/proto/pulsar_api.proto).
const (
	fieldBaseSendReceipt               = 7 // BaseCommand.send_receipt
	fieldReceiptProducerID             = 1
	fieldReceiptSequenceID             = 2
	fieldReceiptMessageID              = 3
	fieldReceiptHighestSequence        = 4
	typeSendReceipt             uint64 = 7 // BaseCommand.Type SEND_RECEIPT
)

// AppendSendReceiptFrame appends a whole SEND_RECEIPT frame, the bytes
// AppendSimpleFrame writes for the same command (a test keeps the two
// equal), encoded by hand: one goes out for every entry stored.
func AppendSendReceiptFrame(dst []byte, r SendReceipt) []byte {
	idLen := 1 + protowire.SizeVarint(r.LedgerID) + 1 + protowire.SizeVarint(r.EntryID)
	rcptLen := 1 + protowire.SizeVarint(r.ProducerID) + 1 + protowire.SizeVarint(r.SequenceID) +
		1 + protowire.SizeBytes(idLen) + 1 + protowire.SizeVarint(r.HighestSequenceID)
	cmdLen := 1 + protowire.SizeVarint(typeSendReceipt) + 1 + protowire.SizeBytes(rcptLen)
	dst = binary.BigEndian.AppendUint32(dst, uint32(sizeLen+cmdLen))
	dst = binary.BigEndian.AppendUint32(dst, uint32(cmdLen))
	dst = protowire.AppendTag(dst, fieldBaseType, protowire.VarintType)
	dst = protowire.AppendVarint(dst, typeSendReceipt)
	dst = protowire.AppendTag(dst, fieldBaseSendReceipt, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(rcptLen))
	dst = protowire.AppendTag(dst, fieldReceiptProducerID, protowire.VarintType)
	dst = protowire.AppendVarint(dst, r.ProducerID)
	dst = protowire.AppendTag(dst, fieldReceiptSequenceID, protowire.VarintType)
	dst = protowire.AppendVarint(dst, r.SequenceID)
	dst = protowire.AppendTag(dst, fieldReceiptMessageID, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(idLen))
	dst = protowire.AppendTag(dst, fieldIDLedger, protowire.VarintType)
	dst = protowire.AppendVarint(dst, r.LedgerID)
	dst = protowire.AppendTag(dst, fieldIDEntry, protowire.VarintType)
	dst = protowire.AppendVarint(dst, r.EntryID)
	dst = protowire.AppendTag(dst, fieldReceiptHighestSequence, protowire.VarintType)
	return protowire.AppendVarint(dst, r.HighestSequenceID)
}
