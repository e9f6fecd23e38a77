package broker

// Producer commands: PRODUCER, SEND, CLOSE_PRODUCER.
//
// Behaviour:
//   - PRODUCER opens the topic on its own goroutine and answers
//     PRODUCER_SUCCESS with the producer's name (generated when the client
//     gave none), the topic epoch and last_sequence_id -1 (no
//     deduplication state yet).
//   - Access modes: Shared producers are refused (ProducerBusy) while one
//     has exclusive access; Exclusive is refused while any producer is
//     connected; ExclusiveWithFencing closes the others (CLOSE_PRODUCER)
//     and takes over; WaitForExclusive gets producer_ready=false and a
//     second PRODUCER_SUCCESS with the same request id once the others
//     are gone. Each exclusive grant raises the topic epoch.
//   - SEND stores the entry exactly as the client sent it (from the 0x0e01
//     magic: checksum, metadata, payload), after checking its CRC32C; a bad
//     checksum answers SEND_ERROR ChecksumError and stores nothing.
//   - SEND_RECEIPTs go out in SEND order per producer (the managed ledger
//     calls back in append order).
//   - Back-pressure: while maxPendingPublishRequestsPerConnection SENDs
//     await storage, the connection is not read.
//   - A terminated topic refuses producers (TopicTerminatedError); a
//     producer's schema is registered first (conn_schema.go) and its
//     version returned in PRODUCER_SUCCESS.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

type producer struct {
	id    uint64
	name  string
	topic *topic
	conn  *serverConn
	// created is the PRODUCER_SUCCESS sent once the producer was created
	// (nil before): a repeated PRODUCER for it is answered with it again.
	created atomic.Pointer[pb.CommandProducerSuccess]
}

// producerNames numbers generated producer names within this process.
type producerNames struct{ n atomic.Uint64 }

func (c *serverConn) handleProducer(cmd *pb.CommandProducer) error {
	id, reqID := cmd.GetProducerId(), cmd.GetRequestId()
	name, err := ParseTopicName(cmd.GetTopic())
	if err != nil {
		return c.sendError(reqID, pb.ServerError_InvalidTopicName, err.Error())
	}
	producerName := cmd.GetProducerName()
	if producerName == "" {
		producerName = fmt.Sprintf("%s-%d", c.b.cfg.ClusterName, c.b.names.n.Add(1))
	}
	go c.openProducer(name, id, reqID, producerName, cmd.GetProducerAccessMode(), cmd.GetSchema())
	return nil
}

func (c *serverConn) openProducer(name TopicName, id, reqID uint64, producerName string, mode pb.ProducerAccessMode, sch *pb.Schema) {
	t, err := c.b.clientTopic(context.Background(), name)
	if err != nil {
		_ = c.sendError(reqID, topicErrorCode(err), err.Error())
		return
	}
	if t.terminated.Load() {
		_ = c.sendError(reqID, pb.ServerError_TopicTerminatedError, fmt.Sprintf("topic %s is terminated", name))
		return
	}
	if code, err := t.admitProducer(context.Background()); err != nil {
		_ = c.sendError(reqID, code, err.Error())
		return
	}
	if err := t.admitProducerCount(context.Background()); err != nil {
		_ = c.sendError(reqID, pb.ServerError_ProducerBusy, err.Error()) // as Pulsar answers a limit
		return
	}
	schemaVersion, err := c.b.registerSchema(context.Background(), name, sch)
	if err != nil {
		_ = c.sendError(reqID, schemaErrorCode(err), err.Error())
		return
	}
	p := &producer{id: id, name: producerName, topic: t, conn: c}
	// The id is taken on the connection before the topic admits the
	// producer. A topic closing in between then fences a producer the
	// connection knows and drops it there; the other order left the
	// connection holding a producer of a closed topic, and its client was
	// refused with ProducerBusy on every reconnect.
	if existing, ok := c.registerProducer(p); !ok {
		c.answerExistingProducer(existing, name, reqID)
		return
	}
	last := int64(-1)
	if t.dedup != nil {
		last = t.dedup.lastPersisted(producerName)
	}
	success := func(epoch uint64, ready bool) {
		ps := &pb.CommandProducerSuccess{RequestId: &reqID, ProducerName: &producerName, LastSequenceId: &last,
			TopicEpoch: &epoch, ProducerReady: &ready, SchemaVersion: schemaVersion}
		if ready {
			p.created.Store(ps)
		}
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: ps})
	}
	epoch, ready, fenced, err := t.addProducer(p, mode, func(epoch uint64) { success(epoch, true) })
	if err != nil {
		c.dropProducer(p)
		code := pb.ServerError_ServiceNotReady
		if errors.Is(err, errProducerBusy) {
			code = pb.ServerError_ProducerBusy
		}
		_ = c.sendError(reqID, code, err.Error())
		return
	}
	if !c.hasProducer(p) { // closed meanwhile (connection or topic): do not outlive it
		t.removeProducer(p)
		_ = c.sendError(reqID, pb.ServerError_ServiceNotReady, fmt.Sprintf("topic %s closed while the producer was created", name))
		return
	}
	for _, q := range fenced {
		q.fence()
	}
	success(epoch, ready)
}

// fence closes a producer that an ExclusiveWithFencing producer replaced,
// or whose topic closes.
func (p *producer) fence() {
	p.conn.dropProducer(p)
	id := p.id
	_ = p.conn.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(),
		CloseProducer: &pb.CommandCloseProducer{ProducerId: &id, RequestId: ptr(uint64(0))}})
}

