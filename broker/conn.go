package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// transport is what a connection needs from the network layer (netio.Conn).
type transport interface {
	// Write sends bufs back to back; safe from any goroutine.
	Write(bufs ...[]byte) error
	// Close closes the connection, logging reason.
	Close(reason error)
	RemoteAddr() net.Addr
	// PauseReading stops frame delivery until ResumeReading.
	PauseReading()
	ResumeReading()
	// Congested reports a write queue above its high-water mark; Drained
	// is closed once it is back under half of it.
	Congested() bool
	Drained() <-chan struct{}
}

// serverConn is one client connection's protocol state.
//
// Lock rules: mu guards producers, consumers and pendingSends. Frames
// arrive one at a time from the event loop; callbacks from storage and
// goroutines answering slow commands take mu briefly.
type serverConn struct {
	b   *Broker
	t   transport
	log *slog.Logger
	// ctx is the connection's: derived from the broker's, cancelled when
	// the connection closes, so work a command started for this client
	// (topic loads, lookups, schema reads) stops with it.
	ctx    context.Context
	cancel context.CancelFunc
	cmd    pb.BaseCommand // reused for every frame (the event loop is single-threaded per connection)
	// sendMetadata is where SEND decodes an entry's metadata to check it;
	// reused like cmd.
	sendMetadata pb.MessageMetadata

	mu           sync.Mutex
	connected    bool
	producers    map[uint64]*producer
	consumers    map[uint64]*consumer
	pendingSends int
	// closedProducers are ids of producers closed on this connection.
	closedProducers recentIDs
	// pausedFor holds the reasons reading is paused (pause* bits); the
	// transport is paused while any is set.
	pausedFor uint8
	closed    bool
	// closeAfterFlow holds the CLOSE_CONSUMERs of consumers closed before
	// their first FLOW, by consumer id, each with its grace timer
	// (closeConsumerWhenFlowed).
	closeAfterFlow map[uint64]*time.Timer
	// endOfTopic: the client handles REACHED_END_OF_TOPIC (set at CONNECT).
	endOfTopic atomic.Bool
	// watchers (guarded by mu) are the connection's topic-list watchers
	// by id (topicwatch.go).
	watchers map[uint64]*topicWatcher
	// clientVersion (guarded by mu) is what the client's CONNECT said it
	// is; stats show it for each producer and consumer, as Pulsar's do.
	clientVersion string
	// authn (guarded by mu) is who the connection acts as and its
	// credentials' expiry, set at CONNECT (empty with authentication off;
	// conn_auth.go).
	authn connAuth
	// brokerEntryMetadata: MESSAGE frames carry the stored broker entry
	// metadata (exposed by the broker, supported by the client; set at
	// CONNECT); otherwise it is cut off.
	brokerEntryMetadata atomic.Bool
	// protocol is the protocol version agreed at CONNECT; commands and
	// fields newer than it are not sent (protocolgate.go).
	protocol atomic.Int32
}

func (b *Broker) newConn(t transport) *serverConn {
	c := &serverConn{b: b, t: t, log: b.log.With("remote", t.RemoteAddr().String()),
		producers: map[uint64]*producer{}, consumers: map[uint64]*consumer{}}
	c.ctx, c.cancel = context.WithCancel(b.ctx)
	b.track(c, true)
	return c
}

// handleFrame parses and serves one frame. An error closes the
// connection. The frame's command is checked by the decoder (its body is
// present, strings valid UTF-8: wire/check.go) before any handler runs; a
// panic in a handler closes this connection only (recover.go).
func (c *serverConn) handleFrame(frame []byte) (err error) {
	defer func() {
		if rerr := c.b.recovered(recover(), boundaryCommand, c.log, "command", c.cmd.GetType().String()); rerr != nil {
			err = rerr
		}
	}()
	f, n, err := wire.ParseFrame(frame, c.b.cfg.MaxMessageSize+wire.FramePadding, &c.cmd)
	if err != nil {
		return fmt.Errorf("bad frame: %w", err)
	}
	if n != len(frame) {
		return fmt.Errorf("bad frame: %d bytes parsed of %d", n, len(frame))
	}
	cmd := f.Command
	if !c.isConnected() && cmd.GetType() != pb.BaseCommand_CONNECT {
		return fmt.Errorf("%s before CONNECT", cmd.GetType())
	}
	if c.b.testHookCommand != nil {
		c.b.testHookCommand(cmd)
	}
	return c.dispatch(cmd, f)
}

