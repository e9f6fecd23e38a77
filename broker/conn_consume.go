package broker

// Consumer commands: SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES,
// CLOSE_CONSUMER, UNSUBSCRIBE, GET_LAST_MESSAGE_ID.
//
// Behaviour:
//   - SUBSCRIBE opens the topic and the subscription's cursor on its own
//     goroutine; Exclusive refuses a second consumer with ConsumerBusy.
//     Readers (durable=false) get a private, non-durable cursor starting
//     after start_message_id. A consumer's schema is checked first
//     (conn_schema.go).
//   - ACK individual or cumulative; acks carrying an ack_set (a part of a
//     batch) are kept by the cursor with acknowledgmentAtBatchIndexLevelEnabled
//     (batchack.go), else not applied until the whole entry is acknowledged.
//   - With request_id set, ACK is answered with ACK_RESPONSE.
//   - GET_LAST_MESSAGE_ID answers entry -1 for an empty topic.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

type consumer struct {
	id      uint64
	name    string
	conn    *serverConn
	sub     *subscription
	created atomic.Bool // SUCCESS was sent: a repeated SUBSCRIBE gets it again
	flowed  atomic.Bool // a FLOW came: the client handles commands for it
	// lastFlowMs is when the last FLOW came (unix ms), for stats.
	lastFlowMs atomic.Int64
	// toldEndOfTopic (guarded by sub.mu): REACHED_END_OF_TOPIC was sent.
	toldEndOfTopic bool
	permits        int64 // guarded by sub.mu
	// hashRanges are a Key_Shared STICKY consumer's declared key slots.
	hashRanges []*pb.IntRange
	// joinedAfter (Key_Shared, guarded by sub.mu): the last entry read
	// before this consumer joined. Until everything up to it is
	// acknowledged, it only gets entries up to it: a key that moved to it
	// must not overtake that key's messages still held by another consumer.
	joinedAfter *managedledger.Position
	// drainWait (guarded by sub.mu) is set while a goroutine waits for the
	// consumer's congested connection to drain.
	drainWait bool
	// unacked (guarded by sub.mu) counts the messages in flight to this
	// consumer; on Shared and Key_Shared subscriptions it is blocked
	// (blockedOnUnacked) once it reaches maxUnacked (0: no limit), until
	// half of them are acknowledged or redelivered.
	unacked          int64
	maxUnacked       int64
	blockedOnUnacked bool
	// toldActive (guarded by sub.mu): the active state last sent in an
	// ACTIVE_CONSUMER_CHANGE, nil before the first (activeconsumer.go).
	toldActive *bool
	client     clientInfo
	// epoch and hasEpoch (guarded by sub.mu) are the consumer epoch its
	// SUBSCRIBE or latest redelivery request set, sent with every message
	// so that its client drops what an older epoch had in flight.
	epoch    uint64
	hasEpoch bool
}

func (c *serverConn) handleSubscribe(cmd *pb.CommandSubscribe) error {
	name, err := ParseTopicName(cmd.GetTopic())
	if err != nil {
		return c.sendError(cmd.GetRequestId(), pb.ServerError_InvalidTopicName, err.Error())
	}
	c.goSafe("SUBSCRIBE", func() { c.openConsumer(name, cmd) })
	return nil
}

