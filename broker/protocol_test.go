package broker

// Pulsar's broker semantics command by command, driven with raw frames so
// that no client's own choices hide a difference (issue 28).

import (
	"fmt"
	"testing"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// readMessages reads until n MESSAGE commands came and returns them.
func readMessages(t *testing.T, r *rawClient, n int) []*pb.CommandMessage {
	t.Helper()
	var out []*pb.CommandMessage
	for len(out) < n {
		cmd, err := r.read()
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(out), n, err)
		}
		if cmd.GetType() == pb.BaseCommand_MESSAGE {
			out = append(out, cmd.GetMessage())
		}
	}
	return out
}

// expectNoMessage checks that no MESSAGE arrives for a while.
func expectNoMessage(t *testing.T, r *rawClient) {
	t.Helper()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	for {
		cmd, err := r.read()
		if err != nil {
			t.Fatal(err)
		}
		switch cmd.GetType() {
		case pb.BaseCommand_MESSAGE:
			t.Fatalf("unexpected message %v", cmd.GetMessage().GetMessageId())
		case pb.BaseCommand_PONG:
			return
		}
	}
}

func ackIDs(r *rawClient, ids ...*pb.MessageIdData) {
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: ptr(uint64(1)),
		AckType: pb.CommandAck_Individual.Enum(), MessageId: ids}})
}

// On Exclusive and Failover subscriptions REDELIVER_UNACKNOWLEDGED_MESSAGES
// redelivers everything the consumer has not acknowledged, whatever ids it
// lists, with the consumer's new epoch and a redelivery count of 0 (the
// single-active dispatcher tracks none); on Shared only the listed ids
// come again, counted. Pulsar's ServerCnx.handleRedeliverUnacknowledged
// uses the ids only in individual-ack mode. Magnetar redelivered only the
// listed ids on every type: 4..9 never came back on Exclusive.
func TestRedeliverFollowsTheSubscriptionType(t *testing.T) {
	for _, subType := range []pb.CommandSubscribe_SubType{pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover,
		pb.CommandSubscribe_Shared} {
		t.Run(subType.String(), func(t *testing.T) {
			_, url := startBroker(t)
			topic := "redeliver-" + subType.String()
			produce(t, newClient(t, url), topic, 10, false)
			r, ids := rawConsumer(t, url, topic, subType, 10)
			ackIDs(r, ids[0], ids[1], ids[2])
			r.send(&pb.BaseCommand{Type: pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
				RedeliverUnacknowledgedMessages: &pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: ptr(uint64(1)),
					MessageIds: []*pb.MessageIdData{ids[3]}, ConsumerEpoch: ptr(uint64(1))}})
			want, count := ids[3:], uint32(0)
			if subType == pb.CommandSubscribe_Shared {
				want, count = ids[3:4], 1
			}
			got := readMessages(t, r, len(want))
			for i, m := range got {
				if m.GetMessageId().GetEntryId() != want[i].GetEntryId() || m.GetRedeliveryCount() != count {
					t.Fatalf("redelivery %d: entry %d count %d, want entry %d count %d", i,
						m.GetMessageId().GetEntryId(), m.GetRedeliveryCount(), want[i].GetEntryId(), count)
				}
				if single := subType != pb.CommandSubscribe_Shared; single && m.GetConsumerEpoch() != 1 {
					t.Fatalf("redelivery %d carries epoch %v, want 1", i, m.ConsumerEpoch)
				}
			}
			expectNoMessage(t, r)
		})
	}
}

// A consumer that subscribes with an epoch gets it on every message;
// without one no epoch is written (Pulsar writes it only when set).
func TestMessagesCarryTheConsumerEpoch(t *testing.T) {
	_, url := startBroker(t)
	produce(t, newClient(t, url), "epochs", 3, false)
	for i, epoch := range []*uint64{nil, ptr(uint64(7))} {
		r := dialRaw(t, url)
		r.connect()
		// A subscription each: the broker may not have seen the previous
		// connection close yet (ConsumerBusy on the same one).
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
			Topic: ptr("epochs"), Subscription: ptr(fmt.Sprint("s", i)), SubType: pb.CommandSubscribe_Exclusive.Enum(),
			ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(1)), InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
			ConsumerEpoch: epoch}})
		if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_SUCCESS {
			t.Fatalf("subscribe: %v %v", cmd, err)
		}
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)),
			MessagePermits: ptr(uint32(10))}})
		for _, m := range readMessages(t, r, 3) {
			if (epoch == nil) != (m.ConsumerEpoch == nil) || (epoch != nil && *m.ConsumerEpoch != *epoch) {
				t.Fatalf("subscribed with epoch %v, message carries %v", epoch, m.ConsumerEpoch)
			}
		}
		r.conn.Close()
	}
}

