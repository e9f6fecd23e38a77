package broker

import (
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// sendTxnRaw sends one SEND of a message in transaction (most, least).
func (r *rawClient) sendTxnRaw(producerID, seq, most, least uint64, payload string) *pb.BaseCommand {
	r.t.Helper()
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: ptr("p"), SequenceId: ptr(seq),
		PublishTime: ptr(uint64(1))}, []byte(payload))
	if err != nil {
		r.t.Fatal(err)
	}
	hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: ptr(producerID), SequenceId: ptr(seq), NumMessages: ptr(int32(1)),
		TxnidMostBits: ptr(most), TxnidLeastBits: ptr(least)}}, nil, len(entry))
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
