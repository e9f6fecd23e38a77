package broker

// Protocol versions: a client that announces an older version in CONNECT
// gets only what that version knows, as Pulsar's broker gates it (issue
// 28 item 4; protocolgate.go).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// connectAs sends CONNECT announcing protocol version v and returns
// CONNECTED.
func (r *rawClient) connectAs(v int32, flags *pb.FeatureFlags) *pb.CommandConnected {
	r.t.Helper()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: ptr("raw-test"), ProtocolVersion: ptr(v), FeatureFlags: flags}})
	cmd, err := r.read()
	if err != nil || cmd.GetType() != pb.BaseCommand_CONNECTED {
		r.t.Fatalf("CONNECT v%d answered %v, %v", v, cmd.GetType(), err)
	}
	return cmd.GetConnected()
}

// readFrame returns the next frame's command and the bytes after it (a
// MESSAGE's entry, as sent), without checking them.
func (r *rawClient) readFrame() (*pb.BaseCommand, []byte, error) {
	for {
		frame, err := nextFrame(r.conn, 10*time.Second)
		if err != nil {
			return nil, nil, err
		}
		buf := frame[4:]
		n := binary.BigEndian.Uint32(buf)
		var cmd pb.BaseCommand
		if err := proto.Unmarshal(buf[4:4+n], &cmd); err != nil {
			r.t.Fatalf("broker sent a bad command: %v", err)
		}
		if cmd.GetType() != pb.BaseCommand_ACTIVE_CONSUMER_CHANGE || r.seeActiveChanges {
			return &cmd, buf[4+n:], nil
		}
	}
}

// subscribeRaw subscribes consumer id 1 (request id 1) and asks for 100
// messages.
func (r *rawClient) subscribeRaw(topic, sub string, subType pb.CommandSubscribe_SubType) {
	r.t.Helper()
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: ptr(topic), Subscription: ptr(sub), SubType: subType.Enum(),
		ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(1)), InitialPosition: pb.CommandSubscribe_Earliest.Enum()}})
	if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_SUCCESS {
		r.t.Fatalf("subscribe: %v %v", cmd, err)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)), MessagePermits: ptr(uint32(100))}})
}

// closedOrSilent reports whether the connection was closed (true) or
// answered a PING with nothing else before the PONG (false); anything
// else fails the test.
func closedOrSilent(t *testing.T, r *rawClient) bool {
	t.Helper()
	r.conn.Write(pingFrame(t)) // may fail on a closed connection
	for {
		cmd, _, err := r.readFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("neither closed nor answering")
			}
			return true
		}
		if cmd.GetType() == pb.BaseCommand_PONG {
			return false
		}
		t.Fatalf("unexpected %v", cmd.GetType())
	}
}

