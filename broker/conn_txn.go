package broker

// Transaction commands.
//
// Behaviour:
//   - TC_CLIENT_CONNECT loads the coordinator (txncoord.go) and answers
//     once it is ready; NEW_TXN, ADD_PARTITION_TO_TXN,
//     ADD_SUBSCRIPTION_TO_TXN and END_TXN go to the coordinator the
//     request names (tc_id, else the transaction id's most bits), off the
//     event loop, answered once its log holds the change (END_TXN: once
//     the transaction ended on every partition and subscription).
//   - END_TXN_ON_PARTITION and END_TXN_ON_SUBSCRIPTION come from
//     coordinators (a broker's, with authorization on: a superuser
//     role) to the owner of the topic.
//   - Errors are Pulsar's codes: TransactionNotFound, InvalidTxnStatus,
//     TransactionConflict, TransactionCoordinatorNotFound (not served
//     here: the client looks the coordinator up again), NotAllowed with
//     "Transactions are not enabled." when the broker has none.
//   - A SEND in a transaction is stored with the transaction id in its
//     metadata; the first one on a topic creates the topic's transaction
//     buffer first (off the event loop, with the connection's reading
//     paused so the producer's order holds). An ACK in a transaction is
//     held by the subscription (pendingack.go), also off the loop.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/txn"
	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// txnErrorCode is the ServerError answering err.
func txnErrorCode(err error) pb.ServerError {
	switch {
	case errors.Is(err, errTxnDisabled):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, txn.ErrNotFound):
		return pb.ServerError_TransactionNotFound
	case errors.Is(err, txn.ErrInvalidStatus), errors.Is(err, errTxnEnded):
		return pb.ServerError_InvalidTxnStatus
	case errors.Is(err, errTxnConflict):
		return pb.ServerError_TransactionConflict
	case errors.Is(err, txn.ErrClosed), errors.Is(err, errNotOwner):
		return pb.ServerError_TransactionCoordinatorNotFound
	case errors.Is(err, errTooManyTxns):
		return pb.ServerError_ServiceNotReady
	}
	return pb.ServerError_UnknownError
}

// errorFields are a response's error and message for err (both nil when
// err is nil).
func errorFields(err error) (*pb.ServerError, *string) {
	if err == nil {
		return nil, nil
	}
	return txnErrorCode(err).Enum(), ptr(err.Error())
}

// errTooManyTxns: maxActiveTransactionsPerCoordinator is reached.
var errTooManyTxns = errors.New("the coordinator has reached maxActiveTransactionsPerCoordinator")

// txnRequest runs fn off the event loop with the broker's context. When
// fn's request named a coordinator this broker does not serve, the
// connection is closed after the answer: the Go client's coordinator
// handler looks the coordinator up again only when its connection
// closes, and would otherwise ask here for ever.
func (c *serverConn) txnRequest(what string, fn func(ctx context.Context) error) error {
	return c.txnRequestWithin(what, time.Minute, fn)
}

// txnRequestWithin is txnRequest with fn's context ending after within,
// or only with the connection when within is 0: for the requests that
// wait for nothing but the coordinator's loading (bounded there), whose
// timer per request was a measurable part of a transaction's cost.
func (c *serverConn) txnRequestWithin(what string, within time.Duration, fn func(ctx context.Context) error) error {
	c.goSafe(what, func() {
		ctx := c.ctx
		if within > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, within)
			defer cancel()
		}
		if err := fn(ctx); errors.Is(err, errCoordinatorElsewhere) {
			c.t.Close(fmt.Errorf("%s: %w", what, err))
		}
	})
	return nil
}

func (c *serverConn) handleTcClientConnect(cmd *pb.CommandTcClientConnectRequest) error {
	return c.txnRequestWithin("TC_CLIENT_CONNECT", 0, func(ctx context.Context) error {
		_, err := c.b.coordinator(ctx, cmd.GetTcId())
		if err == nil {
			c.b.registerTCConn(cmd.GetTcId(), c)
		}
		code, msg := errorFields(err)
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_RESPONSE.Enum(),
			TcClientConnectResponse: &pb.CommandTcClientConnectResponse{RequestId: cmd.RequestId, Error: code, Message: msg}})
		return err
	})
}

