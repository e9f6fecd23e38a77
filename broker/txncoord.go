package broker

// Hosting transaction coordinators (package txn) and ending transactions
// on topics.
//
// Behaviour:
//   - Coordinator N lives on the broker that owns partition N of
//     persistent://pulsar/system/transaction_coordinator_assign. The
//     client looks that partition up and sends TC_CLIENT_CONNECT; the
//     owner loads the coordinator then (or on the first request naming
//     it) from its log, the managed ledger of
//     persistent://pulsar/system/__transaction_log_N. Opening that ledger
//     fences a previous owner's, so two brokers never both write it.
//   - Every second the broker aborts its coordinators' timed-out
//     transactions and drops the coordinators whose partition it no
//     longer owns or whose log failed (a client's next request loads
//     them again where they are owned); every ten seconds it trims their
//     logs.
//   - The assign topic's partitioned metadata is recorded with
//     TransactionCoordinators partitions the first time it is asked for
//     with transactions on (Pulsar's standalone does the same at start;
//     initialize-cluster-metadata records it for clusters).
//   - A coordinator ends a transaction on a partition or subscription
//     here when this broker serves the topic, else by sending
//     END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION to the topic's owner
//     (looked up through this broker, with the broker client's
//     credentials). A topic that does not exist has nothing to end.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/broker/replclient"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/txn"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// assignTopic is the partitioned topic whose partitions place the
// coordinators.
var assignTopic = TopicName{Domain: "persistent", Tenant: "pulsar", Namespace: "system", Local: "transaction_coordinator_assign"}

// errTxnDisabled refuses transaction commands on a broker without
// transactions (NotAllowed, with Pulsar's words).
//
//lint:ignore ST1005 Pulsar's words, which clients and tests match
var errTxnDisabled = errors.New("Transactions are not enabled.")

// txnLogName is coordinator tc's log.
func txnLogName(tc uint64) TopicName {
	n := assignTopic
	n.Local = "__transaction_log_" + strconv.FormatUint(tc, 10)
	return n
}

// coordinators are the coordinators this broker hosts.
type coordinators struct {
	loadMu sync.Mutex // serializes loads
	mu     sync.Mutex
	loaded map[uint64]*hostedCoordinator
	ticks  int
}

type hostedCoordinator struct {
	c  *txn.Coordinator
	ml managedledger.ManagedLedger
	// conns are the connections that sent TC_CLIENT_CONNECT for it:
	// closed when it leaves this broker, since the Go client looks a
	// coordinator up again only when its connection closes (an error
	// answer leaves it asking here for ever).
	conns map[*serverConn]struct{}
}

// errCoordinatorElsewhere: the coordinator is not (or no longer) served
// by this broker; the connection that asked is closed after the answer.
var errCoordinatorElsewhere = errors.New("transaction coordinator is not served by this broker")

// coordinator returns coordinator tc, loading it if this broker owns it.
func (b *Broker) coordinator(ctx context.Context, tc uint64) (*txn.Coordinator, error) {
	if !b.cfg.TransactionCoordinatorEnabled {
		return nil, errTxnDisabled
	}
	if !b.servesTopic(partitionName(assignTopic, int(tc))) {
		b.dropCoordinator(tc, "its assign partition is not owned here")
		return nil, fmt.Errorf("transaction coordinator %d: %w: %w", tc, errCoordinatorElsewhere, txn.ErrClosed)
	}
	if c := b.hostedCoordinator(tc); c != nil {
		return c, nil
	}
	b.txnCoords.loadMu.Lock()
	defer b.txnCoords.loadMu.Unlock()
	if c := b.hostedCoordinator(tc); c != nil {
		return c, nil
	}
	// Loading reads the log: bounded here, as the requests that ask for a
	// coordinator may carry only their connection's context.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := b.partitions(ctx, assignTopic)
	if err != nil {
		return nil, err
	}
	if tc >= uint64(n) {
		return nil, fmt.Errorf("transaction coordinator %d does not exist (%d configured): %w", tc, n, txn.ErrClosed)
	}
	return b.loadCoordinator(ctx, tc)
}

