package wire_test

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

const testMaxFrame = wire.DefaultMaxFrameSize

func sendCommand(producerID, seq uint64, n int32) *pb.BaseCommand {
	return &pb.BaseCommand{
		Type: pb.BaseCommand_SEND.Enum(),
		Send: &pb.CommandSend{ProducerId: &producerID, SequenceId: &seq, NumMessages: &n},
	}
}

func messageCommand(consumerID, ledger, entry uint64) *pb.BaseCommand {
	return &pb.BaseCommand{
		Type: pb.BaseCommand_MESSAGE.Enum(),
		Message: &pb.CommandMessage{
			ConsumerId: &consumerID,
			MessageId:  &pb.MessageIdData{LedgerId: &ledger, EntryId: &entry},
		},
	}
}

func flowCommand(consumerID uint64, permits uint32) *pb.BaseCommand {
	return &pb.BaseCommand{
		Type: pb.BaseCommand_FLOW.Enum(),
		Flow: &pb.CommandFlow{ConsumerId: &consumerID, MessagePermits: &permits},
	}
}

func batchMetadata(producer string, seq uint64, n int32) *pb.MessageMetadata {
	return &pb.MessageMetadata{
		ProducerName:       &producer,
		SequenceId:         &seq,
		PublishTime:        proto.Uint64(1_700_000_000_000),
		NumMessagesInBatch: &n,
	}
}

// refPayloadFrame assembles a payload frame the way the Go client's
// serializeMessage does, independently of the package's encoders.
func refPayloadFrame(t testing.TB, cmd *pb.BaseCommand, md *pb.MessageMetadata, payload []byte) []byte {
	t.Helper()
	cb, err := proto.Marshal(cmd)
	must(t, err)
	mb, err := proto.Marshal(md)
	must(t, err)
	var covered []byte
	covered = binary.BigEndian.AppendUint32(covered, uint32(len(mb)))
	covered = append(append(covered, mb...), payload...)
	total := 4 + len(cb) + 2 + 4 + len(covered)
	var b []byte
	b = binary.BigEndian.AppendUint32(b, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(cb)))
	b = append(b, cb...)
	b = binary.BigEndian.AppendUint16(b, 0x0e01)
	b = binary.BigEndian.AppendUint32(b, crc32c(covered))
	return append(b, covered...)
}

// payloadFrame builds a frame with the package's encoders.
func payloadFrame(t testing.TB, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata, md *pb.MessageMetadata, payload []byte) []byte {
	t.Helper()
	entry, err := wire.AppendEntry(nil, md, payload)
	must(t, err)
	b, err := wire.AppendPayloadFrameHeader(nil, cmd, bem, len(entry))
	must(t, err)
	return append(b, entry...)
}

func simpleFrame(t testing.TB, cmd *pb.BaseCommand) []byte {
	t.Helper()
	b, err := wire.AppendSimpleFrame(nil, cmd)
	must(t, err)
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// within reports whether sub lies inside buf[:n], by address.
func within(sub, buf []byte, n int) bool {
	if len(sub) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return p >= lo && p+uintptr(len(sub)) <= lo+uintptr(n)
}

// randomCommand returns a BaseCommand of a random type whose body has every
// required field and a random subset of the others set.
func randomCommand(r *rand.Rand) *pb.BaseCommand {
	cmd := &pb.BaseCommand{}
	m := cmd.ProtoReflect()
	types := pb.BaseCommand_Type(0).Descriptor().Values()
	typ := types.Get(r.Intn(types.Len())).Number()
	m.Set(m.Descriptor().Fields().ByName("type"), protoreflect.ValueOfEnum(typ))
	body := m.Descriptor().Fields().ByNumber(protoreflect.FieldNumber(typ))
	randomFill(r, m.Mutable(body).Message(), 3)
	return cmd
}

func randomMetadata(r *rand.Rand) *pb.MessageMetadata {
	md := &pb.MessageMetadata{}
	randomFill(r, md.ProtoReflect(), 2)
	return md
}

func randomFill(r *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		required := fd.Cardinality() == protoreflect.Required
		if !required && r.Intn(3) == 0 {
			continue
		}
		switch {
		case fd.Message() != nil && fd.IsList():
			if depth > 0 {
				for k := r.Intn(3); k > 0; k-- {
					randomFill(r, m.Mutable(fd).List().AppendMutable().Message(), depth-1)
				}
			}
		case fd.Message() != nil:
			if depth > 0 || required {
				randomFill(r, m.Mutable(fd).Message(), max(depth-1, 0))
			}
		case fd.IsList():
			for k := r.Intn(4); k > 0; k-- {
				m.Mutable(fd).List().Append(randomScalar(r, fd))
			}
		default:
			m.Set(fd, randomScalar(r, fd))
		}
	}
}

func randomScalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.Intn(2) == 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(r.Intn(vals.Len())).Number())
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(r.Uint32()))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(int64(r.Uint64()))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(r.Uint32())
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(r.Uint64() >> uint(r.Intn(64)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(r.NormFloat64())
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("s%x", r.Int63n(1<<uint(r.Intn(62)+1))))
	case protoreflect.BytesKind:
		b := make([]byte, r.Intn(20))
		r.Read(b)
		return protoreflect.ValueOfBytes(b)
	}
	panic(fmt.Sprintf("kind %v not handled", fd.Kind()))
}
