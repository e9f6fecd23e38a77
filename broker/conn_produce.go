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
//   - A SEND for a producer id the connection never opened closes the
//     connection, as Pulsar does; one for a producer closed recently (the
//     last 256 on the connection) is ignored: it was in flight when the
//     producer closed, and the client resends it after reopening.
//   - Deduplication (dedup.go): a SEND whose sequence id was stored is
//     acknowledged with message id -1:-1 and not stored; one whose
//     original is still being stored gets SEND_ERROR PersistenceError
//     (the client reconnects and resends), never -1:-1: the original may
//     yet fail.
//   - A producer may name an initial subscription (the Go client's DLQ
//     producer does, DLQPolicy.InitialSubscriptionName): it is created at
//     the earliest position unless it exists, so that nothing published
//     before its first consumer comes is lost to it, as on Pulsar.
//   - A producer named pulsar.repl.* is a remote cluster's replicator
//     (replicator.go): its entries are deduplicated by the producer name
//     and sequence ids in their metadata (the original producer's), as
//     Pulsar's MessageDeduplication does, and counted as replication in.
//   - A terminated topic refuses producers (TopicTerminatedError); a
//     producer's schema is registered first (conn_schema.go) and its
//     version returned in PRODUCER_SUCCESS.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/replclient"
	"github.com/magnetar-io/magnetar/broker/txn"
	"github.com/magnetar-io/magnetar/internal/stage"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

type producer struct {
	id    uint64
	name  string
	topic *topic
	conn  *serverConn
	// created is what the PRODUCER_SUCCESS sent once the producer was
	// created said (nil before): a repeated PRODUCER for it is answered
	// with it again. Plain values, not the message: a message is not safe
	// to copy or encode while another goroutine encodes it (proto keeps
	// its size cache in the message).
	created atomic.Pointer[producerCreated]
	client  clientInfo
	// remote marks a replicator of another cluster (name pulsar.repl.*).
	remote bool
}

// producerCreated is a PRODUCER_SUCCESS but for its request id.
type producerCreated struct {
	name          string
	lastSequence  int64
	epoch         uint64
	schemaVersion []byte
}

func (pc *producerCreated) success(reqID uint64) *pb.BaseCommand {
	return &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: &pb.CommandProducerSuccess{
		RequestId: &reqID, ProducerName: ptr(pc.name), LastSequenceId: ptr(pc.lastSequence),
		TopicEpoch: ptr(pc.epoch), ProducerReady: ptr(true), SchemaVersion: pc.schemaVersion}}
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
	c.goSafe("PRODUCER", func() {
		c.openProducer(name, id, reqID, producerName, cmd)
	})
	return nil
}

func (c *serverConn) openProducer(name TopicName, id, reqID uint64, producerName string, cmd *pb.CommandProducer) {
	mode, sch := cmd.GetProducerAccessMode(), cmd.GetSchema()
	if code, err := c.authorizeTopic(auth.OpProduce, name, ""); err != nil {
		_ = c.sendError(reqID, code, err.Error())
		return
	}
	loadCtx := c.ctx
	if strings.HasPrefix(producerName, replclient.Prefix) {
		loadCtx = withReplicatorLoad(loadCtx) // loaded behind the topics local clients wait for
	}
	t, err := c.b.clientTopic(loadCtx, name)
	if err != nil {
		_ = c.sendError(reqID, topicErrorCode(err), err.Error())
		return
	}
	if t.terminated.Load() {
		_ = c.sendError(reqID, pb.ServerError_TopicTerminatedError, fmt.Sprintf("topic %s is terminated", name))
		return
	}
	if code, err := t.admitProducer(c.ctx); err != nil {
		_ = c.sendError(reqID, code, err.Error())
		return
	}
	if err := t.admitProducerCount(c.ctx); err != nil {
		_ = c.sendError(reqID, pb.ServerError_ProducerBusy, err.Error()) // as Pulsar answers a limit
		return
	}
	if err := t.createInitialSubscription(c.ctx, cmd.GetInitialSubscriptionName()); err != nil {
		_ = c.sendError(reqID, pb.ServerError_ServiceNotReady, err.Error())
		return
	}
	if err := c.b.checkSchemaless(c.ctx, t, sch); err != nil {
		_ = c.sendError(reqID, schemaErrorCode(err), err.Error())
		return
	}
	schemaVersion, err := c.b.registerSchema(c.ctx, name, sch)
	if err != nil {
		_ = c.sendError(reqID, schemaErrorCode(err), err.Error())
		return
	}
	p := &producer{id: id, name: producerName, topic: t, conn: c, client: c.clientInfo(cmd.GetMetadata()),
		remote: strings.HasPrefix(producerName, replclient.Prefix)}
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
		if ready {
			pc := &producerCreated{name: producerName, lastSequence: last, epoch: epoch, schemaVersion: schemaVersion}
			p.created.Store(pc)
			_ = c.send(pc.success(reqID))
			return
		}
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: &pb.CommandProducerSuccess{
			RequestId: &reqID, ProducerName: &producerName, LastSequenceId: &last, TopicEpoch: &epoch,
			ProducerReady: &ready, SchemaVersion: schemaVersion}})
	}
	epoch, ready, fenced, err := t.addProducer(p, mode, func(epoch uint64) { success(epoch, true) })
	if err != nil {
		c.dropProducer(p)
		code := pb.ServerError_ServiceNotReady
		switch {
		case errors.Is(err, errProducerBusy), errors.Is(err, errProducerNameInUse):
			code = pb.ServerError_ProducerBusy
		case errors.Is(err, errProducerFenced):
			code = pb.ServerError_ProducerFenced
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
	p.conn.closeProducerOnClient(p.id, p.topic.movedTo.Load())
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
		_ = c.send(existing.created.Load().success(reqID))
	}
}