// readyCoordinator is coordinator tc if it is loaded here, working, and
// its assign partition still served here, without waiting for anything
// (nil otherwise, or when it has no room for another transaction: the
// caller then takes the path that may wait, and answers its errors).
func (b *Broker) readyCoordinator(tc uint64) *txn.Coordinator {
	if !b.cfg.TransactionCoordinatorEnabled || !b.servesTopic(partitionName(assignTopic, int(tc))) {
		return nil
	}
	h := b.loadedCoordinator(tc)
	if h == nil || h.c.Failed() != nil || b.txnRoom(h.c) != nil {
		return nil
	}
	return h.c
}

// txnRoom refuses another transaction past
// maxActiveTransactionsPerCoordinator.
func (b *Broker) txnRoom(c *txn.Coordinator) error {
	if limit := b.cfg.MaxActiveTransactionsPerCoordinator; limit > 0 && c.Ongoing() >= limit {
		return fmt.Errorf("%w (%d)", errTooManyTxns, limit)
	}
	return nil
}

// loadedCoordinator is coordinator tc's entry, if it is loaded here.
func (b *Broker) loadedCoordinator(tc uint64) *hostedCoordinator {
	b.txnCoords.mu.Lock()
	defer b.txnCoords.mu.Unlock()
	return b.txnCoords.loaded[tc]
}

func (b *Broker) hostedCoordinator(tc uint64) *txn.Coordinator {
	h := b.loadedCoordinator(tc)
	if h == nil {
		return nil
	}
	if err := h.c.Failed(); err != nil {
		b.dropCoordinator(tc, err.Error())
		return nil
	}
	return h.c
}

func (b *Broker) loadCoordinator(ctx context.Context, tc uint64) (*txn.Coordinator, error) {
	start := time.Now()
	ml, err := b.ledgers.Open(ctx, txnLogName(tc).ManagedLedgerName())
	if err != nil {
		return nil, fmt.Errorf("transaction coordinator %d: open log: %w", tc, err)
	}
	log, err := txn.OpenMLLog(ctx, ml)
	if err == nil {
		var c *txn.Coordinator
		c, err = txn.Recover(ctx, txn.Config{ID: tc, Log: log, Ender: txnEnder{b}, Logger: b.log, Go: b.workers.Go})
		if err == nil {
			b.txnCoords.mu.Lock()
			if b.txnCoords.loaded == nil {
				b.txnCoords.loaded = map[uint64]*hostedCoordinator{}
			}
			b.txnCoords.loaded[tc] = &hostedCoordinator{c: c, ml: ml}
			b.txnCoords.mu.Unlock()
			st := c.Stats()
			b.log.Info("transaction coordinator loaded", "coordinator", tc, "ongoing", st.Ongoing,
				"sequence", st.Sequence, "took", time.Since(start).Round(time.Millisecond))
			return c, nil
		}
	}
	_ = ml.Close(ctx)
	return nil, fmt.Errorf("transaction coordinator %d: %w", tc, err)
}

