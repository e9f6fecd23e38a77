package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// rawProducer publishes over the binary protocol with frames built by
// package wire, one SEND at a time. Tests that make a broker refuse and
// then accept sends use it instead of the Go client: pulsar-client-go
// v0.19 races with itself when a producer reconnects while it sends (its
// reconnect writes the producer name its send loop reads), and the race
// detector fails the test for it.
type rawProducer struct {
	conn net.Conn
	seq  uint64
}

// dialRawProducer connects to addr and opens a producer on topic.
func dialRawProducer(addr, topic string) (*rawProducer, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	p := &rawProducer{conn: c}
	if err := p.request(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: proto.String("magnetar-test"), ProtocolVersion: proto.Int32(20)}}, pb.BaseCommand_CONNECTED); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := p.request(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: &topic, ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String("raw-full-disk")}},
		pb.BaseCommand_PRODUCER_SUCCESS); err != nil {
		c.Close()
		return nil, fmt.Errorf("producer: %w", err)
	}
	return p, nil
}

func (p *rawProducer) request(cmd *pb.BaseCommand, want pb.BaseCommand_Type) error {
	frame, err := wire.AppendSimpleFrame(nil, cmd)
	if err != nil {
		return err
	}
	if _, err := p.conn.Write(frame); err != nil {
		return err
	}
	return p.await(want)
}

// await reads until a command of type want (nil), an error answer, or
// the deadline.
func (p *rawProducer) await(want pb.BaseCommand_Type) error {
	_ = p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var size [4]byte
		if _, err := io.ReadFull(p.conn, size[:]); err != nil {
			return err
		}
		buf := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
		copy(buf, size[:])
		if _, err := io.ReadFull(p.conn, buf[4:]); err != nil {
			return err
		}
		var cmd pb.BaseCommand
		if _, _, err := wire.ParseFrame(buf, len(buf), &cmd); err != nil {
			return err
		}
		switch cmd.GetType() {
		case want:
			return nil
		case pb.BaseCommand_ERROR:
			return fmt.Errorf("%v: %s", cmd.GetError().GetError(), cmd.GetError().GetMessage())
		case pb.BaseCommand_SEND_ERROR:
			return fmt.Errorf("%v: %s", cmd.GetSendError().GetError(), cmd.GetSendError().GetMessage())
		case pb.BaseCommand_PING:
			pong, _ := wire.AppendSimpleFrame(nil, &pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
			if _, err := p.conn.Write(pong); err != nil {
				return err
			}
		}
	}
}

// send publishes payload and waits for its receipt; an error is the
// broker's refusal or a broken connection.
func (p *rawProducer) send(payload []byte) error {
	p.seq++
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: proto.String("raw-full-disk"), SequenceId: &p.seq,
		PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}, payload)
	if err != nil {
		return err
	}
	hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: proto.Uint64(1), SequenceId: &p.seq}}, nil, len(entry))
	if err != nil {
		return err
	}
	if _, err := p.conn.Write(append(hdr, entry...)); err != nil {
		return err
	}
	return p.await(pb.BaseCommand_SEND_RECEIPT)
}

func (p *rawProducer) close() { p.conn.Close() }
