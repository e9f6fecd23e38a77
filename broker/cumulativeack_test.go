package broker

import (
	"context"
	"testing"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// rawConsumer subscribes on a raw connection with the given type, asks
// for n messages and returns their ids.
func rawConsumer(t *testing.T, url, topic string, subType pb.CommandSubscribe_SubType, n int) (*rawClient, []*pb.MessageIdData) {
	t.Helper()
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: ptr(topic), Subscription: ptr("s"), SubType: subType.Enum(),
		ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(1)), InitialPosition: pb.CommandSubscribe_Earliest.Enum()}})
	if cmd, err := r.readAnswer(); err != nil || cmd.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("subscribe: %v %v", cmd, err)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)), MessagePermits: ptr(uint32(100))}})
	var ids []*pb.MessageIdData
	for len(ids) < n {
		cmd, err := r.read()
		if err != nil {
			t.Fatal(err)
		}
		if cmd.GetType() == pb.BaseCommand_MESSAGE {
			ids = append(ids, cmd.GetMessage().GetMessageId())
		}
	}
	return r, ids
}

// ackResponse sends ACK (with a request id) and returns its ACK_RESPONSE.
func ackResponse(t *testing.T, r *rawClient, ack *pb.CommandAck) *pb.CommandAckResponse {
	t.Helper()
	ack.ConsumerId, ack.RequestId = ptr(uint64(1)), ptr(uint64(2))
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: ack})
	for {
		cmd, err := r.read()
		if err != nil {
			t.Fatal(err)
		}
		if cmd.GetType() == pb.BaseCommand_ACK_RESPONSE {
			return cmd.GetAckResponse()
		}
	}
}

func markDeleted(t *testing.T, b *Broker, topic string) managedledger.Position {
	t.Helper()
	tp, err := b.getTopic(context.Background(), TopicName{Domain: "persistent", Tenant: "public", Namespace: "default", Local: topic})
	if err != nil {
		t.Fatal(err)
	}
	tp.mu.Lock()
	sub := tp.subs["s"]
	tp.mu.Unlock()
	return sub.cursor.MarkDeletePosition()
}

// TestCumulativeAckIgnoredOnShared (issue 16, defect 5; issue 28): a
// cumulative ack on a Shared or Key_Shared subscription moves nothing (it
// would acknowledge messages in flight to other consumers) and, as on
// Pulsar's broker, is answered without an error.
func TestCumulativeAckIgnoredOnShared(t *testing.T) {
	for _, st := range []pb.CommandSubscribe_SubType{pb.CommandSubscribe_Shared, pb.CommandSubscribe_Key_Shared} {
		t.Run(st.String(), func(t *testing.T) {
			b, url := startBroker(t)
			topic := "cumulative-" + st.String()
			produce(t, newClient(t, url), topic, 5, false)
			r, ids := rawConsumer(t, url, topic, st, 5)
			before := markDeleted(t, b, topic)
			resp := ackResponse(t, r, &pb.CommandAck{AckType: pb.CommandAck_Cumulative.Enum(), MessageId: ids[4:]})
			if resp.Error != nil {
				t.Fatalf("cumulative ack on %s answered %v %s; Pulsar ignores it without an error", st, resp.GetError(), resp.GetMessage())
			}
			if got := markDeleted(t, b, topic); got != before {
				t.Fatalf("cumulative ack on %s moved the mark-delete from %v to %v", st, before, got)
			}
			// Individual acks still work.
			if resp := ackResponse(t, r, &pb.CommandAck{AckType: pb.CommandAck_Individual.Enum(), MessageId: ids[:1]}); resp.Error != nil {
				t.Fatalf("individual ack: %v %s", resp.GetError(), resp.GetMessage())
			}
		})
	}
}

// TestCumulativeAckTakesHighest (issue 16, defect 5): a cumulative ack
// carrying several ids acknowledges up to the highest, whatever their
// order.
func TestCumulativeAckTakesHighest(t *testing.T) {
	b, url := startBroker(t)
	produce(t, newClient(t, url), "cumulative-highest", 5, false)
	r, ids := rawConsumer(t, url, "cumulative-highest", pb.CommandSubscribe_Exclusive, 5)
	resp := ackResponse(t, r, &pb.CommandAck{AckType: pb.CommandAck_Cumulative.Enum(), MessageId: []*pb.MessageIdData{ids[3], ids[1]}})
	if resp.Error != nil {
		t.Fatalf("cumulative ack: %v %s", resp.GetError(), resp.GetMessage())
	}
	if got, want := markDeleted(t, b, "cumulative-highest"), position(ids[3]); got != want {
		t.Fatalf("mark-delete at %v after a cumulative ack of %v and %v, want %v", got, position(ids[3]), position(ids[1]), want)
	}
}
