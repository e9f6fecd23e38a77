package hostile

// The binary-protocol categories.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// frame wraps command bytes (and an optional payload) with sizes that
// agree with them.
func frame(cmd, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(cmd)+len(payload)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(cmd)))
	b = append(b, cmd...)
	return append(b, payload...)
}

// frameSizes: totalSize and commandSize that disagree with each other or
// with what follows, from zero to far past the limit.
func (d *driver) frameSizes(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	sizes := []uint32{0, 1, 3, 4, 5, 8, 1 << 16, wire.DefaultMaxFrameSize, wire.DefaultMaxFrameSize + 1, math.MaxInt32, math.MaxUint32}
	total, cmdSize := sizes[d.rng.IntN(len(sizes))], sizes[d.rng.IntN(len(sizes))]
	body := d.bytes(d.rng.IntN(64))
	b := binary.BigEndian.AppendUint32(nil, total)
	b = binary.BigEndian.AppendUint32(b, cmdSize)
	b = append(b, body...)
	if err := c.write(b); err != nil {
		return d.abandon(c)
	}
	if uint64(total) > uint64(4+len(body)) && total <= wire.DefaultMaxFrameSize {
		return d.abandon(c) // the broker rightly waits for the rest
	}
	return d.settle(c)
}

// truncated: a valid frame cut short, then the connection closed.
func (d *driver) truncated(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	b := d.validFrame()
	_ = c.write(b[:d.rng.IntN(len(b))])
	return d.abandon(c)
}

// randomBytes: junk, before or after CONNECT.
func (d *driver) randomBytes(ctx context.Context) error {
	var c *conn
	var err error
	if d.rng.IntN(2) == 0 {
		c, err = d.connected(ctx)
	} else {
		c, err = d.dial(ctx)
	}
	if err != nil {
		return err
	}
	if err := c.write(d.bytes(1 + d.rng.IntN(512))); err != nil {
		return d.abandon(c)
	}
	return d.abandon(c) // junk may announce a size the broker waits for
}

// beforeConnect: any valid command before CONNECT closes the connection.
func (d *driver) beforeConnect(ctx context.Context) error {
	c, err := d.dial(ctx)
	if err != nil {
		return err
	}
	if err := c.write(d.validFrame()); err != nil {
		return d.abandon(c)
	}
	for {
		cmd, err := c.read()
		if err != nil {
			c.close()
			if err == errClosed {
				d.report.Closed++
				return nil
			}
			return fmt.Errorf("command before CONNECT: connection neither closed nor answered: %w", err)
		}
		if cmd.GetType() != pb.BaseCommand_CONNECTED {
			c.close()
			return fmt.Errorf("command before CONNECT answered %s", cmd.GetType())
		}
	}
}

// mutatedCommand: a valid command's protobuf bytes with bits flipped,
// bytes inserted, deleted or duplicated, or its type swapped; the frame
// sizes agree with the mutated bytes.
func (d *driver) mutatedCommand(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	cmd, err := proto.Marshal(d.validCommand())
	if err != nil {
		return err
	}
	for range 1 + d.rng.IntN(4) {
		cmd = d.mutate(cmd)
	}
	if len(cmd) == 0 {
		cmd = []byte{0}
	}
	if err := c.write(frame(cmd, nil)); err != nil {
		return d.abandon(c)
	}
	return d.settle(c)
}

func (d *driver) mutate(b []byte) []byte {
	if len(b) == 0 {
		return d.bytes(4)
	}
	i := d.rng.IntN(len(b))
	switch d.rng.IntN(6) {
	case 0:
		b[i] ^= 1 << d.rng.IntN(8)
	case 1:
		b = append(b[:i], append(d.bytes(1+d.rng.IntN(8)), b[i:]...)...)
	case 2:
		b = append(b[:i], b[min(len(b), i+1+d.rng.IntN(8)):]...)
	case 3:
		b = append(b, b[i:]...) // repeated fields and duplicated bodies
	case 4:
		b[i] = []byte{0x00, 0x7f, 0x80, 0xff}[d.rng.IntN(4)]
	default:
		other, _ := proto.Marshal(d.validCommand())
		b = append(b, other...) // two bodies, the later type wins
	}
	return b
}