// dropProducer removes p from the connection if its id still names p
// (the client may have reused the id for a new producer since).
func (c *serverConn) dropProducer(p *producer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.producers[p.id] == p {
		delete(c.producers, p.id)
		c.closedProducers.add(p.id)
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
	if p != nil {
		delete(c.producers, id)
		c.closedProducers.add(id)
	}
	return p
}

// recentIDs remembers the last ids of producers closed on a connection
// (bounded: a client cycling through ids cannot grow it), so that SENDs
// that were in flight when one closed are told apart from SENDs for a
// producer that never existed.
type recentIDs struct {
	ring [256]uint64
	set  map[uint64]int // id -> times present in ring
	next int
	n    int
}

func (r *recentIDs) add(id uint64) {
	if r.set == nil {
		r.set = map[uint64]int{}
	}
	if r.n == len(r.ring) {
		old := r.ring[r.next]
		if r.set[old]--; r.set[old] == 0 {
			delete(r.set, old)
		}
	} else {
		r.n++
	}
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	r.set[id]++
}

func (r *recentIDs) has(id uint64) bool { return r.set[id] > 0 }

func (c *serverConn) handleSend(cmd *pb.CommandSend, f wire.Frame) error {
	var received time.Time // read only when something times publishes
	if c.b.cfg.Stages != nil || c.b.cfg.FlightRecorder != nil {
		received = time.Now()
	}
	id, seq := cmd.GetProducerId(), cmd.GetSequenceId()
	c.mu.Lock()
	p, recentlyClosed := c.producers[id], c.closedProducers.has(id)
	c.mu.Unlock()
	if p == nil {
		if recentlyClosed {
			// In flight when the producer closed: its client resends what
			// is pending once the producer is open again (as Pulsar, which
			// ignores these too).
			return nil
		}
		return fmt.Errorf("SEND for producer %d, which was never opened on this connection", id)
	}
	if !f.HasPayload() {
		return fmt.Errorf("SEND without a payload from producer %d", id)
	}
	inTxn := cmd.TxnidMostBits != nil || cmd.TxnidLeastBits != nil
	if inTxn && (!c.b.cfg.TransactionCoordinatorEnabled || p.topic.txns.Load() == nil) {
		return c.sendInTxn(p, cmd, f) // refused, or its topic's buffer made first (conn_txn.go)
	}
	if err := f.Entry.VerifyChecksum(); err != nil {
		c.log.Warn("SEND with a bad checksum; not stored", "topic", p.topic.name.String(), "producer", p.name, "err", err)
		return c.sendSendError(id, seq, pb.ServerError_ChecksumError, err.Error())
	}
	if code, err := c.checkEntry(f.Entry); err != nil {
		c.log.Warn("SEND refused; not stored", "topic", p.topic.name.String(), "producer", p.name, "err", err)
		return c.sendSendError(id, seq, code, err.Error())
	}
	if limit := p.topic.messageSizeLimit(time.Now()); limit > 0 && int64(len(f.Entry.Payload())) > limit {
		// The topic's maxMessageSize policy, over the payload as Pulsar
		// measures it; the client fails the message (NotAllowed).
		return c.sendSendError(id, seq, pb.ServerError_NotAllowedError,
			fmt.Sprintf("exceed maximum message size: payload of %d bytes is larger than the topic's maxMessageSize %d", len(f.Entry.Payload()), limit))
	}
	if why := p.topic.deliveryDelayRefusal(&c.sendMetadata); why != "" {
		return c.sendSendError(id, seq, pb.ServerError_NotAllowedError, why)
	}
	highest, msgs := cmd.GetHighestSequenceId(), int64(max(cmd.GetNumMessages(), 1))
	// Deduplicated under the producer's name and ids, or for a replicator
	// the original producer's (checkEntry decoded the metadata).
	dname, dseq, dhighest, from := p.name, int64(seq), int64(highest), ""
	if p.remote {
		md := &c.sendMetadata
		dname, dseq, from = md.GetProducerName(), int64(md.GetSequenceId()), md.GetReplicatedFrom()
		dhighest = max(dseq, int64(md.GetHighestSequenceId()))
	}
	// A replicated-subscription marker from a remote cluster (replsubs.go)
	// is neither deduplicated (they all have sequence id 0) nor counted.
	marker := p.remote && c.sendMetadata.MarkerType != nil
	dedup := p.topic.dedup
	if marker {
		dedup = nil
	}
	if d := dedup; d != nil {
		switch d.admit(dname, dseq, dhighest) {
		case admitDuplicate:
			// A duplicate: acknowledged, not stored; -1:-1 says so.
			return c.send(&pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
				ProducerId: &id, SequenceId: &seq, HighestSequenceId: &highest,
				MessageId: &pb.MessageIdData{LedgerId: ptr(^uint64(0)), EntryId: ptr(^uint64(0))}}})
		case admitUnknown:
			// A resend racing its original, which may still fail: the
			// client reconnects and resends (Pulsar's PersistenceError).
			return c.sendSendError(id, seq, pb.ServerError_PersistenceError,
				"a message with this sequence id is still being stored; resend it once that settles")
		}
	}
	entry, sum, owned := f.Entry.Bytes(), f.Entry.Sum(), false
	var tb *txnBuffer
	var tid txn.ID
	if inTxn {
		tid, tb = txn.ID{Most: cmd.GetTxnidMostBits(), Least: cmd.GetTxnidLeastBits()}, p.topic.txns.Load()
		var err error
		if entry, owned, sum, err = withTxnID(f.Entry, &c.sendMetadata, tid); err != nil {
			return c.sendSendError(id, seq, pb.ServerError_UnknownError, err.Error())
		}
		if !tb.isOngoing(tid) && c.b.txnEndedHere(tid) {
			// The first message of the transaction on this topic, and
			// its coordinator (hosted here) no longer knows it: stored,
			// it would never see its end.
			return c.sendSendError(id, seq, pb.ServerError_InvalidTxnStatus,
				fmt.Sprintf("transaction %v is not open (its coordinator does not know it)", tid))
		}
		if err := tb.beginSend(tid); err != nil {
			return c.sendSendError(id, seq, pb.ServerError_InvalidTxnStatus, err.Error())
		}
	}
	c.beginSend()
	size := int64(f.Entry.Len())
	c.throttlePublish(p.topic, msgs, size)
	published := int64(c.sendMetadata.GetPublishTime()) // checkEntry decoded it
	stages := c.b.cfg.Stages
	stages.Since(stage.BrokerToStorage, received)
	p.topic.addEntryFrom(entry, owned, sum, msgs, func(pos managedledger.Position, err error) {
		if tb != nil {
			tb.sent(tid, pos, err) // before the receipt: the commit that follows it finds the entry
		}
		c.endSend()
		if err != nil {
			if d := dedup; d != nil {
				d.failed(dname)
			}
			if errors.Is(err, managedledger.ErrTerminated) && c.hasProducer(p) {
				// Closed before the SEND_ERROR: the Go client drops a
				// producer on SEND_ERROR TopicTerminatedError without
				// failing its pending sends and then ignores the close;
				// closed first, it reconnects and is refused with
				// TopicTerminatedError, which fails them.
				p.topic.removeProducer(p)
				p.fence()
			}
			code, msg := addErrorAnswer(err) // names the cause: read-only bookies, out of disk space
			_ = c.sendSendError(id, seq, code, msg)
			return
		}
		if d := dedup; d != nil {
			if err := d.stored(c.b.ctx, dname, dseq, dhighest, pos); err != nil {
				c.log.Warn("deduplication snapshot not taken; a reload replays more", "topic", p.topic.name.String(), "err", err)
			}
		}
		if !marker {
			p.topic.noteData()
			p.topic.stats.msgsIn.Add(msgs)
			p.topic.stats.bytesIn.Add(size)
			p.topic.stats.lastPublishMs.Store(published) // callbacks run in stored order
			if from != "" {
				p.topic.countInbound(from, msgs, size)
			}
		}
		stages.Since(stage.Receipt, received)
		if fr := c.b.cfg.FlightRecorder; fr != nil { // off by default: no clock read for it
			fr.Observe(time.Since(received))
		}
		// Encoded by hand: one receipt per stored entry (wire/message.go).
		_ = c.t.Write(wire.AppendSendReceiptFrame(make([]byte, 0, 64), wire.SendReceipt{ProducerID: id, SequenceID: seq,
			HighestSequenceID: highest, LedgerID: uint64(pos.LedgerID), EntryID: uint64(pos.EntryID)}))
	})
	return nil
}

