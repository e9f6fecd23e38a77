package broker

// Failure answers: the ServerError code and the command type Pulsar's
// broker sends in the same situation (issue 28 item 3). Clients decide
// whether to retry from them.

import (
	"context"
	"testing"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// request sends cmd and returns the next answer that is not a MESSAGE
// (nor a broker notice).
func (r *rawClient) request(cmd *pb.BaseCommand) *pb.BaseCommand {
	r.t.Helper()
	r.send(cmd)
	for {
		got, err := r.read()
		if err != nil {
			r.t.Fatal(err)
		}
		switch got.GetType() {
		case pb.BaseCommand_MESSAGE, pb.BaseCommand_ACTIVE_CONSUMER_CHANGE:
			continue
		}
		return got
	}
}

// expectError checks an ERROR answer with its request id and code.
func expectError(t *testing.T, what string, got *pb.BaseCommand, reqID uint64, code pb.ServerError) {
	t.Helper()
	if got.GetType() != pb.BaseCommand_ERROR || got.GetError().GetRequestId() != reqID || got.GetError().GetError() != code ||
		got.GetError().GetMessage() == "" {
		t.Fatalf("%s answered %v, want ERROR %v for request %d", what, got, code, reqID)
	}
}

func subscribeCmd(topic, sub string, subType pb.CommandSubscribe_SubType, consumerID, reqID uint64) *pb.BaseCommand {
	return &pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: ptr(topic), Subscription: ptr(sub), SubType: subType.Enum(),
		ConsumerId: ptr(consumerID), RequestId: ptr(reqID), InitialPosition: pb.CommandSubscribe_Earliest.Enum()}}
}

// Commands naming a consumer the connection does not have: Pulsar answers
// UNSUBSCRIBE, SEEK and GET_LAST_MESSAGE_ID with ERROR MetadataError
// ("Consumer not found"), a SEEK without a target with MetadataError
// before looking; CONSUMER_STATS with ConsumerNotFound in its response;
// CLOSE_CONSUMER and CLOSE_PRODUCER with SUCCESS. Magnetar answered
// ConsumerNotFound to the first three and UnknownError to the empty SEEK.
func TestProtocolUnknownConsumer(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	expectError(t, "UNSUBSCRIBE", r.request(&pb.BaseCommand{Type: pb.BaseCommand_UNSUBSCRIBE.Enum(),
		Unsubscribe: &pb.CommandUnsubscribe{ConsumerId: ptr(uint64(9)), RequestId: ptr(uint64(1))}}), 1, pb.ServerError_MetadataError)
	expectError(t, "SEEK", r.request(&pb.BaseCommand{Type: pb.BaseCommand_SEEK.Enum(), Seek: &pb.CommandSeek{
		ConsumerId: ptr(uint64(9)), RequestId: ptr(uint64(2)), MessagePublishTime: ptr(uint64(1))}}), 2, pb.ServerError_MetadataError)
	expectError(t, "GET_LAST_MESSAGE_ID", r.request(&pb.BaseCommand{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID.Enum(),
		GetLastMessageId: &pb.CommandGetLastMessageId{ConsumerId: ptr(uint64(9)), RequestId: ptr(uint64(3))}}), 3, pb.ServerError_MetadataError)
	for id, cmd := range map[uint64]*pb.BaseCommand{
		4: {Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{ConsumerId: ptr(uint64(9)), RequestId: ptr(uint64(4))}},
		5: {Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{ProducerId: ptr(uint64(9)), RequestId: ptr(uint64(5))}},
	} {
		if got := r.request(cmd); got.GetType() != pb.BaseCommand_SUCCESS || got.GetSuccess().GetRequestId() != id {
			t.Fatalf("%v of an unknown id answered %v", cmd.GetType(), got)
		}
	}
	// A SEEK with neither a message id nor a time, on a real consumer.
	r.subscribeRaw("seek-nothing", "s", pb.CommandSubscribe_Exclusive)
	expectError(t, "empty SEEK", r.request(&pb.BaseCommand{Type: pb.BaseCommand_SEEK.Enum(), Seek: &pb.CommandSeek{
		ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(6))}}), 6, pb.ServerError_MetadataError)
}