func (c *serverConn) handleNewTxn(cmd *pb.CommandNewTxn) error {
	// txn_ttl_seconds carries milliseconds: every official client sends
	// its timeout in milliseconds in it, and Pulsar reads it so.
	timeout := time.Duration(cmd.GetTxnTtlSeconds()) * time.Millisecond
	if co := c.b.readyCoordinator(cmd.GetTcId()); co != nil {
		// The common case waits for nothing (the record rides a later
		// append): answered here, without a hand-off.
		id, done, err := co.TryNew(timeout)
		if done || err != nil {
			return c.answerNewTxn(cmd, id, err)
		}
	}
	return c.txnRequestWithin("NEW_TXN", 0, func(ctx context.Context) error {
		co, err := c.b.coordinator(ctx, cmd.GetTcId())
		var id txn.ID
		if err == nil {
			if err = c.b.txnRoom(co); err == nil {
				id, err = co.New(timeout)
			}
		}
		_ = c.answerNewTxn(cmd, id, err)
		return err
	})
}

// answerNewTxn sends NEW_TXN's response: id, or err.
func (c *serverConn) answerNewTxn(cmd *pb.CommandNewTxn, id txn.ID, err error) error {
	resp := &pb.CommandNewTxnResponse{RequestId: cmd.RequestId}
	if err == nil {
		resp.TxnidMostBits, resp.TxnidLeastBits = ptr(id.Most), ptr(id.Least)
	}
	resp.Error, resp.Message = errorFields(err)
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN_RESPONSE.Enum(), NewTxnResponse: resp})
}

func (c *serverConn) handleAddPartitionToTxn(cmd *pb.CommandAddPartitionToTxn) error {
	id := txn.ID{Most: cmd.GetTxnidMostBits(), Least: cmd.GetTxnidLeastBits()}
	return c.txnRequestWithin("ADD_PARTITION_TO_TXN", 0, func(ctx context.Context) error {
		co, err := c.b.coordinator(ctx, id.Most)
		for _, p := range cmd.GetPartitions() {
			if err != nil {
				break
			}
			if name, perr := ParseTopicName(p); perr != nil {
				err = perr
			} else if _, aerr := c.authorizeTopic(auth.OpProduce, name, ""); aerr != nil {
				err = aerr
			}
		}
		if err == nil {
			err = co.AddPartitions(id, cmd.GetPartitions())
		}
		code, msg := errorFields(err)
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE.Enum(),
			AddPartitionToTxnResponse: &pb.CommandAddPartitionToTxnResponse{RequestId: cmd.RequestId,
				TxnidMostBits: cmd.TxnidMostBits, TxnidLeastBits: cmd.TxnidLeastBits, Error: code, Message: msg}})
		return err
	})
}

func (c *serverConn) handleAddSubscriptionToTxn(cmd *pb.CommandAddSubscriptionToTxn) error {
	id := txn.ID{Most: cmd.GetTxnidMostBits(), Least: cmd.GetTxnidLeastBits()}
	return c.txnRequestWithin("ADD_SUBSCRIPTION_TO_TXN", 0, func(ctx context.Context) error {
		co, err := c.b.coordinator(ctx, id.Most)
		var subs []txn.Subscription
		for _, s := range cmd.GetSubscription() {
			if err != nil {
				break
			}
			if name, perr := ParseTopicName(s.GetTopic()); perr != nil {
				err = perr
			} else if _, aerr := c.authorizeTopic(auth.OpConsume, name, s.GetSubscription()); aerr != nil {
				err = aerr
			}
			subs = append(subs, txn.Subscription{Topic: s.GetTopic(), Name: s.GetSubscription()})
		}
		if err == nil {
			err = co.AddSubscriptions(id, subs)
		}
		code, msg := errorFields(err)
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE.Enum(),
			AddSubscriptionToTxnResponse: &pb.CommandAddSubscriptionToTxnResponse{RequestId: cmd.RequestId,
				TxnidMostBits: cmd.TxnidMostBits, TxnidLeastBits: cmd.TxnidLeastBits, Error: code, Message: msg}})
		return err
	})
}

