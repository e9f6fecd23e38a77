package wire

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
)

// Stored entries. A broker that appends broker entry metadata
// (brokerEntryMetadataInterceptors) stores each entry with it in front,
// exactly as it goes after the command of a MESSAGE frame:
//
//	[0x0e02][bemSize][BrokerEntryMetadata][0x0e01][CRC32C][metadataSize][MessageMetadata][payload]
//
// so a consumer that asked for broker entry metadata is sent the stored
// bytes unchanged, and others the bytes after it (StripBrokerEntryMetadata).
// Without interceptors an entry is stored as the producer sent it.

// ParseStoredEntry splits a stored entry into its broker entry metadata
// (nil when it has none) and the producer's entry. Both alias b.
func ParseStoredEntry(b []byte) (bem []byte, e Entry, err error) {
	return parsePayload(b)
}

// StripBrokerEntryMetadata returns the part of a stored entry the
// producer wrote (b itself when it has no broker entry metadata). A
// malformed header is left for the reader of the entry to report.
func StripBrokerEntryMetadata(b []byte) []byte {
	if len(b) < bemHeaderLen || binary.BigEndian.Uint16(b) != MagicBrokerEntryMetadata {
		return b
	}
	end := uint64(bemHeaderLen) + uint64(binary.BigEndian.Uint32(b[magicLen:]))
	if end > uint64(len(b)) {
		return b
	}
	return b[end:]
}

// SkipChecksum returns an entry (broker entry metadata stripped) without
// its 0x0e01 magic and CRC32C, as clients older than protocol v11 are
// sent it: [metadataSize][metadata][payload]. An entry without the magic
// is returned unchanged.
func SkipChecksum(b []byte) []byte {
	if len(b) < magicLen+crcLen || binary.BigEndian.Uint16(b) != MagicChecksum {
		return b
	}
	return b[magicLen+crcLen:]
}

// BrokerEntryMetadataLen is the size of what AppendBrokerEntryMetadata
// appends for these values.
func BrokerEntryMetadataLen(brokerTimestamp uint64, withTimestamp bool, index int64, withIndex bool) int {
	n := bemHeaderLen
	if withTimestamp {
		n += 1 + protowire.SizeVarint(brokerTimestamp)
	}
	if withIndex {
		n += 1 + protowire.SizeVarint(uint64(index))
	}
	return n
}

// AppendBrokerEntryMetadata appends a 0x0e02 section carrying the
// BrokerEntryMetadata fields asked for (broker_timestamp = 1, index = 2),
// encoded by hand: it is on the publish path of every entry.
func AppendBrokerEntryMetadata(dst []byte, brokerTimestamp uint64, withTimestamp bool, index int64, withIndex bool) []byte {
	dst = binary.BigEndian.AppendUint16(dst, MagicBrokerEntryMetadata)
	sizeAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	if withTimestamp {
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, brokerTimestamp)
	}
	if withIndex {
		dst = protowire.AppendTag(dst, 2, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(index))
	}
	binary.BigEndian.PutUint32(dst[sizeAt:], uint32(len(dst)-sizeAt-4))
	return dst
}