// Pulsar answers ConsumerBusy (SubscriptionBusyException) to an
// UNSUBSCRIBE while other consumers are connected, and to a SUBSCRIBE of
// another type while the subscription has consumers; a second consumer
// on an Exclusive subscription is ConsumerBusy too. Magnetar answered
// MetadataError and SubscriptionNotFound (which clients do not retry).
func TestProtocolSubscriptionBusy(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	for i := uint64(1); i <= 2; i++ {
		if got := r.request(subscribeCmd("busy", "shared", pb.CommandSubscribe_Shared, i, i)); got.GetType() != pb.BaseCommand_SUCCESS {
			t.Fatalf("shared consumer %d: %v", i, got)
		}
	}
	expectError(t, "UNSUBSCRIBE with another consumer", r.request(&pb.BaseCommand{Type: pb.BaseCommand_UNSUBSCRIBE.Enum(),
		Unsubscribe: &pb.CommandUnsubscribe{ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(3))}}), 3, pb.ServerError_ConsumerBusy)
	expectError(t, "SUBSCRIBE of another type", r.request(subscribeCmd("busy", "shared", pb.CommandSubscribe_Exclusive, 4, 4)),
		4, pb.ServerError_ConsumerBusy)
	if got := r.request(subscribeCmd("busy", "excl", pb.CommandSubscribe_Exclusive, 5, 5)); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("exclusive consumer: %v", got)
	}
	expectError(t, "second exclusive consumer", r.request(subscribeCmd("busy", "excl", pb.CommandSubscribe_Exclusive, 6, 6)),
		6, pb.ServerError_ConsumerBusy)
	// The last consumer may unsubscribe.
	if got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{
		ConsumerId: ptr(uint64(2)), RequestId: ptr(uint64(7))}}); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("close: %v", got)
	}
	if got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_UNSUBSCRIBE.Enum(), Unsubscribe: &pb.CommandUnsubscribe{
		ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(8))}}); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("unsubscribe of the last consumer: %v", got)
	}
}

// Pulsar's broker ignores a cumulative ACK on a Shared or Key_Shared
// subscription and answers ACK_RESPONSE without an error (Consumer.
// messageAcked: "Received cumulative ack on shared subscription,
// ignoring"); Magnetar answered NotAllowedError.
func TestProtocolCumulativeAckOnSharedIsIgnored(t *testing.T) {
	b, url := startBroker(t)
	produce(t, newClient(t, url), "cumulative-ignored", 3, false)
	r, ids := rawConsumer(t, url, "cumulative-ignored", pb.CommandSubscribe_Shared, 3)
	before := markDeleted(t, b, "cumulative-ignored")
	if resp := ackResponse(t, r, &pb.CommandAck{AckType: pb.CommandAck_Cumulative.Enum(), MessageId: ids[2:]}); resp.Error != nil {
		t.Fatalf("cumulative ack on Shared answered %v %s", resp.GetError(), resp.GetMessage())
	}
	if got := markDeleted(t, b, "cumulative-ignored"); got != before {
		t.Fatalf("cumulative ack on Shared moved the mark-delete from %v to %v", before, got)
	}
}

// GET_SCHEMA with a schema_version present but empty: Pulsar answers
// IncompatibleSchema ("Empty schema version") before anything else;
// Magnetar took it for "latest".
func TestProtocolGetSchemaEmptyVersion(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{
		RequestId: ptr(uint64(1)), Topic: ptr("persistent://public/default/s"), SchemaVersion: []byte{}}})
	if resp := got.GetGetSchemaResponse(); got.GetType() != pb.BaseCommand_GET_SCHEMA_RESPONSE || resp.GetRequestId() != 1 ||
		resp.GetErrorCode() != pb.ServerError_IncompatibleSchema || resp.GetErrorMessage() == "" {
		t.Fatalf("GET_SCHEMA with an empty version answered %v", got)
	}
}