// maxBrokerEntryMetadataLen is the most broker entry metadata the broker
// may put in front of an entry (both interceptors, largest values).
var maxBrokerEntryMetadataLen = wire.BrokerEntryMetadataLen(math.MaxUint64, true, math.MaxInt64, true)

// checkEntry refuses what storage must never get: an entry that would be
// too large once stamped (storage limits derive from wire.MaxEntrySize,
// so this is the one check), and metadata that does not decode, which
// every consumer and admin read of the entry would fail on. Both answer
// NotAllowedError, as Pulsar answers "Exceed maximum message size": the
// client fails the message instead of resending it for ever.
func (c *serverConn) checkEntry(e wire.Entry) (pb.ServerError, error) {
	if n, limit := e.Len()+maxBrokerEntryMetadataLen, wire.MaxEntrySize(c.b.cfg.MaxMessageSize); n > limit {
		return pb.ServerError_NotAllowedError, fmt.Errorf("exceed maximum message size: entry of %d bytes (with broker metadata) is larger than %d", n, limit)
	}
	// The event loop serves one frame of a connection at a time: the
	// scratch message is reused without a lock.
	if err := e.DecodeMetadata(&c.sendMetadata); err != nil {
		return pb.ServerError_NotAllowedError, fmt.Errorf("message metadata does not decode: %w", err)
	}
	return 0, nil
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
	if c.pendingSends >= c.b.settings().maxPendingPublish {
		c.pauseLocked(pauseBackPressure)
	}
}

func (c *serverConn) endSend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pendingSends--
	if c.pendingSends <= c.b.settings().maxPendingPublish/2 {
		c.resumeLocked(pauseBackPressure)
	}
}

func (c *serverConn) handleCloseProducer(cmd *pb.CommandCloseProducer) error {
	if p := c.removeProducer(cmd.GetProducerId()); p != nil {
		p.topic.removeProducer(p)
	}
	return c.sendSuccess(cmd.GetRequestId())
}

// createInitialSubscription opens the durable cursor a producer asked
// for, at the earliest position, if the topic is persistent and has no
// cursor of that name (an existing one is left where it is).
func (t *topic) createInitialSubscription(ctx context.Context, sub string) error {
	if sub == "" || !t.name.Persistent() {
		return nil
	}
	if _, err := t.ml.OpenCursor(ctx, sub, managedledger.CursorOptions{Initial: managedledger.Earliest}); err != nil {
		return fmt.Errorf("initial subscription %s of %s: %w", sub, t.name, err)
	}
	return nil
}