// Reasons to stop reading a connection.
const (
	// pauseBackPressure: maxPendingPublishRequestsPerConnection SENDs
	// await storage.
	pauseBackPressure uint8 = 1 << iota
	// pauseOffloaded: a command too large to serve on the event loop is
	// served on a goroutine; the next frame waits for it, so commands are
	// still served in order.
	pauseOffloaded
	// pausePublishRate: a topic of this connection's producers is over its
	// publish rate (throttlePublish).
	pausePublishRate
)

func (c *serverConn) pauseLocked(reason uint8) {
	if c.pausedFor == 0 {
		c.t.PauseReading()
	}
	c.pausedFor |= reason
}

func (c *serverConn) resumeLocked(reason uint8) {
	if c.pausedFor&reason == 0 {
		return
	}
	c.pausedFor &^= reason
	if c.pausedFor == 0 {
		c.t.ResumeReading()
	}
}

// offloadAbove is the number of message ids above which an ACK or
// REDELIVER is served off the event loop: about a microsecond each, so a
// frame full of them (hundreds of thousands) would otherwise stall every
// connection of that loop for a large part of a second.
const offloadAbove = 1024

// offload serves a large command on its own goroutine with reading
// paused; an error closes the connection, as it would on the loop.
func (c *serverConn) offload(what string, serve func() error) error {
	c.mu.Lock()
	c.pauseLocked(pauseOffloaded)
	c.mu.Unlock()
	c.goSafe(what, func() {
		err := serve()
		c.mu.Lock()
		c.resumeLocked(pauseOffloaded)
		c.mu.Unlock()
		if err != nil {
			c.t.Close(err)
		}
	})
	return nil
}