// badSend: a producer, then SENDs with broken payloads: wrong magic, bad
// checksums, metadata sizes past the end, metadata that does not decode
// under a valid checksum, batch counts that lie, no payload at all.
func (d *driver) badSend(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	topic := fmt.Sprintf("persistent://public/default/hostile-send-%d", d.rng.IntN(4))
	if err := d.openProducer(c, topic, 1); err != nil {
		c.close()
		return err
	}
	for i := range 1 + d.rng.IntN(4) {
		send := &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: ptr(uint64(1 + d.rng.IntN(2))), SequenceId: ptr(uint64(i)),
			NumMessages: ptr(int32(d.pickInt([]int64{0, 1, -1, math.MaxInt32, 1000})))}}
		cmd, err := proto.Marshal(send)
		if err != nil {
			return err
		}
		if err := c.write(frame(cmd, d.badEntry())); err != nil {
			return d.abandon(c)
		}
	}
	return d.settle(c)
}

// badEntry is an entry (what follows the command in a SEND) broken one way.
func (d *driver) badEntry() []byte {
	md := &pb.MessageMetadata{ProducerName: ptr("hostile"), SequenceId: ptr(uint64(1)), PublishTime: ptr(uint64(time.Now().UnixMilli())),
		NumMessagesInBatch: ptr(int32(d.pickInt([]int64{1, 0, -5, 100000, math.MaxInt32})))}
	payload := d.bytes(d.rng.IntN(256))
	good, err := wire.AppendEntry(nil, md, payload)
	if err != nil {
		return nil
	}
	switch d.rng.IntN(7) {
	case 0:
		return nil // SEND without a payload
	case 1:
		good[0] = 0x0f // wrong magic
		return good
	case 2:
		good[2] ^= 0xff // bad checksum
		return good
	case 3:
		binary.BigEndian.PutUint32(good[6:], math.MaxUint32) // metadata size past the end
		return good
	case 4:
		return withChecksum(good, func(e []byte) { // metadata that does not decode, valid checksum
			for i := 10; i < len(e) && i < 10+8; i++ {
				e[i] = byte(d.rng.Uint32())
			}
		})
	case 5:
		return withChecksum(good, func(e []byte) { binary.BigEndian.PutUint32(e[6:], 0) }) // no metadata at all
	default:
		return good // a valid entry with lying batch counts
	}
}

// withChecksum applies damage after the checksum's coverage begins and
// recomputes it, so only the damage itself can be refused.
func withChecksum(entry []byte, damage func([]byte)) []byte {
	damage(entry)
	binary.BigEndian.PutUint32(entry[2:], crc32.Checksum(entry[6:], crc32.MakeTable(crc32.Castagnoli)))
	return entry
}

// oddNames: PRODUCER, SUBSCRIBE, LOOKUP and PARTITIONED_METADATA on names
// no one should send.
func (d *driver) oddNames(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	name := d.oddName()
	var cmd *pb.BaseCommand
	switch d.rng.IntN(4) {
	case 0:
		cmd = producerCommand(name, 1, 1)
	case 1:
		cmd = &pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: ptr(name),
			Subscription: ptr(d.oddName()), SubType: pb.CommandSubscribe_Shared.Enum(), ConsumerId: ptr(uint64(1)),
			RequestId: ptr(uint64(1))}}
	case 2:
		cmd = &pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{Topic: ptr(name),
			RequestId: ptr(uint64(1))}}
	default:
		cmd = &pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
			Topic: ptr(name), RequestId: ptr(uint64(1))}}
	}
	if err := c.send(cmd); err != nil {
		return d.abandon(c)
	}
	return d.settle(c)
}

var oddParts = []string{"", ".", "..", "%2e%2e", "%2F", "a/b", "a//b", "\xff\xfe", "\x00", "\x01", "\n", "\x7f", " ",
	"é", "日本", "💥", "%", "%zz", "+", "*", ":", "=", "?", "#", "\\", "..%2f..", "a b", strings.Repeat("x", 3000)}

