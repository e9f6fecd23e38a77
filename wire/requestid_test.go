package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// Every command whose body has a request_id is read and set through it;
// others (PING, SEND, MESSAGE) have none, and neither has a command
// without its body.
func TestRequestID(t *testing.T) {
	lookup := &pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: proto.String("t"), RequestId: proto.Uint64(7)}}
	if id, ok := RequestID(lookup); !ok || id != 7 {
		t.Fatalf("LOOKUP: %d %v", id, ok)
	}
	if !SetRequestID(lookup, 9) || lookup.GetLookupTopic().GetRequestId() != 9 {
		t.Fatalf("set: %v", lookup)
	}
	for _, c := range []*pb.BaseCommand{
		{Type: pb.BaseCommand_GET_SCHEMA_RESPONSE.Enum(), GetSchemaResponse: &pb.CommandGetSchemaResponse{RequestId: proto.Uint64(3)}},
		{Type: pb.BaseCommand_ERROR.Enum(), Error: &pb.CommandError{RequestId: proto.Uint64(3)}},
		{Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{RequestId: proto.Uint64(3)}},
	} {
		if id, ok := RequestID(c); !ok || id != 3 {
			t.Errorf("%v: %d %v", c.GetType(), id, ok)
		}
	}
	for _, c := range []*pb.BaseCommand{
		{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}},
		{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(1)}},
		{Type: pb.BaseCommand_LOOKUP.Enum()}, // no body
	} {
		if _, ok := RequestID(c); ok || SetRequestID(c, 1) {
			t.Errorf("%v has a request id", c.GetType())
		}
	}
}