// What a consumer held when it went away comes again uncounted: Pulsar
// counts only explicit redeliveries, and only on Shared and Key_Shared
// (a count that rises on a reconnect sends messages to a dead-letter
// topic early). Magnetar reported 1.
func TestConsumerCloseDoesNotCountRedeliveries(t *testing.T) {
	for _, subType := range []pb.CommandSubscribe_SubType{pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Shared} {
		t.Run(subType.String(), func(t *testing.T) {
			b, url := startBroker(t)
			topic := "close-count-" + subType.String()
			produce(t, newClient(t, url), topic, 5, false)
			r, _ := rawConsumer(t, url, topic, subType, 5)
			r.conn.Close()
			eventually(t, "the broker saw the consumer's connection close", func() error {
				for _, lt := range b.loadedTopics() {
					if _, consumers, _, _ := lt.counts(); consumers != 0 {
						return fmt.Errorf("%s: %d consumers", lt.name, consumers)
					}
				}
				return nil
			})
			r2, _ := rawConsumer(t, url, topic, subType, 0)
			for i, m := range readMessages(t, r2, 5) {
				if m.GetRedeliveryCount() != 0 {
					t.Fatalf("message %d after the consumer went away: redelivery count %d, want 0", i, m.GetRedeliveryCount())
				}
			}
		})
	}
}

// SEEK disconnects the subscription's consumers before it answers, as
// Pulsar's resetCursor does: a client then handles CLOSE_CONSUMER (and
// reconnects) before it sees the SEEK succeed, so its next command on the
// consumer waits for the reconnect. Answering first let the Go client send
// a second SEEK for a consumer the broker had already dropped (the suite's
// TestReaderWithSeekByID failed 5 of 15 runs with "Consumer not found").
func TestSeekClosesConsumersBeforeAnswering(t *testing.T) {
	_, url := startBroker(t)
	ids := produce(t, newClient(t, url), "seek-order", 3, false)
	r, _ := rawConsumer(t, url, "seek-order", pb.CommandSubscribe_Exclusive, 3)
	first := ids[0].(interface {
		LedgerID() int64
		EntryID() int64
	})
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_SEEK.Enum(), Seek: &pb.CommandSeek{ConsumerId: ptr(uint64(1)),
		RequestId: ptr(uint64(9)), MessageId: &pb.MessageIdData{LedgerId: ptr(uint64(first.LedgerID())),
			EntryId: ptr(uint64(first.EntryID()))}}})
	var order []pb.BaseCommand_Type
	for len(order) < 2 {
		cmd, err := r.read()
		if err != nil {
			t.Fatal(err)
		}
		if typ := cmd.GetType(); typ == pb.BaseCommand_CLOSE_CONSUMER || typ == pb.BaseCommand_SUCCESS {
			order = append(order, typ)
		}
	}
	if order[0] != pb.BaseCommand_CLOSE_CONSUMER {
		t.Fatalf("SEEK answered in the order %v, want CLOSE_CONSUMER first", order)
	}
}

// TOPIC_MIGRATED (like every command only a broker sends) from a client
// closes its connection, as Pulsar's decoder has no broker-side handler for
// it; Magnetar never sends it (no cluster migration).
func TestTopicMigratedFromAClientClosesTheConnection(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_TOPIC_MIGRATED.Enum(), TopicMigrated: &pb.CommandTopicMigrated{
		ResourceId: ptr(uint64(1)), ResourceType: pb.CommandTopicMigrated_Producer.Enum()}})
	expectClosed(t, r)
}

// With authentication off nothing is challenged: an AUTH_RESPONSE nobody
// asked for is refused with an error, and a client sending AUTH_CHALLENGE
// (a broker's command) has its connection closed. (With authentication
// on: authrefresh_test.go.)
func TestAuthExchangeWithAuthenticationOff(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_RESPONSE.Enum(), AuthResponse: &pb.CommandAuthResponse{
		Response: &pb.AuthData{AuthMethodName: ptr("token"), AuthData: []byte("x")}}})
	if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_ERROR {
		t.Fatalf("AUTH_RESPONSE answered %v %v", cmd, err)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_CHALLENGE.Enum(), AuthChallenge: &pb.CommandAuthChallenge{
		Challenge: &pb.AuthData{AuthMethodName: ptr("token")}}})
	expectClosed(t, r)
}