func (d *driver) oddName() string {
	part := func() string {
		if d.rng.IntN(3) == 0 {
			return "ok"
		}
		return oddParts[d.rng.IntN(len(oddParts))]
	}
	switch d.rng.IntN(4) {
	case 0:
		return part()
	case 1:
		return part() + "/" + part() + "/" + part()
	case 2:
		return "persistent://" + part() + "/" + part() + "/" + part()
	default:
		return []string{"non-persistent", "persistent", "bogus", ""}[d.rng.IntN(4)] + "://public/default/" + part()
	}
}

// manyProducers: one connection opening hundreds of producers, some
// reusing ids, pipelined without waiting for answers.
func (d *driver) manyProducers(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	n := 100 + d.rng.IntN(900)
	for i := range n {
		topic := fmt.Sprintf("persistent://public/default/hostile-many-%d", d.rng.IntN(3))
		if err := c.send(producerCommand(topic, uint64(d.rng.IntN(n)), uint64(i))); err != nil {
			return d.abandon(c)
		}
	}
	return d.settle(c)
}

// hugeFlowAck: FLOW with the largest permits, ACKs and REDELIVERs with up
// to Config.MaxIDs ids (some far past the last entry), cumulative acks on a
// shared subscription of the well-behaved client's topic.
func (d *driver) hugeFlowAck(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	sub := fmt.Sprintf("hostile-sub-%d", d.rng.IntN(3))
	topic := d.cfg.Topic
	if topic == "" || d.rng.IntN(2) == 0 {
		topic = "persistent://public/default/hostile-ack"
	}
	_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: ptr(topic),
		Subscription: ptr(sub), SubType: pb.CommandSubscribe_Shared.Enum(), ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(1))}})
	ids := make([]*pb.MessageIdData, d.rng.IntN(d.cfg.MaxIDs))
	for i := range ids {
		ids[i] = &pb.MessageIdData{LedgerId: ptr(uint64(d.pickInt([]int64{0, 1, 2, math.MaxInt64, -1}))),
			EntryId: ptr(uint64(d.rng.Int64())), AckSet: d.ackSet()}
	}
	cmds := []*pb.BaseCommand{
		{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)), MessagePermits: ptr(uint32(math.MaxUint32))}},
		{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: ptr(uint64(1)),
			AckType:   []pb.CommandAck_AckType{pb.CommandAck_Individual, pb.CommandAck_Cumulative}[d.rng.IntN(2)].Enum(),
			MessageId: ids, RequestId: ptr(uint64(2))}},
		{Type: pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(), RedeliverUnacknowledgedMessages: &pb.CommandRedeliverUnacknowledgedMessages{
			ConsumerId: ptr(uint64(1)), MessageIds: ids}},
	}
	for range 1 + d.rng.IntN(3) {
		if err := c.send(cmds[d.rng.IntN(len(cmds))]); err != nil {
			return d.abandon(c)
		}
	}
	return d.settle(c)
}

func (d *driver) ackSet() []int64 {
	if d.rng.IntN(4) != 0 {
		return nil
	}
	return []int64{d.rng.Int64(), -1, 0}[:1+d.rng.IntN(3)]
}

// slowConsumer: subscribes with all the permits it can, then does not
// read for a while; the broker must keep serving others.
func (d *driver) slowConsumer(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	topic := d.cfg.Topic
	if topic == "" {
		topic = "persistent://public/default/hostile-slow"
	}
	_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: ptr(topic),
		Subscription: ptr(fmt.Sprintf("hostile-slow-%d", d.rng.IntN(2))), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(1)),
		InitialPosition: pb.CommandSubscribe_Earliest.Enum()}})
	_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(uint64(1)),
		MessagePermits: ptr(uint32(1_000_000))}})
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(200+d.rng.IntN(800)) * time.Millisecond):
	}
	if err := d.probe(ctx); err != nil {
		c.close()
		return fmt.Errorf("broker not serving while a consumer does not read: %w", err)
	}
	return d.abandon(c)
}

