package broker

// Topic compaction, the algorithm (Pulsar's two-phase compactor; our
// code). Behaviour:
//   - A message's key is its partition key; compaction keeps, per key, the
//     last message up to the compaction horizon. A message with an empty
//     or null value is a tombstone: its key is gone from the compacted
//     topic. Messages without a key are kept, as Pulsar leaves them alone.
//   - The input is the previous compacted ledger (what the last run kept)
//     followed by the topic's entries after the previous horizon, so each
//     run reads only what was added since, and a trimmed ledger's keys
//     survive in the compacted ledger.
//   - Phase one reads the input and notes each key's last message; phase
//     two reads it again and writes what survives to a new side ledger.
//     An entry whose messages all survive is written unchanged; a batch
//     that lost some is rewritten with the lost ones as compacted_out
//     placeholders (no payload), so batch indexes, and so message ids,
//     stay those the producer was given; an entry that lost all is left
//     out. Rewritten batches are stored uncompressed.
//   - Markers (replication, transactions) are for brokers: left out.
//
// # Compacted ledger entry (big-endian)
//
//	+----------------+---------------+---------------------------------+
//	| ledger id (8)  | entry id (8)  | stored entry (as the topic's)   |
//	+----------------+---------------+---------------------------------+
//
// The position is the entry's in the topic: a reader of the compacted
// view is given the messages with the ids they had, and acknowledges them
// on its cursor as any other.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// compactedRecordHead is the position in front of each compacted entry.
const compactedRecordHead = 16

// errCorruptCompacted: a compacted ledger entry shorter than its head.
var errCorruptCompacted = errors.New("compacted ledger entry is corrupt")

func encodeCompacted(e managedledger.Entry) []byte {
	out := make([]byte, compactedRecordHead, compactedRecordHead+len(e.Data))
	binary.BigEndian.PutUint64(out, uint64(e.Position.LedgerID))
	binary.BigEndian.PutUint64(out[8:], uint64(e.Position.EntryID))
	return append(out, e.Data...)
}

func decodeCompacted(b []byte) (managedledger.Entry, error) {
	if len(b) < compactedRecordHead {
		return managedledger.Entry{}, fmt.Errorf("%w: %d bytes", errCorruptCompacted, len(b))
	}
	pos := managedledger.Position{LedgerID: int64(binary.BigEndian.Uint64(b)), EntryID: int64(binary.BigEndian.Uint64(b[8:]))}
	return managedledger.Entry{Position: pos, Data: b[compactedRecordHead:]}, nil
}

// msgRef is one message of the input: an entry and a batch index.
type msgRef struct {
	pos   managedledger.Position
	index int32
}

// compactMessage is what compaction needs of one message.
type compactMessage struct {
	key       string
	hasKey    bool
	tombstone bool
	// placeholder: a compacted_out message of an earlier compaction
	// (already removed; a tombstone for phase one's order of keys).
	placeholder bool
}

// parsedEntry is an entry split into its messages; batch is nil for an
// entry of one message. unreadable entries (damaged, encrypted batches)
// keep messages nil and are kept whole.
type parsedEntry struct {
	prefix   []byte // broker entry metadata in front of the producer's bytes
	md       *pb.MessageMetadata
	marker   bool
	messages []compactMessage
	batch    []batchMessage // uncompressed single messages of a batch
}

// batchMessage is one message of a batch: its metadata and payload.
type batchMessage struct {
	meta    *pb.SingleMessageMetadata
	payload []byte
}