func pingFrame(t *testing.T) []byte {
	b, err := wire.AppendSimpleFrame(nil, &pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// CONNECTED answers the lower of the client's version and ours, and
// advertises only features Magnetar has: no auth refresh, no partial
// producers; broker entry metadata is understood.
func TestProtocolConnectedVersionAndFeatures(t *testing.T) {
	_, url := startBroker(t)
	for announced, want := range map[int32]int32{1: 1, 8: 8, 20: 20, 99: maxProtocolVersion} {
		r := dialRaw(t, url)
		got := r.connectAs(announced, nil)
		if got.GetProtocolVersion() != want {
			t.Fatalf("client v%d: CONNECTED says v%d, want v%d", announced, got.GetProtocolVersion(), want)
		}
		f := got.GetFeatureFlags()
		if got.ServerVersion == nil || got.GetMaxMessageSize() <= 0 || f.GetSupportsAuthRefresh() || f.GetSupportsPartialProducer() ||
			!f.GetSupportsBrokerEntryMetadata() {
			t.Fatalf("CONNECTED %v", got)
		}
	}
}

// Payloads keep their CRC32C from v11 on; a v10 client gets them without
// the 0x0e01 magic and checksum (Pulsar: skipChecksumIfPresent).
func TestProtocolChecksumFromV11(t *testing.T) {
	_, url := startBroker(t)
	produce(t, newClient(t, url), "crc-gate", 1, false)
	for v, withCRC := range map[int32]bool{10: false, 11: true} {
		r := dialRaw(t, url)
		r.connectAs(v, nil)
		r.subscribeRaw("crc-gate", fmt.Sprint("s", v), pb.CommandSubscribe_Exclusive)
		for {
			cmd, entry, err := r.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if cmd.GetType() != pb.BaseCommand_MESSAGE {
				continue
			}
			hasMagic := len(entry) > 2 && binary.BigEndian.Uint16(entry) == wire.MagicChecksum
			if hasMagic != withCRC {
				t.Fatalf("v%d client: payload with checksum %v, want %v", v, hasMagic, withCRC)
			}
			if !withCRC { // what follows is [metadataSize][metadata][payload]
				var md pb.MessageMetadata
				n := binary.BigEndian.Uint32(entry)
				if err := proto.Unmarshal(entry[4:4+n], &md); err != nil || md.GetProducerName() == "" {
					t.Fatalf("v%d client: metadata %v %v", v, &md, err)
				}
			}
			break
		}
	}
}

// Broker entry metadata goes only to clients of v18 and newer that asked
// for it (Pulsar: remote version >= v18 and supportsBrokerEntryMetadata).
func TestProtocolBrokerEntryMetadataFromV18(t *testing.T) {
	_, url := startStampingBroker(t, testLedgers(t, 0), true)
	produce(t, newClient(t, url), "bem-gate", 1, false)
	for v, want := range map[int32]bool{17: false, 18: true} {
		r := dialRaw(t, url)
		r.connectAs(v, &pb.FeatureFlags{SupportsBrokerEntryMetadata: ptr(true)})
		r.subscribeRaw("bem-gate", fmt.Sprint("s", v), pb.CommandSubscribe_Exclusive)
		for {
			cmd, entry, err := r.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if cmd.GetType() != pb.BaseCommand_MESSAGE {
				continue
			}
			if got := binary.BigEndian.Uint16(entry) == wire.MagicBrokerEntryMetadata; got != want {
				t.Fatalf("v%d client: broker entry metadata %v, want %v", v, got, want)
			}
			break
		}
	}
}

// ACTIVE_CONSUMER_CHANGE goes to clients of v12 and newer only
// (Pulsar: peerSupportsActiveConsumerListener).
func TestProtocolActiveConsumerChangeFromV12(t *testing.T) {
	_, url := startBroker(t)
	for v, want := range map[int32]bool{11: false, 12: true} {
		r := dialRaw(t, url)
		r.seeActiveChanges = true
		r.connectAs(v, nil)
		r.subscribeRaw("active-gate", fmt.Sprint("s", v), pb.CommandSubscribe_Failover)
		if want {
			// Sent activeChangeDelay after the subscribe: read until it
			// comes (read fails after 10 s).
			for {
				cmd, err := r.read()
				if err != nil {
					t.Fatalf("v%d client: no ACTIVE_CONSUMER_CHANGE: %v", v, err)
				}
				if cmd.GetType() == pb.BaseCommand_ACTIVE_CONSUMER_CHANGE {
					break
				}
			}
			continue
		}
		// The negative case: nothing by three times the delay, then the
		// PING's answer closes the window.
		time.Sleep(3 * activeChangeDelay)
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
		got := false
		for {
			cmd, err := r.read()
			if err != nil {
				t.Fatal(err)
			}
			if cmd.GetType() == pb.BaseCommand_ACTIVE_CONSUMER_CHANGE {
				got = true
			}
			if cmd.GetType() == pb.BaseCommand_PONG {
				break
			}
		}
		if got != want {
			t.Fatalf("v%d client: ACTIVE_CONSUMER_CHANGE %v, want %v", v, got, want)
		}
	}
}

// REACHED_END_OF_TOPIC goes to clients of v9 and newer only.
func TestProtocolReachedEndOfTopicFromV9(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	const topic = "persistent://public/default/end-gate"
	produce(t, newClient(t, env.url), topic, 1, false)
	old, cur := dialRaw(t, env.url), dialRaw(t, env.url)
	old.connectAs(8, nil)
	cur.connectAs(9, nil)
	for i, r := range []*rawClient{old, cur} {
		r.subscribeRaw(topic, fmt.Sprint("s", i), pb.CommandSubscribe_Exclusive)
		for { // a v8 client's messages have no checksum: read as sent
			cmd, _, err := r.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if cmd.GetType() == pb.BaseCommand_MESSAGE {
				break
			}
		}
	}
	if _, err := env.admin.Topics().Terminate(topicName(t, topic)); err != nil {
		t.Fatal(err)
	}
	if cmd, err := cur.read(); err != nil || cmd.GetType() != pb.BaseCommand_REACHED_END_OF_TOPIC {
		t.Fatalf("v9 client got %v %v", cmd, err)
	}
	if closedOrSilent(t, old) {
		t.Fatal("v8 client's connection was closed")
	}
}

// A producer the broker closes is told with CLOSE_PRODUCER from v5 on;
// an older client's connection is closed instead (Pulsar:
// ServerCnx.closeProducer / closeConsumer).
func TestProtocolCloseFromBrokerFromV5(t *testing.T) {
	_, url := startBroker(t)
	for v, told := range map[int32]bool{4: false, 5: true} {
		topic := fmt.Sprint("fence-gate-", v)
		r := dialRaw(t, url)
		r.connectAs(v, nil)
		if cmd := r.openProducer(topic, 1, 1, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatalf("producer: %v", cmd)
		}
		fencer := dialRaw(t, url)
		fencer.connect()
		if cmd := fencer.openProducer(topic, 1, 1, pb.ProducerAccessMode_ExclusiveWithFencing); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatalf("fencing producer: %v", cmd)
		}
		if !told {
			if !closedOrSilent(t, r) {
				t.Fatalf("v%d client: connection kept and nothing said", v)
			}
			continue
		}
		if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_CLOSE_PRODUCER {
			t.Fatalf("v%d client got %v %v", v, cmd, err)
		}
	}
}

// Batches need v4: an older consumer is disconnected rather than sent
// one (Pulsar: isBatchMessageCompatibleVersion).
func TestProtocolBatchesFromV4(t *testing.T) {
	_, url := startBroker(t)
	p := dialRaw(t, url)
	p.connect()
	if cmd := p.openProducer("batch-gate", 1, 1, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("producer: %v", cmd)
	}
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: ptr("p"), SequenceId: ptr(uint64(0)),
		PublishTime: ptr(uint64(1)), NumMessagesInBatch: ptr(int32(3))}, []byte("three messages"))
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: ptr(uint64(1)), SequenceId: ptr(uint64(0)), NumMessages: ptr(int32(3))}}, nil, len(entry))
	if err != nil {
		t.Fatal(err)
	}
	p.write(append(hdr, entry...))
	if cmd, err := p.read(); err != nil || cmd.GetType() != pb.BaseCommand_SEND_RECEIPT {
		t.Fatalf("SEND answered %v %v", cmd, err)
	}
	r := dialRaw(t, url)
	r.connectAs(3, nil)
	r.subscribeRaw("batch-gate", "s", pb.CommandSubscribe_Exclusive)
	for {
		cmd, _, err := r.readFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("connection was not closed")
			}
			return
		}
		if cmd.GetType() == pb.BaseCommand_MESSAGE {
			t.Fatalf("a v3 client was sent a batch: %v", cmd)
		}
	}
}
