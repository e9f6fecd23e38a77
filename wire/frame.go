package wire

import (
	"encoding/binary"

	"github.com/magnetar-io/magnetar/wire/pb"
	"google.golang.org/protobuf/proto"
)

// Protocol constants. Frozen: they are what every Pulsar client speaks.
const (
	// MagicChecksum opens an entry: [0x0e01][CRC32C][metadataSize]...
	MagicChecksum uint16 = 0x0e01
	// MagicBrokerEntryMetadata opens the optional broker entry metadata
	// section that precedes the entry in MESSAGE frames.
	MagicBrokerEntryMetadata uint16 = 0x0e02

	// DefaultMaxMessageSize is Pulsar's default limit on metadata + payload
	// of one entry (5 MiB); brokers advertise theirs in CONNECTED.
	DefaultMaxMessageSize = 5 << 20
	// FramePadding is the room clients allow above max_message_size for the
	// command and headers; a frame over max_message_size + FramePadding makes
	// the Go client close the connection, and makes ours do the same.
	FramePadding = 10 << 10
	// DefaultMaxFrameSize bounds totalSize for the default message size.
	DefaultMaxFrameSize = DefaultMaxMessageSize + FramePadding

	sizeLen  = 4 // every size field
	magicLen = 2
	crcLen   = 4
	// headerLen is totalSize + commandSize.
	headerLen = 2 * sizeLen
	// entryHeaderLen is magic + CRC + metadataSize, the fixed start of an entry.
	entryHeaderLen = magicLen + crcLen + sizeLen
	// bemHeaderLen is magic + size of the broker entry metadata section.
	bemHeaderLen = magicLen + sizeLen
)

// MaxEntrySize is the largest stored entry (broker entry metadata
// included) a broker with this maxMessageSize hands to storage; it refuses
// a SEND whose entry would be larger. A producer's frame is at most
// maxMessageSize + FramePadding, so the entry in it is smaller; only the
// broker entry metadata put in front can take it over. The storage limits
// are derived from this one, with room above it (bkproto.MaxFrameSize for
// the bookies' frames), so an entry the broker accepts always fits.
func MaxEntrySize(maxMessageSize int) int { return maxMessageSize + FramePadding }

// unmarshalOpts decodes commands and metadata. Required fields are enforced
// (the default), matching the clients, so a command missing one is rejected
// here rather than read as zero by a handler. Unknown fields from newer
// clients are dropped: the broker never re-encodes what it parsed. The
// recursion limit bounds nesting far above the protocol's real depth (4).
var unmarshalOpts = proto.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: 64}

// Frame is one parsed frame. Command is the caller's BaseCommand passed to
// ParseFrame; BrokerEntryMetadata and Entry alias the caller's buffer and are
// valid only as long as it is: copy them (the storage write does) before the
// buffer is reused.
type Frame struct {
	Command *pb.BaseCommand
	// BrokerEntryMetadata holds the encoded BrokerEntryMetadata when the
	// frame had a 0x0e02 section, else nil. Producers never send one.
	BrokerEntryMetadata []byte
	// Entry is the payload part from the 0x0e01 magic to the end of the
	// frame; zero for a simple frame.
	Entry Entry
}

// HasPayload reports whether the frame was a payload frame.
func (f Frame) HasPayload() bool { return f.Entry.raw != nil }

// FrameLen returns the number of bytes the first frame in buf occupies, or 0
// when buf does not yet hold its 4-byte totalSize. It rejects a totalSize
// above maxFrameSize (or below the smallest possible frame) at once, so the
// caller never waits for, or buffers, an impossible frame.
func FrameLen(buf []byte, maxFrameSize int) (int, error) {
	if len(buf) < sizeLen {
		return 0, nil
	}
	total := binary.BigEndian.Uint32(buf)
	if uint64(total) > uint64(maxFrameSize) {
		return 0, &FrameTooLargeError{Size: total, Max: maxFrameSize}
	}
	if total < sizeLen+1 {
		return 0, malformed("totalSize %d is below the minimum of %d (commandSize + a command)", total, sizeLen+1)
	}
	return sizeLen + int(total), nil
}

// ParseFrame parses the first frame in buf into cmd, which it resets first so
// one BaseCommand can be reused for every frame of a connection. It returns
// the frame and the number of bytes it took from buf. When buf holds only part
// of a frame it returns consumed == 0 and a nil error without allocating: read
// more and call again with the same bytes at the front. maxFrameSize bounds
// totalSize, as the clients do (max_message_size + FramePadding).
func ParseFrame(buf []byte, maxFrameSize int, cmd *pb.BaseCommand) (f Frame, consumed int, err error) {
	n, err := FrameLen(buf, maxFrameSize)
	if err != nil || n == 0 || len(buf) < n {
		return Frame{}, 0, err
	}
	// Cap the frame so nothing derived from it can reach the next frame.
	frame := buf[sizeLen:n:n]
	cmdSize := binary.BigEndian.Uint32(frame)
	if cmdSize == 0 {
		return Frame{}, 0, malformed("commandSize is 0")
	}
	if uint64(cmdSize) > uint64(len(frame)-sizeLen) {
		return Frame{}, 0, malformed("commandSize %d exceeds totalSize %d - 4", cmdSize, len(frame))
	}
	end := sizeLen + int(cmdSize)
	if err := decodeCommand(frame[sizeLen:end], cmd); err != nil {
		return Frame{}, 0, err
	}
	f = Frame{Command: cmd}
	if end < len(frame) {
		if f.BrokerEntryMetadata, f.Entry, err = parsePayload(frame[end:]); err != nil {
			return Frame{}, 0, err
		}
	}
	return f, n, nil
}

func decodeCommand(b []byte, cmd *pb.BaseCommand) error {
	proto.Reset(cmd)
	if err := unmarshalOpts.Unmarshal(b, cmd); err != nil {
		return malformedCause(err, "BaseCommand of %d bytes", len(b))
	}
	return checkCommand(cmd)
}

// parsePayload splits what follows the command into the optional broker
// entry metadata and the entry.
func parsePayload(b []byte) (bem []byte, e Entry, err error) {
	if len(b) >= magicLen && binary.BigEndian.Uint16(b) == MagicBrokerEntryMetadata {
		if len(b) < bemHeaderLen {
			return nil, Entry{}, malformed("broker entry metadata header needs %d bytes, %d left", bemHeaderLen, len(b))
		}
		size := binary.BigEndian.Uint32(b[magicLen:])
		if uint64(size) > uint64(len(b)-bemHeaderLen) {
			return nil, Entry{}, malformed("broker entry metadata size %d exceeds the %d bytes left", size, len(b)-bemHeaderLen)
		}
		end := bemHeaderLen + int(size)
		bem, b = b[bemHeaderLen:end:end], b[end:]
	}
	e, err = ParseEntry(b)
	return bem, e, err
}