// registerProducer adds p to the connection unless it closed or the id
// is taken (then existing is the producer holding it, if any).
func (c *serverConn) registerProducer(p *producer) (existing *producer, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q, dup := c.producers[p.id]; dup || c.closed {
		return q, false
	}
	c.producers[p.id] = p
	return nil, true
}

// answerExistingProducer answers a PRODUCER whose id is taken on this
// connection. A client whose earlier request for the same producer got
// no answer it saw (it reconnected the producer meanwhile) asks again
// with the same id: as Pulsar, that is answered with the producer
// created, or ServiceNotReady (retriable) while it is being created.
// Answering ProducerBusy instead left such a client retrying for good.
func (c *serverConn) answerExistingProducer(existing *producer, name TopicName, reqID uint64) {
	switch {
	case existing == nil: // the connection is closing
		_ = c.sendError(reqID, pb.ServerError_ServiceNotReady, "connection is closing")
	case existing.topic.name != name:
		_ = c.sendError(reqID, pb.ServerError_ProducerBusy, fmt.Sprintf("producer id %d is in use on this connection for %s", existing.id, existing.topic.name))
	case existing.created.Load() == nil:
		_ = c.sendError(reqID, pb.ServerError_ServiceNotReady, fmt.Sprintf("producer id %d is still being created", existing.id))
	default:
		ps := *existing.created.Load()
		ps.RequestId = &reqID
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: &ps})
	}
}

// dropProducer removes p from the connection if its id still names p
// (the client may have reused the id for a new producer since).
func (c *serverConn) dropProducer(p *producer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.producers[p.id] == p {
		delete(c.producers, p.id)
	}
}

func (c *serverConn) hasProducer(p *producer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.producers[p.id] == p
}

func (c *serverConn) removeProducer(id uint64) *producer {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.producers[id]
	delete(c.producers, id)
	return p
}

func (c *serverConn) handleSend(cmd *pb.CommandSend, f wire.Frame) error {
	id, seq := cmd.GetProducerId(), cmd.GetSequenceId()
	c.mu.Lock()
	p := c.producers[id]
	c.mu.Unlock()
	if p == nil {
		return c.sendSendError(id, seq, pb.ServerError_UnknownError, fmt.Sprintf("no producer %d on this connection", id))
	}
	if !f.HasPayload() {
		return fmt.Errorf("SEND without a payload from producer %d", id)
	}
	if err := f.Entry.VerifyChecksum(); err != nil {
		c.log.Warn("SEND with a bad checksum; not stored", "topic", p.topic.name.String(), "producer", p.name, "err", err)
		return c.sendSendError(id, seq, pb.ServerError_ChecksumError, err.Error())
	}
	highest, msgs := cmd.GetHighestSequenceId(), int64(max(cmd.GetNumMessages(), 1))
	if d := p.topic.dedup; d != nil && !d.admit(p.name, int64(seq), int64(highest)) {
		// A duplicate: acknowledged, not stored; -1:-1 says so.
		return c.send(&pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
			ProducerId: &id, SequenceId: &seq, HighestSequenceId: &highest,
			MessageId: &pb.MessageIdData{LedgerId: ptr(^uint64(0)), EntryId: ptr(^uint64(0))}}})
	}
	c.beginSend()
	size := int64(f.Entry.Len())
	p.topic.addEntry(f.Entry.Bytes(), msgs, func(pos managedledger.Position, err error) {
		c.endSend()
		if err != nil {
			if d := p.topic.dedup; d != nil {
				d.failed(p.name)
			}
			code := pb.ServerError_PersistenceError
			if errors.Is(err, managedledger.ErrTerminated) {
				code = pb.ServerError_TopicTerminatedError
			}
			_ = c.sendSendError(id, seq, code, err.Error())
			return
		}
		if d := p.topic.dedup; d != nil {
			if err := d.stored(context.Background(), p.name, int64(seq), int64(highest), pos); err != nil {
				c.log.Warn("deduplication snapshot not taken; a reload replays more", "topic", p.topic.name.String(), "err", err)
			}
		}
		p.topic.stats.msgsIn.Add(msgs)
		p.topic.stats.bytesIn.Add(size)
		// Encoded by hand: one receipt per stored entry (wire/message.go).
		_ = c.t.Write(wire.AppendSendReceiptFrame(make([]byte, 0, 64), wire.SendReceipt{ProducerID: id, SequenceID: seq,
			HighestSequenceID: highest, LedgerID: uint64(pos.LedgerID), EntryID: uint64(pos.EntryID)}))
	})
	return nil
}

func (c *serverConn) sendSendError(id, seq uint64, code pb.ServerError, msg string) error {
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_SEND_ERROR.Enum(), SendError: &pb.CommandSendError{
		ProducerId: &id, SequenceId: &seq, Error: code.Enum(), Message: &msg}})
}

// beginSend counts a SEND awaiting storage and pauses reading at the limit.
func (c *serverConn) beginSend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pendingSends++
	if c.pendingSends >= c.b.settings().maxPendingPublish && !c.paused {
		c.paused = true
		c.t.PauseReading()
	}
}

func (c *serverConn) endSend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pendingSends--
	if c.paused && c.pendingSends <= c.b.settings().maxPendingPublish/2 {
		c.paused = false
		c.t.ResumeReading()
	}
}

func (c *serverConn) handleCloseProducer(cmd *pb.CommandCloseProducer) error {
	if p := c.removeProducer(cmd.GetProducerId()); p != nil {
		p.topic.removeProducer(p)
	}
	return c.sendSuccess(cmd.GetRequestId())
}
