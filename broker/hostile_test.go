package broker

// Hostile input: commands a buggy or malicious client may send. Each must
// close that connection (or answer Pulsar's error) and never reach a
// handler in a state it cannot handle; the process must survive.

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// commandsServed are the command types dispatch hands to a handler.
var commandsServed = []pb.BaseCommand_Type{
	pb.BaseCommand_PING, pb.BaseCommand_PONG, pb.BaseCommand_LOOKUP, pb.BaseCommand_PARTITIONED_METADATA,
	pb.BaseCommand_PRODUCER, pb.BaseCommand_SEND, pb.BaseCommand_CLOSE_PRODUCER, pb.BaseCommand_SUBSCRIBE,
	pb.BaseCommand_FLOW, pb.BaseCommand_ACK, pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES,
	pb.BaseCommand_CLOSE_CONSUMER, pb.BaseCommand_UNSUBSCRIBE, pb.BaseCommand_GET_LAST_MESSAGE_ID,
	pb.BaseCommand_CONSUMER_STATS, pb.BaseCommand_GET_TOPICS_OF_NAMESPACE, pb.BaseCommand_SEEK,
	pb.BaseCommand_GET_SCHEMA, pb.BaseCommand_GET_OR_CREATE_SCHEMA,
}

// The frame from the report: a BaseCommand of type ACK with no ack field.
// It killed the process with a nil pointer in handleAck.
func TestAckWithoutBodyClosesConnection(t *testing.T) {
	b, url := startBroker(t)
	frame, err := hex.DecodeString("0000000600000002080a")
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, url)
	r.connect()
	r.write(frame)
	expectClosed(t, r)
	expectServing(t, url)
	if n := b.panics.total(); n != 0 {
		t.Fatalf("the missing body reached a handler: %d panics recovered", n)
	}
}

// Every served command without its body, or with another command's body
// instead, closes the connection before any handler runs.
func TestCommandWithoutItsBodyClosesConnection(t *testing.T) {
	b, url := startBroker(t)
	for _, typ := range commandsServed {
		for _, cmd := range []*pb.BaseCommand{
			{Type: typ.Enum()},
			{Type: typ.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)), MessagePermits: ptr(uint32(1))}},
		} {
			if cmd.Flow != nil && typ == pb.BaseCommand_FLOW {
				continue
			}
			r := dialRaw(t, url)
			r.connect()
			r.send(cmd)
			expectClosed(t, r)
		}
	}
	expectServing(t, url)
	if n := b.panics.total(); n != 0 {
		t.Fatalf("a missing body reached a handler: %d panics recovered", n)
	}
}

// expectServing checks a new connection still gets PONG for PING.
func expectServing(t *testing.T, url string) {
	t.Helper()
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_PONG {
		t.Fatalf("broker no longer serving: %v %v", cmd.GetType(), err)
	}
}

// A topic name that is not valid UTF-8 used to be stored as it was and
// to crash the process at the next metrics scrape (prometheus refuses
// such label values with a panic). Strings are decoded as Pulsar's
// decoder does: each invalid byte becomes U+FFFD.
func TestInvalidUTF8TopicNameIsReplaced(t *testing.T) {
	b, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	cmd := r.openProducer("persistent://public/default/\xff\xfe", 1, 1, pb.ProducerAccessMode_Shared)
	if cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER answered %v", cmd)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(b))
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	want := "persistent://public/default/\uFFFD\uFFFD"
	found := false
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == "topic" && l.GetValue() == want)
			}
		}
	}
	if !found {
		t.Fatalf("no metric for topic %q", want)
	}
}

// Control characters in a topic name answer InvalidTopicName (not
// retriable), not ServiceNotReady, which clients retry for ever.
func TestControlCharactersInTopicNameAreInvalid(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	for i, name := range []string{"persistent://public/default/a\x01b", "persistent://public/default/a\x7fb",
		"persistent://pub\tlic/default/x", "persistent://public/de fault/x", "persistent://public/default/" + strings.Repeat("x", 5000)} {
		cmd := r.openProducer(name, uint64(i+1), uint64(i+1), pb.ProducerAccessMode_Shared)
		if cmd.GetType() != pb.BaseCommand_ERROR || cmd.GetError().GetError() != pb.ServerError_InvalidTopicName {
			t.Fatalf("PRODUCER on %q answered %v", name, cmd)
		}
	}
}

