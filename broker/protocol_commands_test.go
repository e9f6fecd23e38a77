package broker

// Each client command Magnetar serves, driven with raw frames and checked
// against the answer Pulsar's broker gives (issue 28 item 2; the table in
// docs/compat/protocol.md names the test of each row).

import (
	"testing"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// sendRaw sends one SEND of a single message and returns the answer.
func (r *rawClient) sendRaw(producerID, seq uint64, payload string) *pb.BaseCommand {
	r.t.Helper()
	return r.sendRawSend(&pb.CommandSend{ProducerId: ptr(producerID), SequenceId: ptr(seq), NumMessages: ptr(int32(1))}, payload)
}

// sendRawSend sends send with one message, payload, and returns the
// answer.
func (r *rawClient) sendRawSend(send *pb.CommandSend, payload string) *pb.BaseCommand {
	r.t.Helper()
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: ptr("p"), SequenceId: send.SequenceId,
		PublishTime: ptr(uint64(1))}, []byte(payload))
	if err != nil {
		r.t.Fatal(err)
	}
	hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: send}, nil, len(entry))
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(append(hdr, entry...))
	cmd, err := r.read()
	if err != nil {
		r.t.Fatal(err)
	}
	return cmd
}

// PING, LOOKUP, PARTITIONED_METADATA: PONG; LOOKUP_RESPONSE Connect
// (authoritative) to this broker; PARTITIONED_METADATA_RESPONSE Success
// with 0 partitions for a non-partitioned topic.
func TestProtocolSessionCommands(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	if got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}); got.GetType() != pb.BaseCommand_PONG {
		t.Fatalf("PING answered %v", got)
	}
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: ptr("persistent://public/default/session"), RequestId: ptr(uint64(1))}})
	if l := got.GetLookupTopicResponse(); l.GetRequestId() != 1 || l.GetResponse() != pb.CommandLookupTopicResponse_Connect ||
		l.GetBrokerServiceUrl() == "" || !l.GetAuthoritative() {
		t.Fatalf("LOOKUP answered %v", got)
	}
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
		Topic: ptr("persistent://public/default/session"), RequestId: ptr(uint64(2))}})
	if p := got.GetPartitionMetadataResponse(); p.GetRequestId() != 2 || p.GetResponse() != pb.CommandPartitionedTopicMetadataResponse_Success ||
		p.Partitions == nil || p.GetPartitions() != 0 {
		t.Fatalf("PARTITIONED_METADATA answered %v", got)
	}
}

// PRODUCER, SEND, CLOSE_PRODUCER: PRODUCER_SUCCESS (name generated,
// last_sequence_id -1, ready); SEND_RECEIPTs in order with the stored
// ids; SUCCESS; a SEND still in flight after the close is ignored.
func TestProtocolProducerCommands(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	got := r.openProducer("produce", 1, 1, pb.ProducerAccessMode_Shared)
	if ps := got.GetProducerSuccess(); got.GetType() != pb.BaseCommand_PRODUCER_SUCCESS || ps.GetRequestId() != 1 ||
		ps.GetProducerName() == "" || ps.GetLastSequenceId() != -1 || !ps.GetProducerReady() {
		t.Fatalf("PRODUCER answered %v", got)
	}
	var last *pb.MessageIdData
	for seq := uint64(0); seq < 3; seq++ {
		got := r.sendRaw(1, seq, "m")
		rc := got.GetSendReceipt()
		if got.GetType() != pb.BaseCommand_SEND_RECEIPT || rc.GetProducerId() != 1 || rc.GetSequenceId() != seq || rc.GetMessageId() == nil {
			t.Fatalf("SEND %d answered %v", seq, got)
		}
		if last != nil && rc.GetMessageId().GetEntryId() <= last.GetEntryId() && rc.GetMessageId().GetLedgerId() == last.GetLedgerId() {
			t.Fatalf("receipt ids do not increase: %v after %v", rc.GetMessageId(), last)
		}
		last = rc.GetMessageId()
	}
	if got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{
		ProducerId: ptr(uint64(1)), RequestId: ptr(uint64(2))}}); got.GetType() != pb.BaseCommand_SUCCESS || got.GetSuccess().GetRequestId() != 2 {
		t.Fatalf("CLOSE_PRODUCER answered %v", got)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}) // then a SEND for the closed producer
	if got := r.sendRaw(1, 3, "late"); got.GetType() != pb.BaseCommand_PONG {
		t.Fatalf("after the close: %v", got)
	}
	expectNoMessage(t, r) // and nothing answers the late SEND
}

