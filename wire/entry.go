package wire

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// castagnoli is the CRC32C table. crc32.MakeTable returns the package's own
// Castagnoli table, for which hash/crc32 uses the SSE4.2 / ARMv8 CRC
// instructions, so this is the hardware path. Read-only after init.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is a validated entry: the bytes from the 0x0e01 magic to the end of a
// payload frame, exactly as the producer wrote them.
//
//	[0x0e01][CRC32C][metadataSize][MessageMetadata][payload]
//
// Its framing (magic, metadataSize within bounds) has been checked; the CRC
// and the metadata contents have not, until VerifyChecksum and
// DecodeMetadata are called. An Entry aliases the bytes it was parsed from.
type Entry struct {
	raw []byte
}

// ParseEntry validates the framing of an entry, as received in a frame or
// read back from storage, without copying it.
func ParseEntry(b []byte) (Entry, error) {
	if len(b) < entryHeaderLen {
		return Entry{}, malformed("entry of %d bytes is shorter than its %d-byte header", len(b), entryHeaderLen)
	}
	if m := binary.BigEndian.Uint16(b); m != MagicChecksum {
		return Entry{}, malformed("entry starts with magic %#04x, want %#04x (checksum)", m, MagicChecksum)
	}
	size := binary.BigEndian.Uint32(b[magicLen+crcLen:])
	if size == 0 {
		return Entry{}, malformed("metadataSize is 0")
	}
	if uint64(size) > uint64(len(b)-entryHeaderLen) {
		return Entry{}, malformed("metadataSize %d exceeds the %d bytes left in the entry", size, len(b)-entryHeaderLen)
	}
	return Entry{raw: b[:len(b):len(b)]}, nil
}

// Bytes returns the whole entry, the bytes to store and to send back.
func (e Entry) Bytes() []byte { return e.raw }

// Len is len(e.Bytes()).
func (e Entry) Len() int { return len(e.raw) }

// Checksum returns the CRC32C the producer wrote.
func (e Entry) Checksum() uint32 {
	if e.raw == nil {
		return 0
	}
	return binary.BigEndian.Uint32(e.raw[magicLen:])
}

// ComputeChecksum computes the CRC32C of metadataSize, metadata and payload.
func (e Entry) ComputeChecksum() uint32 {
	if e.raw == nil {
		return 0
	}
	return crc32.Checksum(e.raw[magicLen+crcLen:], castagnoli)
}

// Sum returns the CRC32C of the whole entry (magic and checksum
// included), built from the producer's checksum, for storage to checksum
// the entry from without reading it again; unknown for an entry too small
// for that to pay (crc32c.Known.After). Call it only once VerifyChecksum
// passed.
func (e Entry) Sum() crc32c.Known {
	head := magicLen + crcLen
	return crc32c.Of(e.Checksum()).After(e.raw[:head], len(e.raw)-head)
}

// WithMetadata appends to dst the entry with md as its metadata and the
// same payload (the one copy of it), and returns the CRC32C of the whole
// new entry for storage (as Sum). The payload's checksum is taken out of
// the producer's, not read again: call it only once VerifyChecksum
// passed. The broker uses it to store a transactional message with its
// transaction id, which the Go client sends only in the SEND command.
func (e Entry) WithMetadata(dst []byte, md *pb.MessageMetadata) ([]byte, crc32c.Known, error) {
	start := len(dst)
	out, err := appendMetadataHead(dst, md)
	if err != nil {
		return dst[:start], crc32c.Known{}, err
	}
	payload := e.Payload()
	crc := e.withPayload(crc32c.Checksum(out[start+magicLen+crcLen:]))
	binary.BigEndian.PutUint32(out[start+magicLen:], crc)
	out = append(out, payload...)
	sum := crc32c.Of(crc).After(out[start:start+magicLen+crcLen], len(out)-start-magicLen-crcLen)
	return out, sum, nil
}

// AppendHeadWith appends to dst e's head with extra appended to its
// metadata — the head a re-encoding of the whole entry would have — for
// e's payload, which it does not append. The payload's
// checksum is taken out of the producer's where that is cheaper than
// reading the payload again (crc32c.CombineWorthFrom): call it only on an
// entry whose checksum was verified (a stored entry was, on receipt). The
// replicator re-frames every entry it forwards with it.
func (e Entry) AppendHeadWith(dst []byte, extra ...[]byte) []byte {
	start := len(dst)
	out := binary.BigEndian.AppendUint16(dst, MagicChecksum)
	out = append(out, 0, 0, 0, 0, 0, 0, 0, 0) // CRC and metadataSize, filled below
	out = append(out, e.Metadata()...)
	for _, part := range extra {
		out = append(out, part...)
	}
	binary.BigEndian.PutUint32(out[start+magicLen+crcLen:], uint32(len(out)-start-entryHeaderLen))
	crc := e.withPayload(crc32c.Checksum(out[start+magicLen+crcLen:]))
	binary.BigEndian.PutUint32(out[start+magicLen:], crc)
	return out
}

// withPayload returns the CRC32C of H‖payload from head = CRC32C(H): the
// payload's own checksum taken out of the producer's when that is cheaper
// than hashing it (crc32c.CombineWorthFrom), which is only right once the
// producer's checksum was verified.
func (e Entry) withPayload(head uint32) uint32 {
	payload := e.Payload()
	if len(payload) < crc32c.CombineWorthFrom {
		return crc32c.Update(head, payload)
	}
	oldHead := crc32c.Checksum(e.raw[magicLen+crcLen : e.metadataEnd()])
	return crc32c.Combine(head, crc32c.Uncombine(e.Checksum(), oldHead, len(payload)), len(payload))
}

// VerifyChecksum reports a *ChecksumMismatchError when the entry's CRC does
// not match its contents.
func (e Entry) VerifyChecksum() error {
	sent, computed := e.Checksum(), e.ComputeChecksum()
	if sent != computed {
		return &ChecksumMismatchError{Sent: sent, Computed: computed}
	}
	return nil
}

// Metadata returns the encoded MessageMetadata.
func (e Entry) Metadata() []byte {
	if e.raw == nil {
		return nil
	}
	return e.raw[entryHeaderLen:e.metadataEnd():e.metadataEnd()]
}

// Payload returns what follows the metadata: the (possibly compressed,
// possibly batched) message bytes.
func (e Entry) Payload() []byte {
	if e.raw == nil {
		return nil
	}
	return e.raw[e.metadataEnd():]
}

func (e Entry) metadataEnd() int {
	return entryHeaderLen + int(binary.BigEndian.Uint32(e.raw[magicLen+crcLen:]))
}

// DecodeMetadata decodes the MessageMetadata into md, which it resets first.
// Required fields are enforced, as the consuming client will.
func (e Entry) DecodeMetadata(md *pb.MessageMetadata) error {
	md.Reset()
	if err := unmarshalOpts.Unmarshal(e.Metadata(), md); err != nil {
		return malformedCause(err, "MessageMetadata of %d bytes", len(e.Metadata()))
	}
	return nil
}