func (c *serverConn) openConsumer(name TopicName, cmd *pb.CommandSubscribe) {
	reqID := cmd.GetRequestId()
	c.forgetHeldClose(cmd.GetConsumerId())
	ctx := c.ctx
	// A client that reconnects a live consumer on the same connection
	// (the Go client's reconnectToBroker, when two reconnects were asked
	// for) subscribes again with the same id: the consumer restarts.
	if existing := c.consumer(cmd.GetConsumerId()); existing != nil {
		if !c.restartable(existing, name, cmd.GetSubscription()) {
			c.answerExistingConsumer(existing, name, cmd.GetSubscription(), reqID)
			return
		}
		c.retireResubscribed(existing)
	}
	if code, err := c.authorizeTopic(auth.OpConsume, name, cmd.GetSubscription()); err != nil {
		_ = c.sendError(reqID, code, err.Error())
		return
	}
	t, err := c.b.clientTopic(ctx, name)
	if err != nil {
		_ = c.sendError(reqID, topicErrorCode(err), err.Error())
		return
	}
	if !t.admitSubscribe(c.remoteHost()+"/"+cmd.GetConsumerName(), time.Now()) {
		_ = c.sendError(reqID, pb.ServerError_NotAllowedError, "Subscribe limited by subscribe rate limit per consumer.")
		return
	}
	if err := c.b.checkConsumerSchema(ctx, t, cmd.GetSchema()); err != nil {
		_ = c.sendError(reqID, schemaErrorCode(err), err.Error())
		return
	}
	sub, err := t.subscription(ctx, cmd)
	if err != nil {
		// As Pulsar: a subscription of another type in use is busy; a
		// cursor that cannot be opened is a storage error (retriable).
		code := pb.ServerError_PersistenceError
		switch {
		case errors.Is(err, errSubscriptionBusy):
			code = pb.ServerError_ConsumerBusy
		case errors.Is(err, errSubNotFound):
			code = pb.ServerError_SubscriptionNotFound
		case errors.Is(err, errTooManySubscriptions), errors.Is(err, errReadCompactedNotAllowed):
			code = pb.ServerError_NotAllowedError
		}
		_ = c.sendError(reqID, code, err.Error())
		return
	}
	limits := t.clientLimits(ctx)
	if err := t.admitConsumerCount(limits, sub); err != nil {
		_ = c.sendError(reqID, pb.ServerError_ConsumerBusy, err.Error()) // as Pulsar answers a limit
		return
	}
	cs := &consumer{id: cmd.GetConsumerId(), name: cmd.GetConsumerName(), conn: c, sub: sub,
		maxUnacked: int64(limits.unackedPerConsumer), client: c.clientInfo(cmd.GetMetadata()),
		epoch: cmd.GetConsumerEpoch(), hasEpoch: cmd.ConsumerEpoch != nil}
	if meta := cmd.GetKeySharedMeta(); meta.GetKeySharedMode() == pb.KeySharedMode_STICKY {
		cs.hashRanges = meta.GetHashRanges()
	}
	// Taken on the connection first, for the reason openProducer gives.
	if existing, ok := c.registerConsumer(cs); !ok {
		if !sub.durable {
			t.removeReader(sub)
			sub.close()
		}
		c.answerExistingConsumer(existing, name, cmd.GetSubscription(), reqID)
		return
	}
	if err := sub.addConsumer(cs, cmd.GetSubType(), int64(limits.unackedPerSub)); err != nil {
		c.dropConsumer(cs)
		code := pb.ServerError_ServiceNotReady
		if errors.Is(err, errConsumerBusy) || errors.Is(err, errSubscriptionTypeBusy) {
			code = pb.ServerError_ConsumerBusy
		}
		_ = c.sendError(reqID, code, err.Error())
		return
	}
	if !c.hasConsumer(cs) { // closed meanwhile (connection or topic)
		sub.removeConsumer(cs)
		_ = c.sendError(reqID, pb.ServerError_ServiceNotReady, fmt.Sprintf("topic %s closed while the consumer was created", name))
		return
	}
	cs.created.Store(true)
	if sub.traced() { // before the answer, as every trace line is written before what it tells the client
		start := cmd.GetStartMessageId()
		c.b.log.Info("trace: reader subscribed", "topic", name.String(), "subscription", sub.name, "consumer", cs.id,
			"remote", c.t.RemoteAddr().String(), "start", fmt.Sprintf("%d:%d", int64(start.GetLedgerId()), int64(start.GetEntryId())),
			"read_position", sub.cursor.ReadPosition().String())
	}
	_ = c.sendSuccess(reqID)
	time.AfterFunc(activeChangeDelay, sub.notifyActiveConsumers)
}

func (c *serverConn) consumer(id uint64) *consumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.consumers[id]
}

func (c *serverConn) handleFlow(cmd *pb.CommandFlow) error {
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil {
		c.closeFlowedConsumer(cmd.GetConsumerId())
		return nil
	}
	cs.flowed.Store(true)
	cs.lastFlowMs.Store(time.Now().UnixMilli())
	if cs.sub.traced() {
		c.b.log.Info("trace: reader flow", "subscription", cs.sub.name, "consumer", cs.id, "permits", cmd.GetMessagePermits())
	}
	cs.sub.flow(cs, cmd.GetMessagePermits())
	return nil
}