// dropCoordinator closes a hosted coordinator and its log.
func (b *Broker) dropCoordinator(tc uint64, why string) {
	b.txnCoords.mu.Lock()
	h := b.txnCoords.loaded[tc]
	delete(b.txnCoords.loaded, tc)
	b.txnCoords.mu.Unlock()
	if h == nil {
		return
	}
	h.c.Close()
	for c := range h.conns {
		c.t.Close(fmt.Errorf("transaction coordinator %d left this broker (%s): look it up again", tc, why))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = h.ml.Close(ctx)
	b.log.Info("transaction coordinator closed here", "coordinator", tc, "why", why)
}

// hostedCoordinators is a snapshot of the coordinators hosted here.
func (b *Broker) hostedCoordinators() map[uint64]*txn.Coordinator {
	b.txnCoords.mu.Lock()
	defer b.txnCoords.mu.Unlock()
	out := make(map[uint64]*txn.Coordinator, len(b.txnCoords.loaded))
	for tc, h := range b.txnCoords.loaded {
		out[tc] = h.c
	}
	return out
}

// tickCoordinators aborts timed-out transactions, flushes the records
// waiting for a ride, drops coordinators no longer served here and, every
// tenth tick, trims the logs.
func (b *Broker) tickCoordinators() {
	b.txnCoords.mu.Lock()
	b.txnCoords.ticks++
	trim := b.txnCoords.ticks%10 == 0
	b.txnCoords.mu.Unlock()
	for tc, c := range b.hostedCoordinators() {
		if !b.servesTopic(partitionName(assignTopic, int(tc))) {
			b.dropCoordinator(tc, "its assign partition is no longer owned here")
			continue
		}
		if err := c.Failed(); err != nil {
			b.dropCoordinator(tc, err.Error())
			continue
		}
		c.Expire()
		c.Flush()
		if trim {
			if err := c.Trim(b.ctx); err != nil {
				b.log.Warn("transaction log not trimmed", "coordinator", tc, "err", err)
			}
		}
	}
	for t := range b.topicPass() {
		if tb := t.txns.Load(); tb != nil {
			tb.maybeSave()
		}
	}
}

// closeCoordinators closes every hosted coordinator (broker shutdown).
func (b *Broker) closeCoordinators() {
	for tc := range b.hostedCoordinators() {
		b.dropCoordinator(tc, "broker shutting down")
	}
}

// ensureAssignTopic records the assign topic's partitions (and the
// pulsar/system namespace they need) when transactions are on and
// nothing recorded them yet.
func (b *Broker) ensureAssignTopic(ctx context.Context) (int, error) {
	res := b.cfg.Resources
	if res == nil || b.cfg.Metadata == nil {
		return b.cfg.TransactionCoordinators, nil // nothing to record them in (tests)
	}
	if err := res.CreateTenant(ctx, assignTopic.Tenant, resources.TenantInfo{AdminRoles: []string{},
		AllowedClusters: []string{b.cfg.ClusterName}}); err != nil && !errors.Is(err, resources.ErrExists) {
		return 0, fmt.Errorf("transactions: create tenant %s: %w", assignTopic.Tenant, err)
	}
	p := resources.NewPolicies()
	p.ReplicationClusters = []string{b.cfg.ClusterName}
	if _, err := res.CreateNamespace(ctx, assignTopic.Tenant, assignTopic.Namespace, p); err != nil && !errors.Is(err, resources.ErrExists) {
		return 0, fmt.Errorf("transactions: create namespace %s/%s: %w", assignTopic.Tenant, assignTopic.Namespace, err)
	}
	tn := resources.TopicName{Domain: assignTopic.Domain, Tenant: assignTopic.Tenant, Namespace: assignTopic.Namespace, Local: assignTopic.Local}
	err := res.CreatePartitionedTopic(ctx, tn, resources.PartitionedTopicMetadata{Partitions: b.cfg.TransactionCoordinators})
	if err != nil && !errors.Is(err, resources.ErrExists) {
		return 0, fmt.Errorf("transactions: record %s: %w", assignTopic, err)
	}
	b.log.Info("transaction coordinators recorded", "topic", assignTopic.String(), "partitions", b.cfg.TransactionCoordinators)
	return b.recordedPartitions(ctx, assignTopic)
}

// txnEnder ends transactions on topics for the coordinators (txn.Ender).
type txnEnder struct{ b *Broker }

func (e txnEnder) EndPartition(ctx context.Context, topic string, id txn.ID, commit bool) error {
	name, err := ParseTopicName(topic)
	if err != nil {
		return nil // never stored anything: nothing to end
	}
	if e.b.servesTopic(name) {
		return e.b.endTxnOnPartition(ctx, name, id, commit)
	}
	cmd := &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_PARTITION.Enum(), EndTxnOnPartition: &pb.CommandEndTxnOnPartition{
		TxnidMostBits: ptr(id.Most), TxnidLeastBits: ptr(id.Least), Topic: ptr(topic), TxnAction: txnAction(commit)}}
	resp, err := e.remote(ctx, topic, cmd, pb.BaseCommand_END_TXN_ON_PARTITION_RESPONSE,
		func(r uint64) { cmd.EndTxnOnPartition.RequestId = &r })
	if err != nil {
		return err
	}
	return remoteTxnError(resp.GetEndTxnOnPartitionResponse().Error, resp.GetEndTxnOnPartitionResponse().GetMessage())
}