// Pipelined PRODUCER commands reusing a producer id: the second is
// answered from the first's PRODUCER_SUCCESS while that may still be
// being encoded. Copying the message raced with its encoding (the race
// detector reported it).
func TestRepeatedProducerAnswerDoesNotRace(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	producerCmd := func(id, req uint64) *pb.BaseCommand {
		return &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: ptr("race"), ProducerId: ptr(id), RequestId: ptr(req)}}
	}
	const n = 300
	for id := uint64(1); id <= n; id++ {
		r.send(producerCmd(id, 2*id))
		r.send(producerCmd(id, 2*id+1))
	}
	answers := map[uint64]*pb.BaseCommand{}
	for len(answers) < 2*n {
		cmd, err := r.read()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(answers), err)
		}
		req := cmd.GetProducerSuccess().GetRequestId()
		if cmd.GetType() == pb.BaseCommand_ERROR {
			req = cmd.GetError().GetRequestId()
		}
		answers[req] = cmd
	}
	for id := uint64(1); id <= n; id++ {
		first, again := answers[2*id], answers[2*id+1]
		if first.GetType() != pb.BaseCommand_PRODUCER_SUCCESS && again.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatalf("producer %d: neither request succeeded: %v, %v", id, first, again)
		}
		if first.GetType() != again.GetType() {
			continue // one was answered "still being created"
		}
		want := proto.Clone(first.GetProducerSuccess()).(*pb.CommandProducerSuccess)
		want.RequestId = ptr(2*id + 1)
		if !proto.Equal(want, again.GetProducerSuccess()) {
			t.Fatalf("repeated PRODUCER answered %v, want %v", again.GetProducerSuccess(), want)
		}
	}
}

// A panic in a command's handler closes that connection, is counted, and
// the broker keeps serving.
func TestPanicInHandlerClosesOnlyThatConnection(t *testing.T) {
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, testLedgers(t, 50))
	b.testHookCommand = func(cmd *pb.BaseCommand) {
		if cmd.GetType() == pb.BaseCommand_CONSUMER_STATS {
			panic("injected")
		}
	}
	url := serveTestBroker(t, b)
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS.Enum(), ConsumerStats: &pb.CommandConsumerStats{
		RequestId: ptr(uint64(1)), ConsumerId: ptr(uint64(1))}})
	expectClosed(t, r)
	expectServing(t, url)
	if n := b.panics.get(boundaryCommand); n != 1 {
		t.Fatalf("recovered panics at the command boundary: %d, want 1", n)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(b))
	if got := testutil.ToFloat64(panicsMetric(t, reg, boundaryCommand.String())); got != 1 {
		t.Fatalf("magnetar_broker_recovered_panics_total{boundary=command} = %v", got)
	}
}

// panicsMetric is the recovered-panics counter of one boundary, gathered.
func panicsMetric(t *testing.T, reg *prometheus.Registry, boundary string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "magnetar_broker_recovered_panics_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == boundary {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, m.GetCounter().GetValue)
			}
		}
	}
	t.Fatalf("no recovered-panics metric for %s", boundary)
	return nil
}

// A panic in a goroutine a command started closes the connection.
func TestPanicInCommandGoroutineClosesConnection(t *testing.T) {
	b, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	var sc *serverConn
	b.mu.Lock()
	for c := range b.conns {
		sc = c
	}
	b.mu.Unlock()
	sc.goSafe("TEST", func() { panic("injected") })
	expectClosed(t, r)
	if n := b.panics.get(boundaryGoroutine); n != 1 {
		t.Fatalf("recovered panics at the goroutine boundary: %d, want 1", n)
	}
}