// closeBeforeFlowGrace is how long the broker keeps a second
// CLOSE_CONSUMER for a consumer closed before its first FLOW, to send if
// it shows it missed the first (a zero-queue consumer sends its first
// FLOW only when the application receives).
const closeBeforeFlowGrace = time.Second

// closeConsumerWhenFlowed tells the client that the broker closed cs
// (CLOSE_CONSUMER) at once, as Pulsar's broker does while it closes a
// topic, so an unload answers after every client was told. The Go client
// registers a consumer's handler only after the SUBSCRIBE answer, then
// sends its first FLOW: a CLOSE_CONSUMER between the two is dropped, and
// the consumer would wait for ever. So for a consumer without a FLOW yet
// a second CLOSE_CONSUMER is held, sent when a FLOW for it comes (it
// missed the first) or after closeBeforeFlowGrace, and dropped when its
// client subscribes with that id again (it got the first).
func (c *serverConn) closeConsumerWhenFlowed(cs *consumer) {
	c.closeConsumerOnClient(cs.id, cs.sub.topic.movedTo.Load())
	if cs.flowed.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.closeAfterFlow == nil {
		c.closeAfterFlow = map[uint64]*time.Timer{}
	}
	if old := c.closeAfterFlow[cs.id]; old != nil {
		old.Stop()
	}
	id := cs.id
	c.closeAfterFlow[id] = time.AfterFunc(closeBeforeFlowGrace, func() { c.closeFlowedConsumer(id) })
}

// closeFlowedConsumer sends the CLOSE_CONSUMER held for consumer id, if
// one is.
func (c *serverConn) closeFlowedConsumer(id uint64) {
	c.mu.Lock()
	tm, held := c.closeAfterFlow[id]
	delete(c.closeAfterFlow, id)
	c.mu.Unlock()
	if held {
		tm.Stop()
		c.closeConsumerOnClient(id, nil) // it looks the topic up again
	}
}

// forgetHeldClose drops the CLOSE_CONSUMER held for consumer id: its
// client subscribes with that id again, so it knows the consumer is gone.
func (c *serverConn) forgetHeldClose(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tm, held := c.closeAfterFlow[id]; held {
		tm.Stop()
		delete(c.closeAfterFlow, id)
	}
}

func (c *serverConn) handleAck(cmd *pb.CommandAck) error {
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil {
		if cmd.RequestId == nil {
			return nil // acks for a closed consumer are dropped, as Pulsar does
		}
		return c.send(&pb.BaseCommand{Type: pb.BaseCommand_ACK_RESPONSE.Enum(), AckResponse: &pb.CommandAckResponse{
			ConsumerId: ptr(cmd.GetConsumerId()), RequestId: cmd.RequestId,
			Error: pb.ServerError_ConsumerNotFound.Enum(), Message: ptr("no such consumer")}})
	}
	if cmd.TxnidMostBits != nil || cmd.TxnidLeastBits != nil {
		return c.handleTxnAck(cs, cmd)
	}
	if cs.sub.traced() {
		c.b.log.Info("trace: reader ack", "subscription", cs.sub.name, "consumer", cs.id, "type", cmd.GetAckType().String(),
			"ids", fmt.Sprint(positionsOf(cmd.GetMessageId())))
	}
	var positions []managedledger.Position
	var partial []batchAck
	for _, id := range cmd.GetMessageId() {
		if len(id.GetAckSet()) > 0 {
			if c.b.cfg.AcknowledgmentAtBatchIndexLevelEnabled {
				partial = append(partial, batchAck{pos: position(id), ackSet: ackSetOf(id.GetAckSet())})
			}
			continue // otherwise the entry stays until acknowledged whole
		}
		positions = append(positions, position(id))
	}
	cumulative := cmd.GetAckType() == pb.CommandAck_Cumulative
	var err error
	if len(positions) > 0 {
		err = cs.sub.ack(c.b.ctx, cs, cumulative, positions) // applied even if the connection goes
	}
	if len(partial) > 0 && err == nil {
		err = cs.sub.ackBatchIndexes(c.b.ctx, cs, cumulative, partial)
	}
	if errors.Is(err, errCumulativeAckNotAllowed) {
		err = nil // ignored (nothing moved) and answered as a success, as Pulsar's broker does
	}
	if cmd.RequestId == nil {
		return nil
	}
	resp := &pb.CommandAckResponse{ConsumerId: ptr(cs.id), RequestId: cmd.RequestId}
	if err != nil {
		resp.Error, resp.Message = pb.ServerError_UnknownError.Enum(), ptr(err.Error())
	}
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_ACK_RESPONSE.Enum(), AckResponse: resp})
}