// With every lookup permit taken (maxConcurrentLookupRequest), Pulsar
// answers LOOKUP with LOOKUP_RESPONSE Failed TooManyRequests and
// PARTITIONED_METADATA with PARTITIONED_METADATA_RESPONSE Failed
// TooManyRequests; Magnetar served PARTITIONED_METADATA unbounded.
func TestProtocolTooManyLookups(t *testing.T) {
	b, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	n := int64(b.cfg.MaxConcurrentLookupRequest)
	if err := b.lookups.Acquire(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	defer b.lookups.Release(n)
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: ptr("persistent://public/default/x"), RequestId: ptr(uint64(1))}})
	if l := got.GetLookupTopicResponse(); l.GetRequestId() != 1 || l.GetResponse() != pb.CommandLookupTopicResponse_Failed ||
		l.GetError() != pb.ServerError_TooManyRequests {
		t.Fatalf("LOOKUP answered %v", got)
	}
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
		Topic: ptr("persistent://public/default/x"), RequestId: ptr(uint64(2))}})
	if p := got.GetPartitionMetadataResponse(); p.GetRequestId() != 2 || p.GetResponse() != pb.CommandPartitionedTopicMetadataResponse_Failed ||
		p.GetError() != pb.ServerError_TooManyRequests {
		t.Fatalf("PARTITIONED_METADATA answered %v", got)
	}
}

// An invalid topic name: LOOKUP and PARTITIONED_METADATA answer Failed
// InvalidTopicName in their own response type, PRODUCER and SUBSCRIBE an
// ERROR InvalidTopicName (Pulsar: ServerCnx.validateTopicName).
func TestProtocolInvalidTopicName(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	const bad = "persistent://public/default/a\x01b"
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: ptr(bad), RequestId: ptr(uint64(1))}})
	if l := got.GetLookupTopicResponse(); l.GetResponse() != pb.CommandLookupTopicResponse_Failed || l.GetError() != pb.ServerError_InvalidTopicName {
		t.Fatalf("LOOKUP answered %v", got)
	}
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
		Topic: ptr(bad), RequestId: ptr(uint64(2))}})
	if p := got.GetPartitionMetadataResponse(); p.GetResponse() != pb.CommandPartitionedTopicMetadataResponse_Failed ||
		p.GetError() != pb.ServerError_InvalidTopicName {
		t.Fatalf("PARTITIONED_METADATA answered %v", got)
	}
	expectError(t, "PRODUCER", r.openProducer(bad, 1, 3, pb.ProducerAccessMode_Shared), 3, pb.ServerError_InvalidTopicName)
	expectError(t, "SUBSCRIBE", r.request(subscribeCmd(bad, "s", pb.CommandSubscribe_Shared, 1, 4)), 4, pb.ServerError_InvalidTopicName)
}

// Transactions are not offered: Pulsar with the coordinator disabled
// answers each client transaction command with ERROR NotAllowedError
// ("Transactions are not enabled") for its request id. Magnetar answered
// ADD_SUBSCRIPTION_TO_TXN (and the coordinator's END_TXN_ON_*) with
// request id 0, so the client's request waited for its timeout.
func TestProtocolTransactionsNotAllowed(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	for id, cmd := range map[uint64]*pb.BaseCommand{
		1: {Type: pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST.Enum(), TcClientConnectRequest: &pb.CommandTcClientConnectRequest{RequestId: ptr(uint64(1)), TcId: ptr(uint64(0))}},
		2: {Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: ptr(uint64(2))}},
		3: {Type: pb.BaseCommand_ADD_PARTITION_TO_TXN.Enum(), AddPartitionToTxn: &pb.CommandAddPartitionToTxn{RequestId: ptr(uint64(3))}},
		4: {Type: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN.Enum(), AddSubscriptionToTxn: &pb.CommandAddSubscriptionToTxn{RequestId: ptr(uint64(4))}},
		5: {Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{RequestId: ptr(uint64(5))}},
		6: {Type: pb.BaseCommand_END_TXN_ON_PARTITION.Enum(), EndTxnOnPartition: &pb.CommandEndTxnOnPartition{RequestId: ptr(uint64(6))}},
		7: {Type: pb.BaseCommand_END_TXN_ON_SUBSCRIPTION.Enum(), EndTxnOnSubscription: &pb.CommandEndTxnOnSubscription{RequestId: ptr(uint64(7))}},
	} {
		expectError(t, cmd.GetType().String(), r.request(cmd), id, pb.ServerError_NotAllowedError)
	}
}