func (c *serverConn) handleEndTxn(cmd *pb.CommandEndTxn) error {
	id := txn.ID{Most: cmd.GetTxnidMostBits(), Least: cmd.GetTxnidLeastBits()}
	return c.txnRequest("END_TXN", func(ctx context.Context) error {
		co, err := c.b.coordinator(ctx, id.Most)
		if err == nil {
			err = co.End(ctx, id, cmd.GetTxnAction() == pb.TxnAction_COMMIT)
		}
		if c.b.cfg.TraceReaders {
			c.b.log.Info("trace: END_TXN", "txn", id.String(), "action", cmd.GetTxnAction().String(), "err", err)
		}
		code, msg := errorFields(err)
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_RESPONSE.Enum(),
			EndTxnResponse: &pb.CommandEndTxnResponse{RequestId: cmd.RequestId,
				TxnidMostBits: cmd.TxnidMostBits, TxnidLeastBits: cmd.TxnidLeastBits, Error: code, Message: msg}})
		return err
	})
}

// authorizeBroker allows the coordinator-to-owner commands to superusers
// only (the brokers' role), when authorization is on.
func (c *serverConn) authorizeBroker(what string) error {
	z := c.b.cfg.Authorization
	if z == nil {
		return nil
	}
	return z.AllowSuperUserAs(c.connSubject(), what)
}

func (c *serverConn) handleEndTxnOnPartition(cmd *pb.CommandEndTxnOnPartition) error {
	id := txn.ID{Most: cmd.GetTxnidMostBits(), Least: cmd.GetTxnidLeastBits()}
	return c.txnRequest("END_TXN_ON_PARTITION", func(ctx context.Context) error {
		err := c.endOnTopic(ctx, "END_TXN_ON_PARTITION", cmd.GetTopic(), func(name TopicName) error {
			return c.b.endTxnOnPartition(ctx, name, id, cmd.GetTxnAction() == pb.TxnAction_COMMIT)
		})
		code, msg := errorFields(err)
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_PARTITION_RESPONSE.Enum(),
			EndTxnOnPartitionResponse: &pb.CommandEndTxnOnPartitionResponse{RequestId: cmd.RequestId,
				TxnidMostBits: cmd.TxnidMostBits, TxnidLeastBits: cmd.TxnidLeastBits, Error: code, Message: msg}})
		return err
	})
}

func (c *serverConn) handleEndTxnOnSubscription(cmd *pb.CommandEndTxnOnSubscription) error {
	id := txn.ID{Most: cmd.GetTxnidMostBits(), Least: cmd.GetTxnidLeastBits()}
	sub := cmd.GetSubscription()
	return c.txnRequest("END_TXN_ON_SUBSCRIPTION", func(ctx context.Context) error {
		err := c.endOnTopic(ctx, "END_TXN_ON_SUBSCRIPTION", sub.GetTopic(), func(name TopicName) error {
			return c.b.endTxnOnSubscription(ctx, name, sub.GetSubscription(), id, cmd.GetTxnAction() == pb.TxnAction_COMMIT)
		})
		code, msg := errorFields(err)
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_SUBSCRIPTION_RESPONSE.Enum(),
			EndTxnOnSubscriptionResponse: &pb.CommandEndTxnOnSubscriptionResponse{RequestId: cmd.RequestId,
				TxnidMostBits: cmd.TxnidMostBits, TxnidLeastBits: cmd.TxnidLeastBits, Error: code, Message: msg}})
		return err
	})
}

// endOnTopic checks an END_TXN_ON_* and runs end on its topic here.
func (c *serverConn) endOnTopic(ctx context.Context, what, topic string, end func(TopicName) error) error {
	if !c.b.cfg.TransactionCoordinatorEnabled {
		return errTxnDisabled
	}
	if err := c.authorizeBroker(what); err != nil {
		return err
	}
	name, err := ParseTopicName(topic)
	if err != nil {
		return err
	}
	if !c.b.servesTopic(name) {
		return fmt.Errorf("topic %s: %w", name, errNotOwner)
	}
	return end(name)
}

