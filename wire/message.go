package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Hand-written encoders for the two commands that go out once per message
// or entry: MESSAGE (its header) and SEND_RECEIPT. They write the bytes the
// generated code writes for the same command (property tests keep them
// equal) without building the command: that costs several allocations per
// message. Every field number here is below 16, so each tag is one byte.

// MessageHeader is what a MESSAGE frame says about the entry that follows
// it: the fields the broker sets (BaseCommand.message, field 9).
type MessageHeader struct {
	ConsumerID      uint64
	LedgerID        uint64
	EntryID         uint64
	RedeliveryCount uint32
	AckSet          []int64 // a partly acknowledged batch's remaining messages, or nil
	// ConsumerEpoch is written when HasEpoch is set: the epoch of the
	// consumer the message went to (Exclusive and Failover; a client drops
	// messages of an epoch older than its own).
	ConsumerEpoch uint64
	HasEpoch      bool
}

// SendReceipt is a SEND_RECEIPT (BaseCommand.send_receipt, field 7).
type SendReceipt struct {
	ProducerID        uint64
	SequenceID        uint64
	HighestSequenceID uint64
	LedgerID          uint64
	EntryID           uint64
}

// Field numbers (wire/proto/pulsar_api.proto).
const (
	fieldBaseType               = 1 // BaseCommand.type
	fieldBaseSendReceipt        = 7 // BaseCommand.send_receipt
	fieldBaseMessage            = 9 // BaseCommand.message
	fieldMsgConsumerID          = 1 // CommandMessage.consumer_id
	fieldMsgMessageID           = 2 // CommandMessage.message_id
	fieldMsgRedelivery          = 3 // CommandMessage.redelivery_count
	fieldMsgAckSet              = 4 // CommandMessage.ack_set (repeated, unpacked)
	fieldMsgConsumerEpoch       = 5 // CommandMessage.consumer_epoch
	fieldReceiptProducerID      = 1 // CommandSendReceipt.producer_id
	fieldReceiptSequenceID      = 2 // CommandSendReceipt.sequence_id
	fieldReceiptMessageID       = 3 // CommandSendReceipt.message_id
	fieldReceiptHighestSequence = 4 // CommandSendReceipt.highest_sequence_id
	fieldIDLedger               = 1 // MessageIdData.ledgerId
	fieldIDEntry                = 2 // MessageIdData.entryId

	typeSendReceipt uint64 = 7 // BaseCommand.Type SEND_RECEIPT
	typeMessage     uint64 = 9 // BaseCommand.Type MESSAGE
)

// varintFieldLen is the encoded size of a varint field.
func varintFieldLen(v uint64) int { return 1 + protowire.SizeVarint(v) }

// bytesFieldLen is the encoded size of a length-delimited field of n bytes.
func bytesFieldLen(n int) int { return 1 + protowire.SizeBytes(n) }

// appendVarintField appends a varint field; the one-byte tag is written
// directly so that the call inlines (this runs per message).
func appendVarintField(dst []byte, field protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(append(dst, byte(field)<<3|byte(protowire.VarintType)), v)
}

// appendBytesHead appends the tag and length of a length-delimited field
// whose n bytes the caller appends next.
func appendBytesHead(dst []byte, field protowire.Number, n int) []byte {
	return protowire.AppendVarint(append(dst, byte(field)<<3|byte(protowire.BytesType)), uint64(n))
}

// messageIDLen and appendMessageID encode a MessageIdData of ledger and
// entry ids only.
func messageIDLen(ledgerID, entryID uint64) int {
	return varintFieldLen(ledgerID) + varintFieldLen(entryID)
}

func appendMessageID(dst []byte, field protowire.Number, ledgerID, entryID uint64) []byte {
	dst = appendBytesHead(dst, field, messageIDLen(ledgerID, entryID))
	dst = appendVarintField(dst, fieldIDLedger, ledgerID)
	return appendVarintField(dst, fieldIDEntry, entryID)
}

// commandLen is the size of a BaseCommand holding a type and one command
// of bodyLen bytes.
func commandLen(typ uint64, bodyLen int) int { return varintFieldLen(typ) + bytesFieldLen(bodyLen) }

// appendCommandHead appends [totalSize][commandSize] and the BaseCommand
// up to its command's body, which the caller appends next.
func appendCommandHead(dst []byte, total uint32, typ uint64, field protowire.Number, bodyLen int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, total)
	dst = binary.BigEndian.AppendUint32(dst, uint32(commandLen(typ, bodyLen)))
	dst = appendVarintField(dst, fieldBaseType, typ)
	return appendBytesHead(dst, field, bodyLen)
}

// AppendMessageFrameHeader appends the front of a MESSAGE frame for an
// entry of entryLen bytes: [totalSize][commandSize][BaseCommand], the
// bytes AppendPayloadFrameHeader writes for the same command. It
// allocates nothing beyond growing dst.
func AppendMessageFrameHeader(dst []byte, h MessageHeader, entryLen int) ([]byte, error) {
	msgLen := varintFieldLen(h.ConsumerID) + bytesFieldLen(messageIDLen(h.LedgerID, h.EntryID)) +
		varintFieldLen(uint64(h.RedeliveryCount))
	for _, w := range h.AckSet {
		msgLen += varintFieldLen(uint64(w))
	}
	if h.HasEpoch {
		msgLen += varintFieldLen(h.ConsumerEpoch)
	}
	total := uint64(sizeLen) + uint64(commandLen(typeMessage, msgLen)) + uint64(entryLen)
	if entryLen < 0 || total > math.MaxUint32 {
		return dst, fmt.Errorf("wire: MESSAGE frame header: entry of %d bytes does not fit a frame", entryLen)
	}
	dst = appendCommandHead(dst, uint32(total), typeMessage, fieldBaseMessage, msgLen)
	dst = appendVarintField(dst, fieldMsgConsumerID, h.ConsumerID)
	dst = appendMessageID(dst, fieldMsgMessageID, h.LedgerID, h.EntryID)
	dst = appendVarintField(dst, fieldMsgRedelivery, uint64(h.RedeliveryCount))
	for _, w := range h.AckSet {
		dst = appendVarintField(dst, fieldMsgAckSet, uint64(w))
	}
	if h.HasEpoch {
		dst = appendVarintField(dst, fieldMsgConsumerEpoch, h.ConsumerEpoch)
	}
	return dst, nil
}

// AppendSendReceiptFrame appends a whole SEND_RECEIPT frame, the bytes
// AppendSimpleFrame writes for the same command: one goes out for every
// entry stored.
func AppendSendReceiptFrame(dst []byte, r SendReceipt) []byte {
	rcptLen := varintFieldLen(r.ProducerID) + varintFieldLen(r.SequenceID) +
		bytesFieldLen(messageIDLen(r.LedgerID, r.EntryID)) + varintFieldLen(r.HighestSequenceID)
	total := uint32(sizeLen + commandLen(typeSendReceipt, rcptLen))
	dst = appendCommandHead(dst, total, typeSendReceipt, fieldBaseSendReceipt, rcptLen)
	dst = appendVarintField(dst, fieldReceiptProducerID, r.ProducerID)
	dst = appendVarintField(dst, fieldReceiptSequenceID, r.SequenceID)
	dst = appendMessageID(dst, fieldReceiptMessageID, r.LedgerID, r.EntryID)
	return appendVarintField(dst, fieldReceiptHighestSequence, r.HighestSequenceID)
}