// PRODUCER on a terminated topic: ERROR TopicTerminatedError.
func TestProtocolProducerOnTerminatedTopic(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	const topic = "persistent://public/default/terminated"
	produce(t, newClient(t, env.url), topic, 1, false)
	if _, err := env.admin.Topics().Terminate(topicName(t, topic)); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, env.url)
	r.connect()
	expectError(t, "PRODUCER", r.openProducer(topic, 1, 1, pb.ProducerAccessMode_Shared), 1, pb.ServerError_TopicTerminatedError)
}

// A SEND or an ACK in a transaction, while this broker has no
// transactions: refused (SEND_ERROR, ACK_RESPONSE NotAllowedError), and
// nothing stored or acknowledged. Storing the message as a plain one
// would deliver it before, or without, its transaction's commit: the
// application asked for a guarantee it would silently not get.
func TestProtocolTransactionalSendAndAckRefused(t *testing.T) {
	b, url := startBroker(t)
	const topic = "persistent://public/default/txn-refused"
	r := dialRaw(t, url)
	r.connect()
	if cmd := r.openProducer(topic, 1, 1, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER: %v", cmd)
	}
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: ptr("p"), SequenceId: ptr(uint64(0)),
		PublishTime: ptr(uint64(1)), TxnidMostBits: ptr(uint64(7)), TxnidLeastBits: ptr(uint64(9))}, []byte("in a transaction"))
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: ptr(uint64(1)), SequenceId: ptr(uint64(0)), NumMessages: ptr(int32(1)),
		TxnidMostBits: ptr(uint64(7)), TxnidLeastBits: ptr(uint64(9))}}, nil, len(entry))
	if err != nil {
		t.Fatal(err)
	}
	r.write(append(hdr, entry...))
	cmd, err := r.read()
	if err != nil || cmd.GetType() != pb.BaseCommand_SEND_ERROR || cmd.GetSendError().GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("transactional SEND: %v %v, want SEND_ERROR NotAllowedError", cmd, err)
	}
	if got := r.sendRaw(1, 1, "plain"); got.GetType() != pb.BaseCommand_SEND_RECEIPT {
		t.Fatalf("plain SEND after it: %v", got)
	}
	tp, err := b.existingAdminTopic(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := tp.ml.Entries(); n != 1 {
		t.Fatalf("%d entries stored, want only the plain one", n)
	}
	c := dialRaw(t, url)
	c.connect()
	c.subscribeRaw(topic, "s", pb.CommandSubscribe_Exclusive)
	msg, err := c.read()
	if err != nil || msg.GetType() != pb.BaseCommand_MESSAGE {
		t.Fatalf("MESSAGE: %v %v", msg, err)
	}
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: ptr(uint64(1)),
		AckType: pb.CommandAck_Individual.Enum(), MessageId: []*pb.MessageIdData{msg.GetMessage().GetMessageId()},
		TxnidMostBits: ptr(uint64(7)), TxnidLeastBits: ptr(uint64(9)), RequestId: ptr(uint64(5))}})
	ack, err := c.read()
	if err != nil || ack.GetType() != pb.BaseCommand_ACK_RESPONSE || ack.GetAckResponse().GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("transactional ACK: %v %v, want ACK_RESPONSE NotAllowedError", ack, err)
	}
	if st, err := b.TopicStats(context.Background(), topic); err != nil || st.Subscriptions["s"].MsgBacklog != 1 {
		t.Fatalf("after a refused transactional ack: backlog %+v %v, want the message still there", st.Subscriptions["s"], err)
	}
}