// sendInTxn answers a transactional SEND that handleSend cannot store
// yet: refused without transactions; else the topic's transaction buffer
// is made first (off the event loop, the connection's reading paused so
// the producer's order holds) and the SEND handled again.
func (c *serverConn) sendInTxn(p *producer, cmd *pb.CommandSend, f wire.Frame) error {
	if !c.b.cfg.TransactionCoordinatorEnabled {
		// Stored as a plain message it would be delivered before, or
		// without, its transaction's commit.
		return c.sendSendError(cmd.GetProducerId(), cmd.GetSequenceId(), pb.ServerError_NotAllowedError, errTxnDisabled.Error())
	}
	// The frame aliases the connection's buffer and the command is
	// reused: both are copied for the goroutine.
	cmd = proto.Clone(cmd).(*pb.CommandSend)
	e, err := wire.ParseEntry(bytes.Clone(f.Entry.Bytes()))
	if err != nil {
		return err
	}
	f.Entry = e
	return c.offload("SEND", func() error {
		if _, err := p.topic.buffer(c.ctx); err != nil {
			c.log.Warn("transaction buffer not created; transactional SEND refused", "topic", p.topic.name.String(), "err", err)
			return c.sendSendError(cmd.GetProducerId(), cmd.GetSequenceId(), pb.ServerError_PersistenceError, err.Error())
		}
		return c.handleSend(cmd, f)
	})
}

// withTxnID is the entry with its transaction id in its metadata (md,
// decoded by checkEntry) and the CRC32C storage needs: Pulsar's Java
// client sets the id there, the Go client does not, and recovery of the
// transaction buffer reads it back. The payload is copied once, into a
// buffer with storage's headroom in front (owned: topic.addEntryFrom
// copies nothing more), and not checksummed again
// (wire.Entry.WithMetadata). An entry that has the id already is returned
// as it is (not owned).
func withTxnID(e wire.Entry, md *pb.MessageMetadata, id txn.ID) (entry []byte, owned bool, sum crc32c.Known, err error) {
	if md.TxnidMostBits != nil && md.GetTxnidMostBits() == id.Most && md.GetTxnidLeastBits() == id.Least {
		return e.Bytes(), false, e.Sum(), nil
	}
	with := proto.Clone(md).(*pb.MessageMetadata)
	with.TxnidMostBits, with.TxnidLeastBits = ptr(id.Most), ptr(id.Least)
	// WithMetadata appends the payload to the headroom and metadata: the
	// buffer is grown by append, which leaves the bytes it copies
	// unzeroed (a make of the whole size would clear it all first).
	out, sum, err := e.WithMetadata(managedledger.WithHeadroom(nil), with)
	if err != nil {
		return nil, false, crc32c.Known{}, fmt.Errorf("transactional SEND: set the transaction id: %w", err)
	}
	return out, true, sum, nil
}

// handleTxnAck holds an ACK in a transaction on the subscription, off
// the event loop with reading paused (it saves the held acknowledgements
// before answering, and later ACKs of the consumer must not overtake it).
func (c *serverConn) handleTxnAck(cs *consumer, cmd *pb.CommandAck) error {
	cmd = proto.Clone(cmd).(*pb.CommandAck)
	answer := func(err error) error {
		if cmd.RequestId == nil {
			return nil
		}
		code, msg := errorFields(err)
		return c.send(&pb.BaseCommand{Type: pb.BaseCommand_ACK_RESPONSE.Enum(), AckResponse: &pb.CommandAckResponse{
			ConsumerId: ptr(cs.id), RequestId: cmd.RequestId, TxnidMostBits: cmd.TxnidMostBits,
			TxnidLeastBits: cmd.TxnidLeastBits, Error: code, Message: msg}})
	}
	if !c.b.cfg.TransactionCoordinatorEnabled {
		// Applied now, it would stand even if the transaction aborted.
		return answer(errTxnDisabled)
	}
	return c.offload("ACK", func() error {
		// The broker's context, as a plain ack's: a save under way is
		// not cut short because the connection closes.
		err := cs.sub.txnAck(c.b.ctx, cs, txn.ID{Most: cmd.GetTxnidMostBits(), Least: cmd.GetTxnidLeastBits()}, cmd)
		if err != nil {
			c.log.Info("acknowledgement in a transaction refused", "topic", cs.sub.topic.name.String(),
				"subscription", cs.sub.name, "err", err)
		}
		return answer(err)
	})
}