func (c *serverConn) isConnected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// dispatch routes a command to its handler (conn_*.go).
func (c *serverConn) dispatch(cmd *pb.BaseCommand, f wire.Frame) error {
	switch cmd.GetType() {
	case pb.BaseCommand_CONNECT:
		return c.handleConnect(cmd.GetConnect())
	case pb.BaseCommand_PING:
		return c.send(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
	case pb.BaseCommand_PONG:
		return nil
	case pb.BaseCommand_LOOKUP:
		return c.handleLookup(cmd.GetLookupTopic())
	case pb.BaseCommand_PARTITIONED_METADATA:
		return c.handlePartitionedMetadata(cmd.GetPartitionMetadata())
	case pb.BaseCommand_PRODUCER:
		return c.handleProducer(cmd.GetProducer())
	case pb.BaseCommand_SEND:
		return c.handleSend(cmd.GetSend(), f)
	case pb.BaseCommand_CLOSE_PRODUCER:
		return c.handleCloseProducer(cmd.GetCloseProducer())
	case pb.BaseCommand_SUBSCRIBE:
		return c.handleSubscribe(cmd.GetSubscribe())
	case pb.BaseCommand_FLOW:
		return c.handleFlow(cmd.GetFlow())
	case pb.BaseCommand_ACK:
		ack := cmd.GetAck()
		if len(ack.GetMessageId()) > offloadAbove {
			return c.offload("ACK", func() error { return c.handleAck(ack) })
		}
		return c.handleAck(ack)
	case pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES:
		r := cmd.GetRedeliverUnacknowledgedMessages()
		if len(r.GetMessageIds()) > offloadAbove {
			return c.offload("REDELIVER_UNACKNOWLEDGED_MESSAGES", func() error { return c.handleRedeliver(r) })
		}
		return c.handleRedeliver(r)
	case pb.BaseCommand_CLOSE_CONSUMER:
		return c.handleCloseConsumer(cmd.GetCloseConsumer())
	case pb.BaseCommand_UNSUBSCRIBE:
		return c.handleUnsubscribe(cmd.GetUnsubscribe())
	case pb.BaseCommand_GET_LAST_MESSAGE_ID:
		return c.handleGetLastMessageID(cmd.GetGetLastMessageId())
	case pb.BaseCommand_CONSUMER_STATS:
		return c.handleConsumerStats(cmd.GetConsumerStats())
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		return c.handleGetTopicsOfNamespace(cmd.GetGetTopicsOfNamespace())
	case pb.BaseCommand_SEEK:
		return c.handleSeek(cmd.GetSeek())
	case pb.BaseCommand_GET_SCHEMA:
		return c.handleGetSchema(cmd.GetGetSchema())
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		return c.handleGetOrCreateSchema(cmd.GetGetOrCreateSchema())
	case pb.BaseCommand_WATCH_TOPIC_LIST:
		return c.handleWatchTopicList(cmd.GetWatchTopicList())
	case pb.BaseCommand_WATCH_TOPIC_LIST_CLOSE:
		return c.handleWatchTopicListClose(cmd.GetWatchTopicListClose())
	case pb.BaseCommand_AUTH_RESPONSE:
		return c.handleAuthResponse(cmd.GetAuthResponse())
	case pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST, pb.BaseCommand_NEW_TXN, pb.BaseCommand_ADD_PARTITION_TO_TXN,
		pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN, pb.BaseCommand_END_TXN, pb.BaseCommand_END_TXN_ON_PARTITION,
		pb.BaseCommand_END_TXN_ON_SUBSCRIPTION:
		return c.dispatchTxn(cmd)
	}
	if clientOnly[cmd.GetType()] {
		// Pulsar's decoder has no broker handler for these and closes the
		// connection: a peer sending them is not a client.
		return fmt.Errorf("%s is sent by brokers, not to them", cmd.GetType())
	}
	c.log.Warn("unsupported command; answering with an error", "command", cmd.GetType().String())
	id, _ := wire.RequestID(cmd)
	return c.sendError(id, pb.ServerError_NotAllowedError, fmt.Sprintf("command %s is not supported", cmd.GetType()))
}

// dispatchTxn routes a transaction command (conn_txn.go). Without
// transactions each is answered, as Pulsar does, with ERROR NotAllowed
// "Transactions are not enabled." for its request id.
func (c *serverConn) dispatchTxn(cmd *pb.BaseCommand) error {
	if !c.b.cfg.TransactionCoordinatorEnabled {
		id, _ := wire.RequestID(cmd)
		return c.sendError(id, pb.ServerError_NotAllowedError, errTxnDisabled.Error())
	}
	switch cmd.GetType() {
	case pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST:
		return c.handleTcClientConnect(cmd.GetTcClientConnectRequest())
	case pb.BaseCommand_NEW_TXN:
		return c.handleNewTxn(cmd.GetNewTxn())
	case pb.BaseCommand_ADD_PARTITION_TO_TXN:
		return c.handleAddPartitionToTxn(cmd.GetAddPartitionToTxn())
	case pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN:
		return c.handleAddSubscriptionToTxn(cmd.GetAddSubscriptionToTxn())
	case pb.BaseCommand_END_TXN:
		return c.handleEndTxn(cmd.GetEndTxn())
	case pb.BaseCommand_END_TXN_ON_PARTITION:
		return c.handleEndTxnOnPartition(cmd.GetEndTxnOnPartition())
	default:
		return c.handleEndTxnOnSubscription(cmd.GetEndTxnOnSubscription())
	}
}

// clientOnly are the commands only a broker sends.
var clientOnly = map[pb.BaseCommand_Type]bool{
	pb.BaseCommand_CONNECTED: true, pb.BaseCommand_SEND_RECEIPT: true, pb.BaseCommand_SEND_ERROR: true,
	pb.BaseCommand_MESSAGE: true, pb.BaseCommand_SUCCESS: true, pb.BaseCommand_ERROR: true,
	pb.BaseCommand_PRODUCER_SUCCESS: true, pb.BaseCommand_PARTITIONED_METADATA_RESPONSE: true,
	pb.BaseCommand_LOOKUP_RESPONSE: true, pb.BaseCommand_CONSUMER_STATS_RESPONSE: true,
	pb.BaseCommand_REACHED_END_OF_TOPIC: true, pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE: true,
	pb.BaseCommand_ACTIVE_CONSUMER_CHANGE: true, pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE: true,
	pb.BaseCommand_GET_SCHEMA_RESPONSE: true, pb.BaseCommand_AUTH_CHALLENGE: true, pb.BaseCommand_ACK_RESPONSE: true,
	pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE: true, pb.BaseCommand_NEW_TXN_RESPONSE: true,
	pb.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE: true, pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE: true,
	pb.BaseCommand_END_TXN_RESPONSE: true, pb.BaseCommand_END_TXN_ON_PARTITION_RESPONSE: true,
	pb.BaseCommand_END_TXN_ON_SUBSCRIPTION_RESPONSE: true, pb.BaseCommand_TC_CLIENT_CONNECT_RESPONSE: true,
	pb.BaseCommand_WATCH_TOPIC_LIST_SUCCESS: true, pb.BaseCommand_WATCH_TOPIC_UPDATE: true,
	pb.BaseCommand_TOPIC_MIGRATED: true,
}

// send writes one simple frame.
func (c *serverConn) send(cmd *pb.BaseCommand) error {
	buf, err := wire.AppendSimpleFrame(nil, cmd)
	if err != nil {
		return fmt.Errorf("encode %s: %w", cmd.GetType(), err)
	}
	return c.t.Write(buf)
}

func (c *serverConn) sendError(requestID uint64, code pb.ServerError, msg string) error {
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_ERROR.Enum(), Error: &pb.CommandError{
		RequestId: &requestID, Error: code.Enum(), Message: &msg}})
}