// parseForCompaction splits a stored entry into its messages.
func (b *Broker) parseForCompaction(ctx context.Context, data []byte) parsedEntry {
	_, e, err := wire.ParseStoredEntry(data)
	if err != nil {
		return parsedEntry{}
	}
	md := &pb.MessageMetadata{}
	if err := e.DecodeMetadata(md); err != nil {
		return parsedEntry{}
	}
	p := parsedEntry{prefix: data[:len(data)-e.Len()], md: md, marker: md.GetMarkerType() != 0}
	if p.marker || len(md.GetEncryptionKeys()) > 0 {
		return p // markers are dropped; encrypted entries cannot be read
	}
	if md.NumMessagesInBatch == nil {
		p.messages = []compactMessage{{key: md.GetPartitionKey(), hasKey: md.PartitionKey != nil,
			tombstone: md.GetNullValue() || len(e.Payload()) == 0}}
		return p
	}
	payload, err := b.inflate.decompress(ctx, md.GetCompression(), e.Payload(), int(md.GetUncompressedSize()))
	if err != nil {
		return parsedEntry{prefix: p.prefix, md: md}
	}
	batch, err := splitBatch(payload, int(md.GetNumMessagesInBatch()))
	if err != nil {
		return parsedEntry{prefix: p.prefix, md: md}
	}
	p.batch = batch
	for _, m := range batch {
		p.messages = append(p.messages, compactMessage{key: m.meta.GetPartitionKey(), hasKey: m.meta.PartitionKey != nil,
			tombstone: m.meta.GetNullValue() || len(m.payload) == 0 || m.meta.GetCompactedOut(), placeholder: m.meta.GetCompactedOut()})
	}
	return p
}

// maxBatchMessages bounds a batch's message count read from a client's
// metadata before allocating for it.
const maxBatchMessages = 1 << 20

// splitBatch reads a batch payload: n times [size][SingleMessageMetadata][payload].
func splitBatch(payload []byte, n int) ([]batchMessage, error) {
	if n < 0 || n > maxBatchMessages {
		return nil, fmt.Errorf("batch of %d messages", n)
	}
	out := make([]batchMessage, 0, min(n, len(payload)/4+1))
	for i := range n {
		if len(payload) < 4 {
			return nil, fmt.Errorf("batch message %d: truncated", i)
		}
		size := int(binary.BigEndian.Uint32(payload))
		if size > len(payload)-4 {
			return nil, fmt.Errorf("batch message %d: metadata of %d bytes past the payload", i, size)
		}
		meta := &pb.SingleMessageMetadata{}
		if err := proto.Unmarshal(payload[4:4+size], meta); err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		payload = payload[4+size:]
		ps := int(meta.GetPayloadSize())
		if ps < 0 || ps > len(payload) {
			return nil, fmt.Errorf("batch message %d: payload of %d bytes past the batch", i, ps)
		}
		out = append(out, batchMessage{meta: meta, payload: payload[:ps]})
		payload = payload[ps:]
	}
	return out, nil
}

// compactedEntry is what phase two writes for an entry: the entry itself,
// a rewritten batch, or nothing (ok false).
func compactedEntry(e managedledger.Entry, p parsedEntry, keep func(int) bool) (managedledger.Entry, bool, error) {
	if p.marker {
		return e, false, nil
	}
	kept := 0
	for i := range p.messages {
		if keep(i) {
			kept++
		}
	}
	switch {
	case p.messages == nil: // unreadable: kept as it is
		return e, true, nil
	case kept == len(p.messages):
		return e, true, nil
	case kept == 0:
		return e, false, nil
	}
	data, err := rebatch(p, keep)
	if err != nil {
		return e, false, fmt.Errorf("rewrite batch %v: %w", e.Position, err)
	}
	return managedledger.Entry{Position: e.Position, Data: data}, true, nil
}

// rebatch writes a batch again with the messages keep refuses as
// compacted_out placeholders, uncompressed.
func rebatch(p parsedEntry, keep func(int) bool) ([]byte, error) {
	var payload []byte
	for i, m := range p.batch {
		meta, body := m.meta, m.payload
		if !keep(i) {
			meta = &pb.SingleMessageMetadata{PartitionKey: m.meta.PartitionKey, PayloadSize: proto.Int32(0), CompactedOut: proto.Bool(true)}
			body = nil
		}
		mb, err := proto.Marshal(meta)
		if err != nil {
			return nil, err
		}
		payload = binary.BigEndian.AppendUint32(payload, uint32(len(mb)))
		payload = append(append(payload, mb...), body...)
	}
	md := proto.Clone(p.md).(*pb.MessageMetadata)
	md.Compression, md.UncompressedSize = nil, proto.Uint32(uint32(len(payload)))
	out := append([]byte(nil), p.prefix...)
	return wire.AppendEntry(out, md, payload)
}