// connectionStorm: a couple of hundred connections at once, some
// connected, all dropped.
func (d *driver) connectionStorm(ctx context.Context) error {
	var conns []*conn
	for range 100 + d.rng.IntN(200) {
		c, err := d.dial(ctx)
		if err != nil {
			break
		}
		if d.rng.IntN(2) == 0 {
			_ = c.send(connectCommand())
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.close()
	}
	d.report.Closed++
	return d.probe(ctx)
}

// validCommand is a well-formed command of a served type, with ids and
// names that may or may not exist.
func (d *driver) validCommand() *pb.BaseCommand {
	topic := fmt.Sprintf("persistent://public/default/hostile-%d", d.rng.IntN(4))
	id, req := uint64(d.rng.IntN(4)), uint64(d.rng.IntN(1000))
	msgID := &pb.MessageIdData{LedgerId: ptr(uint64(d.rng.IntN(4))), EntryId: ptr(uint64(d.rng.IntN(100)))}
	all := []*pb.BaseCommand{
		{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}},
		{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{Topic: ptr(topic), RequestId: ptr(req)}},
		{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{Topic: ptr(topic), RequestId: ptr(req)}},
		producerCommand(topic, id, req),
		{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: ptr(topic), Subscription: ptr("s"),
			SubType: pb.CommandSubscribe_SubType(d.rng.IntN(4)).Enum(), ConsumerId: ptr(id), RequestId: ptr(req)}},
		{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: ptr(id), MessagePermits: ptr(uint32(d.rng.IntN(1000)))}},
		{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: ptr(id), AckType: pb.CommandAck_Individual.Enum(),
			MessageId: []*pb.MessageIdData{msgID}}},
		{Type: pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(), RedeliverUnacknowledgedMessages: &pb.CommandRedeliverUnacknowledgedMessages{
			ConsumerId: ptr(id), MessageIds: []*pb.MessageIdData{msgID}}},
		{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{ProducerId: ptr(id), RequestId: ptr(req)}},
		{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{ConsumerId: ptr(id), RequestId: ptr(req)}},
		{Type: pb.BaseCommand_UNSUBSCRIBE.Enum(), Unsubscribe: &pb.CommandUnsubscribe{ConsumerId: ptr(id), RequestId: ptr(req)}},
		{Type: pb.BaseCommand_SEEK.Enum(), Seek: &pb.CommandSeek{ConsumerId: ptr(id), RequestId: ptr(req), MessageId: msgID}},
		{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID.Enum(), GetLastMessageId: &pb.CommandGetLastMessageId{ConsumerId: ptr(id), RequestId: ptr(req)}},
		{Type: pb.BaseCommand_CONSUMER_STATS.Enum(), ConsumerStats: &pb.CommandConsumerStats{ConsumerId: ptr(id), RequestId: ptr(req)}},
		{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: &pb.CommandGetTopicsOfNamespace{
			Namespace: ptr("public/default"), RequestId: ptr(req), TopicsPattern: ptr(".*[")}},
		{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{Topic: ptr(topic), RequestId: ptr(req)}},
		{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: ptr(req)}},
		{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{ProducerId: ptr(id), SequenceId: ptr(req)}},
	}
	return all[d.rng.IntN(len(all))]
}

func (d *driver) validFrame() []byte {
	b, err := wire.AppendSimpleFrame(nil, d.validCommand())
	if err != nil {
		return []byte{0, 0, 0, 0}
	}
	return b
}

func producerCommand(topic string, id, req uint64) *pb.BaseCommand {
	return &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: ptr(topic), ProducerId: ptr(id), RequestId: ptr(req)}}
}

// openProducer opens producer id on topic and waits for its answer.
func (d *driver) openProducer(c *conn, topic string, id uint64) error {
	if err := c.send(producerCommand(topic, id, 1)); err != nil {
		return err
	}
	for {
		cmd, err := c.read()
		if err != nil {
			return fmt.Errorf("PRODUCER on %s: %w", topic, err)
		}
		switch cmd.GetType() {
		case pb.BaseCommand_PRODUCER_SUCCESS:
			return nil
		case pb.BaseCommand_ERROR:
			return fmt.Errorf("PRODUCER on %s: %s", topic, cmd.GetError().GetMessage())
		}
	}
}

func (d *driver) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(d.rng.Uint32())
	}
	return b
}

func (d *driver) pickInt(vals []int64) int64 { return vals[d.rng.IntN(len(vals))] }