func (c *serverConn) sendSuccess(requestID uint64) error {
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_SUCCESS.Enum(), Success: &pb.CommandSuccess{RequestId: &requestID}})
}

// sendMessage writes a MESSAGE frame: header, then the stored entry bytes
// unchanged, in one vectored write.
// h carries the redelivery count, ack set and epoch; the ids are set here.
func (c *serverConn) sendMessage(consumerID uint64, e managedledger.Entry, h wire.MessageHeader) {
	data := e.Data
	if !c.brokerEntryMetadata.Load() {
		data = wire.StripBrokerEntryMetadata(data)
	}
	if !c.speaks(protoMessageChecksum) {
		data = wire.SkipChecksum(data)
	}
	if !c.speaks(protoBatches) && entryInfoOf(e.Data).messages > 1 {
		// As Pulsar: a client without batches cannot be given one.
		c.t.Close(fmt.Errorf("batch entry %v for consumer %d; protocol v%d has no batches", e.Position, consumerID, c.protocol.Load()))
		return
	}
	// One allocation per message: the header stays referenced until the
	// event loop has written it.
	h.ConsumerID, h.LedgerID, h.EntryID = consumerID, uint64(e.Position.LedgerID), uint64(e.Position.EntryID)
	hdr, err := wire.AppendMessageFrameHeader(make([]byte, 0, 48), h, len(data))
	if err != nil {
		c.log.Error("cannot encode MESSAGE", "err", err)
		return
	}
	if err := c.t.Write(hdr, data); err != nil {
		c.log.Debug("write MESSAGE failed", "err", err)
	}
}

func messageID(p managedledger.Position) *pb.MessageIdData {
	return &pb.MessageIdData{LedgerId: ptr(uint64(p.LedgerID)), EntryId: ptr(uint64(p.EntryID))}
}

func position(id *pb.MessageIdData) managedledger.Position {
	return managedledger.Position{LedgerID: int64(id.GetLedgerId()), EntryID: int64(id.GetEntryId())}
}

func ptr[T any](v T) *T { return &v }

// closed is called by the network layer when the connection ends: every
// producer and consumer of the connection goes away.
func (c *serverConn) closedByNetwork(err error) {
	c.cancel()
	c.b.track(c, false)
	c.b.forgetTCConn(c)
	c.mu.Lock()
	c.closed = true
	producers, consumers, watchers := c.producers, c.consumers, c.watchers
	c.producers, c.consumers, c.watchers = map[uint64]*producer{}, map[uint64]*consumer{}, nil
	for _, tm := range c.closeAfterFlow {
		tm.Stop()
	}
	c.closeAfterFlow = nil
	c.mu.Unlock()
	for _, w := range watchers {
		c.b.watchers.remove(w)
	}
	for _, p := range producers {
		p.topic.removeProducer(p)
	}
	for _, cs := range consumers {
		cs.sub.removeConsumer(cs)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.log.Debug("connection closed", "err", err)
	}
}
