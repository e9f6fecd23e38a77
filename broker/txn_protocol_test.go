package broker

import (
	"context"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// sendTxnRaw sends one SEND of a message in transaction (most, least).
func (r *rawClient) sendTxnRaw(producerID, seq, most, least uint64, payload string) *pb.BaseCommand {
	r.t.Helper()
	return r.sendRawSend(&pb.CommandSend{ProducerId: ptr(producerID), SequenceId: ptr(seq), NumMessages: ptr(int32(1)),
		TxnidMostBits: ptr(most), TxnidLeastBits: ptr(least)}, payload)
}

// Each transaction command, raw, with its error paths: a coordinator
// that does not exist, a transaction that ended (or never was), a SEND in
// a transaction its topic saw end, and the coordinator-to-owner commands.
func TestProtocolTransactionCommands(t *testing.T) {
	_, url := startTxnBroker(t, testLedgers(t, 0))
	r := dialRaw(t, url)
	r.connect()
	const topic = "persistent://t/ns/txn-raw"
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST.Enum(),
		TcClientConnectRequest: &pb.CommandTcClientConnectRequest{RequestId: ptr(uint64(1)), TcId: ptr(uint64(7))}})
	if e := got.GetTcClientConnectResponse(); e.GetRequestId() != 1 || e.GetError() != pb.ServerError_TransactionCoordinatorNotFound {
		t.Fatalf("TC_CLIENT_CONNECT to coordinator 7 of 1: %v", got)
	}
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST.Enum(),
		TcClientConnectRequest: &pb.CommandTcClientConnectRequest{RequestId: ptr(uint64(2)), TcId: ptr(uint64(0))}})
	if e := got.GetTcClientConnectResponse(); e.GetRequestId() != 2 || e.Error != nil {
		t.Fatalf("TC_CLIENT_CONNECT: %v", got)
	}
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: ptr(uint64(3)),
		TcId: ptr(uint64(0)), TxnTtlSeconds: ptr(uint64(time.Minute.Milliseconds()))}})
	nt := got.GetNewTxnResponse()
	if nt.GetRequestId() != 3 || nt.Error != nil || nt.GetTxnidMostBits() != 0 || nt.GetTxnidLeastBits() == 0 {
		t.Fatalf("NEW_TXN: %v", got)
	}
	most, least := nt.GetTxnidMostBits(), nt.GetTxnidLeastBits()
	addPartition := func(req uint64) *pb.CommandAddPartitionToTxnResponse {
		return r.request(&pb.BaseCommand{Type: pb.BaseCommand_ADD_PARTITION_TO_TXN.Enum(), AddPartitionToTxn: &pb.CommandAddPartitionToTxn{
			RequestId: ptr(req), TxnidMostBits: ptr(most), TxnidLeastBits: ptr(least), Partitions: []string{topic}}}).GetAddPartitionToTxnResponse()
	}
	if a := addPartition(4); a.GetRequestId() != 4 || a.Error != nil || a.GetTxnidLeastBits() != least {
		t.Fatalf("ADD_PARTITION_TO_TXN: %v", a)
	}
	if cmd := r.openProducer(topic, 1, 5, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER: %v", cmd)
	}
	if got := r.sendTxnRaw(1, 0, most, least, "in"); got.GetType() != pb.BaseCommand_SEND_RECEIPT {
		t.Fatalf("SEND in the transaction: %v", got)
	}
	endTxn := func(req uint64, action pb.TxnAction) *pb.CommandEndTxnResponse {
		return r.request(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{RequestId: ptr(req),
			TxnidMostBits: ptr(most), TxnidLeastBits: ptr(least), TxnAction: action.Enum()}}).GetEndTxnResponse()
	}
	if e := endTxn(6, pb.TxnAction_COMMIT); e.GetRequestId() != 6 || e.Error != nil {
		t.Fatalf("END_TXN: %v", e)
	}
	if e := endTxn(7, pb.TxnAction_ABORT); e.GetError() != pb.ServerError_TransactionNotFound {
		t.Fatalf("END_TXN of an ended transaction: %v, want TransactionNotFound", e)
	}
	if a := addPartition(8); a.GetError() != pb.ServerError_TransactionNotFound {
		t.Fatalf("ADD_PARTITION_TO_TXN of an ended transaction: %v, want TransactionNotFound", a)
	}
	if got := r.sendTxnRaw(1, 1, most, least, "late"); got.GetType() != pb.BaseCommand_SEND_ERROR ||
		got.GetSendError().GetError() != pb.ServerError_InvalidTxnStatus {
		t.Fatalf("SEND in a transaction its topic saw end: %v, want SEND_ERROR InvalidTxnStatus", got)
	}
	if got := r.sendTxnRaw(1, 2, most, least+100, "never opened"); got.GetType() != pb.BaseCommand_SEND_ERROR ||
		got.GetSendError().GetError() != pb.ServerError_InvalidTxnStatus {
		t.Fatalf("SEND in a transaction its coordinator does not know: %v, want SEND_ERROR InvalidTxnStatus", got)
	}
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_PARTITION.Enum(), EndTxnOnPartition: &pb.CommandEndTxnOnPartition{
		RequestId: ptr(uint64(9)), TxnidMostBits: ptr(most), TxnidLeastBits: ptr(least), Topic: ptr(topic), TxnAction: pb.TxnAction_COMMIT.Enum()}})
	if e := got.GetEndTxnOnPartitionResponse(); e.GetRequestId() != 9 || e.Error != nil {
		t.Fatalf("END_TXN_ON_PARTITION again (harmless): %v", got)
	}
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_SUBSCRIPTION.Enum(), EndTxnOnSubscription: &pb.CommandEndTxnOnSubscription{
		RequestId: ptr(uint64(10)), TxnidMostBits: ptr(most), TxnidLeastBits: ptr(least), TxnAction: pb.TxnAction_ABORT.Enum(),
		Subscription: &pb.Subscription{Topic: ptr(topic), Subscription: ptr("none")}}})
	if e := got.GetEndTxnOnSubscriptionResponse(); e.GetRequestId() != 10 || e.Error != nil {
		t.Fatalf("END_TXN_ON_SUBSCRIPTION of a subscription that does not exist: %v", got)
	}
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: ptr(uint64(11)),
		TcId: ptr(uint64(3))}})
	if e := got.GetNewTxnResponse(); e.GetError() != pb.ServerError_TransactionCoordinatorNotFound {
		t.Fatalf("NEW_TXN on coordinator 3 of 1: %v", got)
	}
}