func (e txnEnder) EndSubscription(ctx context.Context, sub txn.Subscription, id txn.ID, commit bool) error {
	name, err := ParseTopicName(sub.Topic)
	if err != nil {
		return nil
	}
	if e.b.servesTopic(name) {
		return e.b.endTxnOnSubscription(ctx, name, sub.Name, id, commit)
	}
	cmd := &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_SUBSCRIPTION.Enum(), EndTxnOnSubscription: &pb.CommandEndTxnOnSubscription{
		TxnidMostBits: ptr(id.Most), TxnidLeastBits: ptr(id.Least), TxnAction: txnAction(commit),
		Subscription: &pb.Subscription{Topic: ptr(sub.Topic), Subscription: ptr(sub.Name)}}}
	resp, err := e.remote(ctx, sub.Topic, cmd, pb.BaseCommand_END_TXN_ON_SUBSCRIPTION_RESPONSE,
		func(r uint64) { cmd.EndTxnOnSubscription.RequestId = &r })
	if err != nil {
		return err
	}
	return remoteTxnError(resp.GetEndTxnOnSubscriptionResponse().Error, resp.GetEndTxnOnSubscriptionResponse().GetMessage())
}

func (e txnEnder) remote(ctx context.Context, topic string, cmd *pb.BaseCommand, want pb.BaseCommand_Type, setID func(uint64)) (*pb.BaseCommand, error) {
	cfg := replclient.Config{ServiceURL: "pulsar://" + e.b.advertisedAddress(), Credentials: e.b.cfg.BrokerClient,
		Topic: topic, Version: e.b.cfg.Version}
	return replclient.Request(ctx, cfg, cmd, want, setID)
}

func remoteTxnError(code *pb.ServerError, msg string) error {
	if code == nil {
		return nil
	}
	return fmt.Errorf("topic owner answered %s: %s", code.String(), msg)
}

func txnAction(commit bool) *pb.TxnAction {
	if commit {
		return pb.TxnAction_COMMIT.Enum()
	}
	return pb.TxnAction_ABORT.Enum()
}

// endTxnOnPartition stores the transaction's marker on a topic served
// here; a topic that does not exist has nothing to end.
func (b *Broker) endTxnOnPartition(ctx context.Context, name TopicName, id txn.ID, commit bool) error {
	t, err := b.existingTopic(ctx, name)
	if errors.Is(err, errTopicNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	tb, err := t.buffer(ctx)
	if err != nil {
		return err
	}
	return tb.end(ctx, id, commit)
}

// endTxnOnSubscription applies or drops the transaction's held
// acknowledgements on a subscription of a topic served here.
func (b *Broker) endTxnOnSubscription(ctx context.Context, name TopicName, sub string, id txn.ID, commit bool) error {
	t, err := b.existingTopic(ctx, name)
	if errors.Is(err, errTopicNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := t.durableSub(sub)
	if !ok {
		return nil // unsubscribed: its acknowledgements went with it
	}
	s := st.s
	if s == nil {
		// Not loaded since the topic was: load it as a SUBSCRIBE would,
		// restoring what its transactions hold.
		s = newSubscription(t, sub, pb.CommandSubscribe_Shared, st.cursor, true)
		t.mu.Lock()
		if existing, ok := t.subs[sub]; ok {
			s = existing
		} else {
			t.subs[sub] = s
		}
		t.mu.Unlock()
	}
	return s.endTxn(ctx, id, commit)
}

// txnEndedHere reports whether id's coordinator is hosted here and does
// not know it (it ended, or never was). A coordinator hosted elsewhere is
// not asked: false.
func (b *Broker) txnEndedHere(id txn.ID) bool {
	b.txnCoords.mu.Lock()
	h := b.txnCoords.loaded[id.Most]
	b.txnCoords.mu.Unlock()
	if h == nil || h.c.Failed() != nil {
		return false
	}
	_, err := h.c.Get(id)
	return errors.Is(err, txn.ErrNotFound)
}

// registerTCConn notes that c connected to coordinator tc.
func (b *Broker) registerTCConn(tc uint64, c *serverConn) {
	b.txnCoords.mu.Lock()
	defer b.txnCoords.mu.Unlock()
	if h := b.txnCoords.loaded[tc]; h != nil {
		if h.conns == nil {
			h.conns = map[*serverConn]struct{}{}
		}
		h.conns[c] = struct{}{}
	}
}

// forgetTCConn drops a closed connection from every coordinator.
func (b *Broker) forgetTCConn(c *serverConn) {
	b.txnCoords.mu.Lock()
	defer b.txnCoords.mu.Unlock()
	for _, h := range b.txnCoords.loaded {
		delete(h.conns, c)
	}
}