func (c *serverConn) handleRedeliver(cmd *pb.CommandRedeliverUnacknowledgedMessages) error {
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil {
		return nil
	}
	// The ids count only in individual-ack mode, as on Pulsar: an
	// Exclusive or Failover consumer gets everything it has not
	// acknowledged again (and a client that cleared its queue waits for
	// all of it).
	var positions []managedledger.Position
	if cs.sub.individualAck() {
		for _, id := range cmd.GetMessageIds() {
			positions = append(positions, position(id))
		}
	}
	cs.sub.redeliver(cs, positions, cmd.ConsumerEpoch)
	return nil
}

// registerConsumer adds cs to the connection unless it closed or the id
// is taken (then existing is the consumer holding it, if any).
func (c *serverConn) registerConsumer(cs *consumer) (existing *consumer, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q, dup := c.consumers[cs.id]; dup || c.closed {
		return q, false
	}
	c.consumers[cs.id] = cs
	return nil, true
}

// restartable reports whether a SUBSCRIBE with existing's id is its own
// client subscribing it again: same topic and subscription, and created.
func (c *serverConn) restartable(existing *consumer, topic TopicName, sub string) bool {
	return existing.sub.topic.name == topic && existing.sub.name == sub && existing.created.Load()
}

// retireResubscribed closes a live consumer whose client subscribed again
// with its id on this connection, as if the client had closed it: what it
// was sent and did not acknowledge goes out again, and the SUBSCRIBE then
// opens a new one (a reader's at the start id it names) that has no
// permits until the client's FLOW. Both official clients subscribe again
// only after discarding what they had queued for the consumer, and follow
// the answer with a fresh FLOW. Answering success with nothing changed,
// as Pulsar's broker does, left what the client discarded in flight to a
// durable consumer for ever, or behind a reader's cursor: lost (the Go
// client, v0.19, subscribes twice when two reconnects were asked for).
func (c *serverConn) retireResubscribed(existing *consumer) {
	if c.removeConsumer(existing.id) != existing {
		return // closed meanwhile
	}
	c.log.Info("SUBSCRIBE repeated for a live consumer; restarting it",
		"topic", existing.sub.topic.name.String(), "subscription", existing.sub.name, "consumer", existing.id)
	existing.sub.removeConsumer(existing)
	// Its messages already assigned are queued before the new consumer's
	// SUCCESS, so none of them reaches the client after it.
	existing.sub.awaitAssignedWrites()
}

// answerExistingConsumer answers a SUBSCRIBE whose id is taken on this
// connection, as answerExistingProducer does for producers.
func (c *serverConn) answerExistingConsumer(existing *consumer, topic TopicName, sub string, reqID uint64) {
	switch {
	case existing == nil:
		_ = c.sendError(reqID, pb.ServerError_ServiceNotReady, "connection is closing")
	case existing.sub.topic.name != topic || existing.sub.name != sub:
		_ = c.sendError(reqID, pb.ServerError_ConsumerBusy, fmt.Sprintf("consumer id %d is in use on this connection", existing.id))
	case !existing.created.Load():
		_ = c.sendError(reqID, pb.ServerError_ServiceNotReady, fmt.Sprintf("consumer id %d is still being created", existing.id))
	default:
		_ = c.sendSuccess(reqID)
	}
}

// dropConsumer removes cs from the connection if its id still names cs.
func (c *serverConn) dropConsumer(cs *consumer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.consumers[cs.id] == cs {
		delete(c.consumers, cs.id)
	}
}

func (c *serverConn) hasConsumer(cs *consumer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.consumers[cs.id] == cs
}