// SUBSCRIBE, FLOW, MESSAGE, ACK (with a request id), GET_LAST_MESSAGE_ID,
// SEEK, UNSUBSCRIBE, CLOSE_CONSUMER as Pulsar answers them.
func TestProtocolConsumerCommands(t *testing.T) {
	_, url := startBroker(t)
	produce(t, newClient(t, url), "consume", 3, false)
	r := dialRaw(t, url)
	r.connect()
	// SUBSCRIBE: SUCCESS; FLOW 2: exactly two MESSAGEs.
	if got := r.request(subscribeCmd("consume", "s", pb.CommandSubscribe_Exclusive, 1, 1)); got.GetType() != pb.BaseCommand_SUCCESS ||
		got.GetSuccess().GetRequestId() != 1 {
		t.Fatalf("SUBSCRIBE answered %v", got)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)), MessagePermits: ptr(uint32(2))}})
	msgs := readMessages(t, r, 2)
	for _, m := range msgs {
		if m.GetConsumerId() != 1 || m.GetMessageId() == nil {
			t.Fatalf("MESSAGE %v", m)
		}
	}
	expectNoMessage(t, r)
	// ACK with a request id: ACK_RESPONSE for it.
	if resp := ackResponse(t, r, &pb.CommandAck{AckType: pb.CommandAck_Individual.Enum(), MessageId: []*pb.MessageIdData{msgs[0].GetMessageId()}}); resp.Error != nil ||
		resp.GetRequestId() != 2 || resp.GetConsumerId() != 1 {
		t.Fatalf("ACK_RESPONSE %v", resp)
	}
	// GET_LAST_MESSAGE_ID: the last stored entry and the mark-delete.
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID.Enum(), GetLastMessageId: &pb.CommandGetLastMessageId{
		ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(3))}})
	lm := got.GetGetLastMessageIdResponse()
	if got.GetType() != pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE || lm.GetRequestId() != 3 ||
		lm.GetLastMessageId().GetEntryId() != msgs[1].GetMessageId().GetEntryId()+1 ||
		lm.GetConsumerMarkDeletePosition().GetEntryId() != msgs[0].GetMessageId().GetEntryId() {
		t.Fatalf("GET_LAST_MESSAGE_ID answered %v", got)
	}
	// SEEK: the broker closes the consumer (CLOSE_CONSUMER), then answers
	// SUCCESS, as Pulsar's resetCursor does.
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_SEEK.Enum(), Seek: &pb.CommandSeek{ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(4)),
		MessageId: msgs[0].GetMessageId()}})
	for _, want := range []pb.BaseCommand_Type{pb.BaseCommand_CLOSE_CONSUMER, pb.BaseCommand_SUCCESS} {
		got, err := r.read()
		for err == nil && got.GetType() == pb.BaseCommand_MESSAGE {
			got, err = r.read()
		}
		if err != nil || got.GetType() != want {
			t.Fatalf("after SEEK: %v %v, want %v", got, err, want)
		}
	}
	// Resubscribed: the seek target comes again first.
	if got := r.request(subscribeCmd("consume", "s", pb.CommandSubscribe_Exclusive, 2, 5)); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("SUBSCRIBE after SEEK answered %v", got)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(2)), MessagePermits: ptr(uint32(1))}})
	if m := readMessages(t, r, 1)[0]; m.GetMessageId().GetEntryId() != msgs[0].GetMessageId().GetEntryId() {
		t.Fatalf("after SEEK to %v the first message is %v", msgs[0].GetMessageId(), m.GetMessageId())
	}
	// UNSUBSCRIBE of the only consumer: SUCCESS; CLOSE_CONSUMER: SUCCESS.
	if got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_UNSUBSCRIBE.Enum(), Unsubscribe: &pb.CommandUnsubscribe{
		ConsumerId: ptr(uint64(2)), RequestId: ptr(uint64(6))}}); got.GetType() != pb.BaseCommand_SUCCESS || got.GetSuccess().GetRequestId() != 6 {
		t.Fatalf("UNSUBSCRIBE answered %v", got)
	}
	if got := r.request(subscribeCmd("consume", "t", pb.CommandSubscribe_Shared, 3, 7)); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("SUBSCRIBE answered %v", got)
	}
	if got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{
		ConsumerId: ptr(uint64(3)), RequestId: ptr(uint64(8))}}); got.GetType() != pb.BaseCommand_SUCCESS || got.GetSuccess().GetRequestId() != 8 {
		t.Fatalf("CLOSE_CONSUMER answered %v", got)
	}
}

// GET_TOPICS_OF_NAMESPACE: the namespace's topics for the request id.
func TestProtocolGetTopicsOfNamespace(t *testing.T) {
	_, url := startBroker(t)
	produce(t, newClient(t, url), "listed", 1, false)
	r := dialRaw(t, url)
	r.connect()
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: &pb.CommandGetTopicsOfNamespace{
		RequestId: ptr(uint64(1)), Namespace: ptr("public/default")}})
	resp := got.GetGetTopicsOfNamespaceResponse()
	found := false
	for _, tp := range resp.GetTopics() {
		found = found || tp == "persistent://public/default/listed"
	}
	if got.GetType() != pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE || resp.GetRequestId() != 1 || !found {
		t.Fatalf("GET_TOPICS_OF_NAMESPACE answered %v", got)
	}
}
