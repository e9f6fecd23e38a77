package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/magnetar-io/magnetar/wire/pb"
	"google.golang.org/protobuf/proto"
)

// marshalOpts encodes everything we send. Required fields are checked (the
// default): a response missing one would make the client drop the
// connection, so we fail here, at the bug, instead.
var marshalOpts = proto.MarshalOptions{}

// AppendSimpleFrame appends [totalSize][commandSize][cmd] to dst. On error
// dst is returned unchanged.
func AppendSimpleFrame(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	start := len(dst)
	out, err := appendCommand(dst, cmd)
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-sizeLen))
	return out, nil
}

// AppendPayloadFrameHeader appends everything of a payload frame that goes in
// front of an entry of entryLen bytes:
//
//	[totalSize][commandSize][cmd] ([0x0e02][bemSize][bem])
//
// The caller sends the entry bytes right after it, unchanged, typically in the
// same vectored write. bem may be nil (most clients do not ask for it).
// On error dst is returned unchanged.
func AppendPayloadFrameHeader(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata, entryLen int) ([]byte, error) {
	start := len(dst)
	out, err := appendCommand(dst, cmd)
	if err != nil {
		return dst[:start], err
	}
	if bem != nil {
		if out, err = appendBrokerEntryMetadata(out, bem); err != nil {
			return dst[:start], err
		}
	}
	total := uint64(len(out)-start-sizeLen) + uint64(entryLen)
	if entryLen < 0 || total > math.MaxUint32 {
		return dst[:start], fmt.Errorf("wire: payload frame header: entry of %d bytes does not fit a frame", entryLen)
	}
	binary.BigEndian.PutUint32(out[start:], uint32(total))
	return out, nil
}

// AppendEntry appends an entry built from md and payload, as a producer
// writes it: [0x0e01][CRC32C][metadataSize][md][payload]. It serves tests,
// tools and entries the broker originates (markers); a client's entry the
// broker must re-encode goes through Entry.WithMetadata.
func AppendEntry(dst []byte, md *pb.MessageMetadata, payload []byte) ([]byte, error) {
	start := len(dst)
	out, err := appendMetadataHead(dst, md)
	if err != nil {
		return dst[:start], err
	}
	out = append(out, payload...)
	crc := crc32.Checksum(out[start+magicLen+crcLen:], castagnoli)
	binary.BigEndian.PutUint32(out[start+magicLen:], crc)
	return out, nil
}

// appendMetadataHead appends an entry's head with md encoded in it:
// magic, a CRC32C left zero for the caller, metadataSize and md.
func appendMetadataHead(dst []byte, md *pb.MessageMetadata) ([]byte, error) {
	start := len(dst)
	out := binary.BigEndian.AppendUint16(dst, MagicChecksum)
	out = append(out, 0, 0, 0, 0, 0, 0, 0, 0) // CRC and metadataSize, filled below
	out, err := marshalOpts.MarshalAppend(out, md)
	if err != nil {
		return dst[:start], fmt.Errorf("wire: encode MessageMetadata: %w", err)
	}
	mdSize := len(out) - start - entryHeaderLen
	if mdSize == 0 {
		// An empty encoding cannot happen with required fields set, but a
		// zero metadataSize would be rejected by every reader.
		return dst[:start], fmt.Errorf("wire: encode MessageMetadata: empty encoding")
	}
	binary.BigEndian.PutUint32(out[start+magicLen+crcLen:], uint32(mdSize))
	return out, nil
}

// appendCommand appends [totalSize placeholder][commandSize][cmd]; the caller
// fills totalSize once it knows what follows.
func appendCommand(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	start := len(dst)
	out := append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	out, err := marshalOpts.MarshalAppend(out, cmd)
	if err != nil {
		return dst[:start], fmt.Errorf("wire: encode %v command: %w", cmd.GetType(), err)
	}
	cmdSize := len(out) - start - headerLen
	if cmdSize == 0 || uint64(cmdSize) > math.MaxUint32-sizeLen {
		return dst[:start], fmt.Errorf("wire: encode %v command: size %d out of range", cmd.GetType(), cmdSize)
	}
	binary.BigEndian.PutUint32(out[start+sizeLen:], uint32(cmdSize))
	return out, nil
}

func appendBrokerEntryMetadata(dst []byte, bem *pb.BrokerEntryMetadata) ([]byte, error) {
	start := len(dst)
	out := binary.BigEndian.AppendUint16(dst, MagicBrokerEntryMetadata)
	out = append(out, 0, 0, 0, 0)
	out, err := marshalOpts.MarshalAppend(out, bem)
	if err != nil {
		return dst[:start], fmt.Errorf("wire: encode BrokerEntryMetadata: %w", err)
	}
	binary.BigEndian.PutUint32(out[start+magicLen:], uint32(len(out)-start-bemHeaderLen))
	return out, nil
}