// newTxnRaw opens a transaction on coordinator 0 over r and adds
// subscription sub of topic to it.
func (r *rawClient) newTxnRaw(req uint64, topic, sub string) (most, least uint64) {
	r.t.Helper()
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: ptr(req),
		TcId: ptr(uint64(0)), TxnTtlSeconds: ptr(uint64(time.Minute.Milliseconds()))}})
	nt := got.GetNewTxnResponse()
	if nt.Error != nil {
		r.t.Fatalf("NEW_TXN: %v", got)
	}
	most, least = nt.GetTxnidMostBits(), nt.GetTxnidLeastBits()
	got = r.request(&pb.BaseCommand{Type: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN.Enum(), AddSubscriptionToTxn: &pb.CommandAddSubscriptionToTxn{
		RequestId: ptr(req + 1), TxnidMostBits: ptr(most), TxnidLeastBits: ptr(least),
		Subscription: []*pb.Subscription{{Topic: ptr(topic), Subscription: ptr(sub)}}}})
	if got.GetAddSubscriptionToTxnResponse().Error != nil {
		r.t.Fatalf("ADD_SUBSCRIPTION_TO_TXN: %v", got)
	}
	return most, least
}

// ackTxnRaw sends an ACK of consumer 1 in a transaction and returns its
// ACK_RESPONSE.
func (r *rawClient) ackTxnRaw(req, most, least uint64, kind pb.CommandAck_AckType, ids ...*pb.MessageIdData) *pb.CommandAckResponse {
	r.t.Helper()
	return r.request(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: ptr(uint64(1)),
		AckType: kind.Enum(), MessageId: ids, RequestId: ptr(req), TxnidMostBits: ptr(most), TxnidLeastBits: ptr(least)}}).GetAckResponse()
}

// Cumulative and batch-index acknowledgements in transactions, raw (the
// Go client sends neither): one transaction at a time may hold a
// cumulative acknowledgement; it moves the mark-delete position on
// commit; a batch index held by one transaction conflicts with another's.
func TestProtocolTransactionalCumulativeAndBatchAcks(t *testing.T) {
	b, url := startTxnBroker(t, testLedgers(t, 0))
	const topic = "persistent://t/ns/txn-cumulative"
	r := dialRaw(t, url)
	r.connect()
	r.subscribeRaw(topic, "s", pb.CommandSubscribe_Exclusive)
	produce(t, newClient(t, url), topic, 4, false)
	tp, err := b.getTopic(context.Background(), mustTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	first := tp.ml.LastConfirmed()
	first.EntryID -= 3
	at := func(i int64) *pb.MessageIdData {
		return messageID(managedledger.Position{LedgerID: first.LedgerID, EntryID: first.EntryID + i})
	}
	m1, l1 := r.newTxnRaw(10, topic, "s")
	m2, l2 := r.newTxnRaw(20, topic, "s")
	if a := r.ackTxnRaw(30, m1, l1, pb.CommandAck_Cumulative, at(1)); a.Error != nil {
		t.Fatalf("cumulative ack in the first transaction: %v", a)
	}
	if a := r.ackTxnRaw(31, m2, l2, pb.CommandAck_Cumulative, at(2)); a.GetError() != pb.ServerError_TransactionConflict {
		t.Fatalf("cumulative ack in a second transaction: %v, want TransactionConflict", a)
	}
	half := &pb.MessageIdData{LedgerId: at(3).LedgerId, EntryId: at(3).EntryId, AckSet: []int64{^int64(1)}}
	if a := r.ackTxnRaw(32, m2, l2, pb.CommandAck_Individual, half); a.Error != nil {
		t.Fatalf("batch-index ack in the second transaction: %v", a)
	}
	if a := r.ackTxnRaw(33, m1, l1, pb.CommandAck_Individual, at(3)); a.GetError() != pb.ServerError_TransactionConflict {
		t.Fatalf("the first transaction acknowledging what the second holds: %v, want TransactionConflict", a)
	}
	tp.mu.Lock()
	s := tp.subs["s"]
	tp.mu.Unlock()
	if md := s.cursor.MarkDeletePosition(); md.Compare(first) >= 0 {
		t.Fatalf("mark-delete at %v before the commit", md)
	}
	got := r.request(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{RequestId: ptr(uint64(40)),
		TxnidMostBits: ptr(m1), TxnidLeastBits: ptr(l1), TxnAction: pb.TxnAction_COMMIT.Enum()}})
	if got.GetEndTxnResponse().Error != nil {
		t.Fatalf("commit: %v", got)
	}
	if md := s.cursor.MarkDeletePosition(); md.Compare(managedledger.Position{LedgerID: first.LedgerID, EntryID: first.EntryID + 1}) != 0 {
		t.Fatalf("mark-delete at %v after the commit, want the cumulative position", md)
	}
}
