package wire

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// Every command type without its body is refused as malformed; with an
// empty body of its own type it is accepted.
func TestCommandWithoutBodyIsMalformed(t *testing.T) {
	types := pb.BaseCommand_CONNECT.Descriptor().Values()
	for i := range types.Len() {
		typ := pb.BaseCommand_Type(types.Get(i).Number())
		bare, err := proto.Marshal(&pb.BaseCommand{Type: typ.Enum()})
		if err != nil {
			t.Fatal(err)
		}
		var cmd pb.BaseCommand
		if err := decodeCommand(bare, &cmd); !errors.Is(err, ErrMalformedFrame) {
			t.Fatalf("%s without a body: %v", typ, err)
		}
		// Another command's body does not stand in for its own.
		other := &pb.BaseCommand{Type: typ.Enum(), Ping: &pb.CommandPing{}}
		if typ == pb.BaseCommand_PING {
			other = &pb.BaseCommand{Type: typ.Enum(), Pong: &pb.CommandPong{}}
		}
		if err := decodeCommand(mustMarshal(t, other), &cmd); !errors.Is(err, ErrMalformedFrame) {
			t.Fatalf("%s with another body: %v", typ, err)
		}
		withBody := &pb.BaseCommand{Type: typ.Enum()}
		fd := commandBodies[protoreflect.EnumNumber(typ)].fd
		m := withBody.ProtoReflect()
		m.Set(fd, m.NewField(fd))
		// An empty body may still lack required fields: fill in what a
		// minimal valid body needs through the decoder's own check.
		b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(withBody)
		if err != nil {
			t.Fatal(err)
		}
		err = decodeCommand(b, &cmd)
		var mf *MalformedFrameError
		if err != nil && (!errors.As(err, &mf) || mf.Err == nil) {
			t.Fatalf("%s with its body refused for something else than a protobuf error: %v", typ, err)
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Invalid UTF-8 anywhere in a command, nested and repeated fields too,
// is replaced byte by byte with U+FFFD.
func TestInvalidUTF8IsReplaced(t *testing.T) {
	sub := &pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: proto.String("t\xff\xfe"), Subscription: proto.String("s\xc3"), SubType: pb.CommandSubscribe_Shared.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1),
		Metadata: []*pb.KeyValue{{Key: proto.String("k\x80"), Value: proto.String("ok")}}}}
	var cmd pb.BaseCommand
	if err := decodeCommand(mustMarshal(t, sub), &cmd); err != nil {
		t.Fatal(err)
	}
	s := cmd.GetSubscribe()
	if s.GetTopic() != "t\uFFFD\uFFFD" || s.GetSubscription() != "s\uFFFD" || s.GetMetadata()[0].GetKey() != "k\uFFFD" ||
		s.GetMetadata()[0].GetValue() != "ok" {
		t.Fatalf("decoded %v", s)
	}
}

func TestValidUTF8(t *testing.T) {
	for in, want := range map[string]string{"": "", "abc": "abc", "é": "é", "\xff": "\uFFFD", "a\xff\xfeb": "a\uFFFD\uFFFDb"} {
		if got := ValidUTF8(in); got != want {
			t.Errorf("ValidUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}