// A panicking HTTP handler answers 500 and is counted; the server lives.
func TestPanicInHTTPHandlerAnswers500(t *testing.T) {
	b, _ := startBroker(t)
	h := b.recoverHTTP(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("injected") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/admin/v2/x", nil))
	if rec.Code != http.StatusInternalServerError || b.panics.get(boundaryHTTP) != 1 {
		t.Fatalf("answered %d, %d panics counted", rec.Code, b.panics.get(boundaryHTTP))
	}
}

// A panic while collecting one topic's metrics skips that topic only.
func TestPanicInMetricsCollectorIsRecovered(t *testing.T) {
	b, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	if cmd := r.openProducer("metrics-panic", 1, 1, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER answered %v", cmd)
	}
	m := NewMetrics(b)
	m.last = nil // writing to a nil map panics inside collectTopic
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
	if n := b.panics.get(boundaryMetrics); n != 1 {
		t.Fatalf("recovered panics at the metrics boundary: %d, want 1", n)
	}
}

// Commands only brokers send close the connection, as Pulsar's decoder
// does; a SEND for a producer never opened closes it too, while a SEND
// for a producer just closed (in flight when it closed) is ignored.
func TestClientOnlyCommandsAndStraySendsClose(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
		ProducerId: ptr(uint64(1)), SequenceId: ptr(uint64(1))}})
	expectClosed(t, r)

	r = dialRaw(t, url)
	r.connect()
	r.write(sendFrame(t, 7, 0))
	expectClosed(t, r)

	r = dialRaw(t, url)
	r.connect()
	if cmd := r.openProducer("stray", 3, 1, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER answered %v", cmd)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{
		ProducerId: ptr(uint64(3)), RequestId: ptr(uint64(2))}})
	r.write(sendFrame(t, 3, 0))
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	for _, want := range []pb.BaseCommand_Type{pb.BaseCommand_SUCCESS, pb.BaseCommand_PONG} {
		if cmd, err := r.read(); err != nil || cmd.GetType() != want {
			t.Fatalf("got %v %v, want %v", cmd.GetType(), err, want)
		}
	}
}

func sendFrame(t *testing.T, producerID, seq uint64) []byte {
	t.Helper()
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: ptr("p"), SequenceId: ptr(seq),
		PublishTime: ptr(uint64(1))}, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: ptr(producerID), SequenceId: ptr(seq)}}, nil, len(entry))
	if err != nil {
		t.Fatal(err)
	}
	return append(hdr, entry...)
}

// An ACK with more ids than the loop serves inline is served off it, in
// order with the commands after it: the ACK_RESPONSE comes before PONG.
func TestLargeAckIsServedInOrder(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	ids := make([]*pb.MessageIdData, 3*offloadAbove)
	for i := range ids {
		ids[i] = &pb.MessageIdData{LedgerId: ptr(uint64(1)), EntryId: ptr(uint64(i))}
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: ptr(uint64(9)),
		AckType: pb.CommandAck_Individual.Enum(), MessageId: ids, RequestId: ptr(uint64(5))}})
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	for _, want := range []pb.BaseCommand_Type{pb.BaseCommand_ACK_RESPONSE, pb.BaseCommand_PONG} {
		if cmd, err := r.read(); err != nil || cmd.GetType() != want {
			t.Fatalf("got %v %v, want %v", cmd.GetType(), err, want)
		}
	}
}

// Metadata that does not decode, under a valid checksum, and an entry too
// large for storage are refused at SEND with NotAllowedError (Pulsar's
// answer to an oversized message): nothing is stored that every read
// would fail on.
func TestUndecodableMetadataAndOversizedEntriesAreRefused(t *testing.T) {
	_, url := startBroker(t)
	r := dialRaw(t, url)
	r.connect()
	if cmd := r.openProducer("bad-entries", 1, 1, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER answered %v", cmd)
	}
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: ptr("p"), SequenceId: ptr(uint64(0)),
		PublishTime: ptr(uint64(1))}, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	entry[10] = 0xff // the first metadata tag: field 31 with wire type 7, which does not exist
	e, err := wire.ParseEntry(entry)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(entry[2:], e.ComputeChecksum())
	// The largest entry a frame can carry: fine as sent, too large once
	// the broker's entry metadata would be put in front of it.
	md := &pb.MessageMetadata{ProducerName: ptr("p"), SequenceId: ptr(uint64(1)), PublishTime: ptr(uint64(1))}
	small, err := wire.AppendEntry(nil, md, nil)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: ptr(uint64(1)), SequenceId: ptr(uint64(1))}}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	entryLen := wire.DefaultMaxFrameSize - (len(hdr) - 4)
	big, err := wire.AppendEntry(nil, md, make([]byte, entryLen-len(small)))
	if err != nil {
		t.Fatal(err)
	}
	for seq, e := range [][]byte{entry, big} {
		hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: ptr(uint64(1)), SequenceId: ptr(uint64(seq))}}, nil, len(e))
		if err != nil {
			t.Fatal(err)
		}
		r.write(append(hdr, e...))
		cmd, err := r.read()
		if err != nil || cmd.GetType() != pb.BaseCommand_SEND_ERROR || cmd.GetSendError().GetError() != pb.ServerError_NotAllowedError {
			t.Fatalf("SEND %d answered %v %v", seq, cmd, err)
		}
	}
}