func (c *serverConn) removeConsumer(id uint64) *consumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.consumers[id]
	delete(c.consumers, id)
	return cs
}

func (c *serverConn) handleCloseConsumer(cmd *pb.CommandCloseConsumer) error {
	if cs := c.removeConsumer(cmd.GetConsumerId()); cs != nil {
		cs.sub.removeConsumer(cs)
	}
	return c.sendSuccess(cmd.GetRequestId())
}

func (c *serverConn) handleUnsubscribe(cmd *pb.CommandUnsubscribe) error {
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil { // Pulsar's code for an unknown consumer here
		return c.sendError(cmd.GetRequestId(), pb.ServerError_MetadataError, "Consumer not found")
	}
	if err := cs.sub.topic.unsubscribe(c.b.ctx, cs.sub, cs); err != nil {
		code := pb.ServerError_MetadataError
		if errors.Is(err, errSubscriptionBusy) {
			code = pb.ServerError_ConsumerBusy
		}
		return c.sendError(cmd.GetRequestId(), code, err.Error())
	}
	c.removeConsumer(cs.id)
	return c.sendSuccess(cmd.GetRequestId())
}

func (c *serverConn) handleGetLastMessageID(cmd *pb.CommandGetLastMessageId) error {
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil { // Pulsar's code for an unknown consumer here
		return c.sendError(cmd.GetRequestId(), pb.ServerError_MetadataError, "Consumer not found")
	}
	ml := cs.sub.topic.ml
	last := ml.LastConfirmed()
	if cs.sub.topic.txns.Load() != nil {
		// Not past an open transaction's first message, nor a marker or
		// an aborted message: Reader.HasNext must not promise one that
		// will not come.
		last = cs.sub.topic.lastDispatchable(c.ctx)
	}
	lastID := lastMessageID(last)
	// The last entry may be a batch: clients (Reader.HasNext) need the
	// index of its last message.
	if e, err := ml.ReadEntry(c.ctx, last); err == nil {
		if n := entryInfoOf(e.Data).messages; n > 1 {
			lastID.BatchIndex = ptr(int32(n - 1))
		}
	}
	md := cs.sub.cursor.MarkDeletePosition()
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE.Enum(),
		GetLastMessageIdResponse: &pb.CommandGetLastMessageIdResponse{
			LastMessageId: lastID, RequestId: ptr(cmd.GetRequestId()),
			ConsumerMarkDeletePosition: lastMessageID(md)}})
}

// lastMessageID encodes a position that may be "before the first entry"
// (entry -1), which the protocol carries as the all-ones uint64.
func lastMessageID(p managedledger.Position) *pb.MessageIdData {
	return &pb.MessageIdData{LedgerId: ptr(uint64(p.LedgerID)), EntryId: ptr(uint64(p.EntryID))}
}

// handleConsumerStats answers CONSUMER_STATS (the Java client's
// Consumer.getStats on the broker side) from the consumer's subscription.
func (c *serverConn) handleConsumerStats(cmd *pb.CommandConsumerStats) error {
	reqID := cmd.GetRequestId()
	resp := &pb.CommandConsumerStatsResponse{RequestId: &reqID}
	if cs := c.consumer(cmd.GetConsumerId()); cs == nil {
		resp.ErrorCode, resp.ErrorMessage = pb.ServerError_ConsumerNotFound.Enum(), ptr("no such consumer")
	} else {
		permits, unacked := cs.sub.consumerCounts(cs)
		resp.ConsumerName, resp.AvailablePermits, resp.UnackedMessages = &cs.name, ptr(uint64(max(permits, 0))), ptr(uint64(unacked))
		resp.Address, resp.Type = ptr(c.t.RemoteAddr().String()), ptr(cs.sub.kind().String())
		resp.MsgBacklog = ptr(uint64(max(cs.sub.cursor.Backlog(), 0)))
	}
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS_RESPONSE.Enum(), ConsumerStatsResponse: resp})
}

// positionsOf is ids as positions (for the reader trace).
func positionsOf(ids []*pb.MessageIdData) []managedledger.Position {
	out := make([]managedledger.Position, len(ids))
	for i, id := range ids {
		out[i] = position(id)
	}
	return out
}
