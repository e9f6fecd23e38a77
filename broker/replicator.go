package broker

// Geo-replication: one replicator per (topic, remote cluster), as
// Pulsar's GeoPersistentReplicator.
//
// Behaviour:
//   - The clusters a topic replicates to are its topic-level replication
//     clusters (topicpolicies.go; a partition takes its partitioned
//     topic's) or else its namespace's replication_clusters; every one
//     but this broker's cluster gets a replicator. The set is checked when
//     the topic loads and every replicationPolicyCheckInterval; a cluster
//     removed from it stops its replicator and deletes its cursor.
//   - A replicator reads the topic through a durable cursor named
//     pulsar.repl.<remote> (Pulsar's name; not a subscription: admin lists
//     and subscription stats skip it; the TTL, expire-messages and
//     backlog quotas treat it as a subscription, as Pulsar's do). A new cursor starts at
//     replicationStartAt: the latest entry (default, Pulsar's), so a
//     cluster added to the list gets what is published from then on, or
//     the earliest, so it also gets what the topic still stores. The
//     cursors of the clusters in the list when the topic loads are opened
//     before it is served, so none misses the first messages.
//   - Each entry is forwarded as stored (batch, producer name, sequence id,
//     publish and event time, key, properties, schema version), with
//     replicated_from = this cluster appended to its metadata
//     (replclient.MarkReplicated), by a producer named
//     pulsar.repl.<local>--><remote> on the remote cluster's broker
//     (replclient: the official Go client cannot set replicated_from).
//   - Skipped and acknowledged at once: entries that arrived by replication
//     (replicated_from set: no loops in a full mesh) and entries whose
//     replicate_to does not name the remote (selective replication; the
//     Go client's DisableReplication sends replicate_to ["__local__"]).
//   - An entry is acknowledged on the cursor once the remote stored it;
//     at most replicationProducerQueueSize are in flight. When the remote
//     fails (unreachable, producer closed, send refused) the replicator
//     rewinds to the first unacknowledged entry and dials again with
//     backoff (100 ms doubling to 1 min, jittered); the backlog grows
//     meanwhile and local producers and consumers are unaffected.
//   - Dispatch rate (dispatchrate.go): the topic's replicatorDispatchRate
//     for this cluster (or its global one), else the namespace's for this
//     cluster, else the broker's
//     dispatchThrottlingRatePerReplicatorIn{Msg,Byte} per second (0: off).
//     An entry counts as one message, as in Pulsar's replicator. The rate
//     is read again at every replication check, so a change applies
//     within replicationPolicyCheckInterval.
//   - A remote broker deduplicates replicated entries by their original
//     producer name and sequence id (conn_produce.go), so with
//     deduplication on in the remote, resending after a reconnect stores
//     nothing twice. With it off, entries sent but not confirmed before a
//     failure are stored again (at-least-once).
//
// Lock rules: replicationSet.mu guards the map; it is never held while a
// replicator stops (which waits for its goroutine) or a cursor is opened.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/replclient"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/txn"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// replCursorPrefix starts a replicator cursor's name: pulsar.repl.<remote>.
const replCursorPrefix = "pulsar.repl."

// isReplicatorCursor reports whether a cursor is a replicator's.
func isReplicatorCursor(name string) bool { return strings.HasPrefix(name, replCursorPrefix) }

// replicationSet is a topic's replicators by remote cluster.
type replicationSet struct {
	reconcile sync.Mutex // one reconciliation at a time
	mu        sync.Mutex
	m         map[string]*replicator
	closed    bool
	// inbound counts messages that replicators of other clusters stored
	// here, by the cluster they came from (replicated_from).
	inbound sync.Map // string -> *inboundCounter
}

type inboundCounter struct {
	msgs, bytes atomic.Int64
	rates       atomic.Pointer[[2]float64] // msg/s, bytes/s
	prev        [3]float64                 // msgs, bytes, unix seconds
}

// replicator forwards one topic's entries to one remote cluster.
type replicator struct {
	t      *topic
	remote string
	cursor managedledger.Cursor
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	msgsOut, bytesOut atomic.Int64
	connected         atomic.Bool
	outbound          atomic.Pointer[string]
	connectedSince    atomic.Pointer[string]
	// oldestMs is the publish time of the oldest entry read but not yet
	// confirmed by the remote (0: none): the replication delay.
	oldestMs atomic.Int64
	rates    atomic.Pointer[[2]float64] // msg/s, bytes/s out
	prev     [3]float64
	// limiter holds the replicator to its dispatch rate, refreshed at
	// every replication check (replicatorDispatchRate).
	limiter dispatchLimiter
}

// replicationPolicy is what decides a topic's replication, read once per
// check: the clusters its messages go to and its replicators' dispatch
// rate.
type replicationPolicy struct {
	clusters []string
	rate     dispatchRate
}

// replicationPolicy reads the topic's policy: its topic-level settings
// (of the partitioned topic for a partition) win over its namespace's,
// and those over the broker's. The error wraps resources.ErrNotFound
// when the namespace does not exist.
func (t *topic) replicationPolicy(ctx context.Context) (replicationPolicy, error) {
	// Cached (the partitioned topic's policies for a partition): the
	// periodic check reads them for every loaded topic, and a read through
	// to the store cost 5 us a topic.
	own, err := t.ownPoliciesOrErr(ctx)
	if err != nil {
		return replicationPolicy{}, fmt.Errorf("topic %s: topic policies: %w", t.name, err)
	}
	p, err := t.b.cfg.Resources.NamespaceShared(ctx, t.name.Tenant, t.name.Namespace)
	if err != nil {
		return replicationPolicy{}, fmt.Errorf("topic %s: replication clusters: %w", t.name, err)
	}
	rp := replicationPolicy{clusters: p.ReplicationClusters, rate: t.replicatorDispatchRate(p, own.ReplicatorDispatchRateIn(t.b.cfg.ClusterName))}
	if len(own.ReplicationClusters) > 0 {
		rp.clusters = own.ReplicationClusters
	}
	return rp, nil
}

// replicates reports whether the topic can have replicators at all.
func (t *topic) replicates() bool {
	return t.name.Persistent() && t.b.cfg.ClusterName != "" && t.b.cfg.Resources != nil
}

// remotesOf are the clusters of a replication list other than this one.
func (t *topic) remotesOf(clusters []string) map[string]bool {
	remotes := map[string]bool{}
	for _, c := range clusters {
		if c != t.b.cfg.ClusterName {
			remotes[c] = true
		}
	}
	return remotes
}

// ParseReplicationStartAt reads replicationStartAt: "latest" (or empty,
// the default) or "earliest", in any case, as Pulsar compares them.
func ParseReplicationStartAt(s string) (managedledger.InitialPosition, error) {
	switch strings.ToLower(s) {
	case "", "latest":
		return managedledger.Latest, nil
	case "earliest":
		return managedledger.Earliest, nil
	}
	return managedledger.Latest, fmt.Errorf("replicationStartAt %q: want latest or earliest", s)
}

// openReplicatorCursors creates the cursor of every remote the topic
// replicates to before the topic is served, as Pulsar checks replication
// before a topic finishes loading. New cursors start at the latest entry
// by default (replicationStartAt), so one created after producers were
// let in (by reconcileReplication, which runs after the load) would miss
// what they sent meanwhile. Existing cursors keep their position. A
// namespace that does not exist replicates nowhere; clusters that cannot
// be read fail the load (the client retries), rather than load a topic
// whose first messages might never be replicated.
func (t *topic) openReplicatorCursors(ctx context.Context) error {
	if !t.replicates() {
		return nil
	}
	policy, err := t.replicationPolicy(ctx)
	if errors.Is(err, resources.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for remote := range t.remotesOf(policy.clusters) {
		if _, err := t.openReplicatorCursor(ctx, remote); err != nil {
			return err
		}
	}
	return nil
}

// openReplicatorCursor opens (creating it at replicationStartAt if it is
// new) the cursor of the replicator to remote.
func (t *topic) openReplicatorCursor(ctx context.Context, remote string) (managedledger.Cursor, error) {
	start, err := ParseReplicationStartAt(t.b.cfg.ReplicationStartAt)
	if err != nil {
		return nil, err
	}
	cur, err := t.ml.OpenCursor(ctx, replCursorPrefix+remote, managedledger.CursorOptions{Initial: start})
	if err != nil {
		return nil, fmt.Errorf("topic %s: replicator cursor to %s: %w", t.name, remote, err)
	}
	return cur, nil
}

// reconcileReplication starts and stops replicators to match the topic's
// replication clusters, and deletes cursors of remotes no longer in them.
func (t *topic) reconcileReplication(ctx context.Context) {
	if !t.replicates() {
		return
	}
	policy, err := t.replicationPolicy(ctx)
	if err != nil {
		return // keep what runs: a metadata hiccup must not drop cursors
	}
	t.repl.reconcile.Lock()
	defer t.repl.reconcile.Unlock()
	want := t.remotesOf(policy.clusters)
	t.repl.mu.Lock()
	if t.repl.closed {
		t.repl.mu.Unlock()
		return
	}
	var stop, keep []*replicator
	for remote, r := range t.repl.m {
		if !want[remote] {
			stop = append(stop, r)
			delete(t.repl.m, remote)
		} else {
			keep = append(keep, r)
		}
	}
	var start []string
	for remote := range want {
		if t.repl.m[remote] == nil {
			start = append(start, remote)
		}
	}
	t.repl.mu.Unlock()
	if len(keep) > 0 { // policies and dynamic settings change without a reload
		now := time.Now()
		for _, r := range keep {
			r.limiter.setRate(policy.rate, now)
		}
	}
	for _, r := range stop {
		r.stop()
		t.b.log.Info("replicator stopped: cluster removed from the replication clusters", "topic", t.name.String(), "remote", r.remote)
	}
	for _, c := range t.ml.Cursors() {
		if remote, isRepl := strings.CutPrefix(c.Name(), replCursorPrefix); isRepl && !want[remote] {
			if err := t.ml.DeleteCursor(ctx, c.Name()); err != nil && !errors.Is(err, managedledger.ErrCursorNotFound) {
				t.b.log.Warn("replicator cursor not deleted", "topic", t.name.String(), "cursor", c.Name(), "err", err)
			}
		}
	}
	slices.Sort(start)
	for _, remote := range start {
		if err := t.startReplicator(ctx, remote, policy.rate); err != nil {
			t.b.log.Warn("replicator not started; retried at the next check", "topic", t.name.String(), "remote", remote, "err", err)
		}
	}
}

func (t *topic) startReplicator(ctx context.Context, remote string, rate dispatchRate) error {
	cur, err := t.openReplicatorCursor(ctx, remote)
	if err != nil {
		return err
	}
	r := &replicator{t: t, remote: remote, cursor: cur, done: make(chan struct{})}
	r.limiter.setRate(rate, time.Now())
	r.ctx, r.cancel = context.WithCancel(t.b.ctx)
	t.repl.mu.Lock()
	if t.repl.closed || t.repl.m[remote] != nil {
		t.repl.mu.Unlock()
		return nil
	}
	if t.repl.m == nil {
		t.repl.m = map[string]*replicator{}
	}
	t.repl.m[remote] = r
	t.repl.mu.Unlock()
	t.b.log.Info("replicator started", "topic", t.name.String(), "remote", remote)
	go r.run()
	return nil
}

// stopReplication stops every replicator (the topic closes); their
// cursors stay.
func (t *topic) stopReplication() {
	t.repl.mu.Lock()
	t.repl.closed = true
	rs := t.repl.m
	t.repl.m = nil
	t.repl.mu.Unlock()
	for _, r := range rs {
		r.stop()
	}
}

// replicators is a snapshot of the running replicators.
func (t *topic) replicators() []*replicator {
	t.repl.mu.Lock()
	defer t.repl.mu.Unlock()
	out := make([]*replicator, 0, len(t.repl.m))
	for _, r := range t.repl.m {
		out = append(out, r)
	}
	return out
}

// countInbound notes a replicated entry from cluster stored here.
func (t *topic) countInbound(cluster string, msgs, size int64) {
	v, _ := t.repl.inbound.LoadOrStore(cluster, &inboundCounter{})
	c := v.(*inboundCounter)
	c.msgs.Add(msgs)
	c.bytes.Add(size)
}

// checkReplication reconciles every loaded topic's replicators.
func (b *Broker) checkReplication() {
	for t := range b.topicPass() {
		t.reconcileReplication(b.ctx)
	}
}

func (r *replicator) stop() {
	r.cancel()
	<-r.done
}

const (
	replBackoffMin = 100 * time.Millisecond
	replBackoffMax = time.Minute
)

func (r *replicator) run() {
	defer close(r.done)
	backoff := replBackoffMin
	for r.ctx.Err() == nil {
		err := r.session()
		if r.ctx.Err() != nil {
			return
		}
		r.t.b.log.Warn("replication to remote cluster interrupted; retrying", "topic", r.t.name.String(),
			"remote", r.remote, "err", err, "backoff", backoff)
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(wait):
		}
		if err != errRemoteWorked {
			backoff = min(backoff*2, replBackoffMax)
		} else {
			backoff = replBackoffMin
		}
	}
}

// errRemoteWorked wraps nothing: a session that got a producer resets the
// backoff.
var errRemoteWorked = errors.New("replication session ended after it connected")

// session connects a producer and forwards entries until either fails.
func (r *replicator) session() error {
	b := r.t.b
	cd, err := b.cfg.Resources.GetCluster(r.ctx, r.remote)
	if err != nil {
		return fmt.Errorf("remote cluster %s: %w", r.remote, err)
	}
	rc, err := b.remoteClient(cd)
	if err != nil {
		return fmt.Errorf("remote cluster %s: %w", r.remote, err)
	}
	rc.Topic, rc.ProducerName, rc.Version = r.t.name.String(), replclient.ProducerName(b.cfg.ClusterName, r.remote), b.cfg.Version
	rc.MaxFrameSize = wire.MaxEntrySize(b.cfg.MaxMessageSize) + wire.FramePadding
	prod, err := replclient.Dial(r.ctx, rc)
	if err != nil {
		return err
	}
	addr := prod.Addr()
	r.outbound.Store(&addr)
	since := time.Now().UTC().Format(time.RFC3339)
	r.connectedSince.Store(&since)
	r.connected.Store(true)
	defer r.connected.Store(false)
	r.cursor.Rewind()     // what a previous session read but the remote never confirmed
	err = r.forward(prod) // closes prod
	b.log.Info("replication producer closed", "topic", r.t.name.String(), "remote", r.remote, "err", err)
	return errRemoteWorked
}

// forward reads and sends until the producer or the replicator stops.
// Every send's callback has run when it returns.
func (r *replicator) forward(prod *replclient.Producer) error {
	window := make(chan struct{}, max(r.t.b.cfg.ReplicationProducerQueueSize, 1))
	var inflight sync.WaitGroup
	defer func() {
		prod.Close() // fails what is still pending, so the wait is bounded
		inflight.Wait()
	}()
	for {
		permits := r.limiter.acquire(r.ctx, prod.Done())
		if permits == 0 {
			if err := r.ctx.Err(); err != nil {
				return err
			}
			return prod.Err()
		}
		entries, err := r.read(prod, permits)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !r.forwardEntry(prod, e, window, &inflight) {
				if err := r.ctx.Err(); err != nil {
					return err
				}
				return prod.Err()
			}
		}
	}
}

// read waits for at most maxEntries entries (the dispatch rate's permits:
// Pulsar's replicator counts an entry as one message), giving up when the
// producer fails or the replicator stops.
func (r *replicator) read(prod *replclient.Producer, maxEntries int) ([]managedledger.Entry, error) {
	type result struct {
		entries []managedledger.Entry
		err     error
	}
	if limit, capped := r.t.txns.Load().readLimit(); capped && r.cursor.ReadPosition().Compare(limit) > 0 {
		// An open transaction's messages are next: replicated once it
		// ends (committed) or skipped (aborted), as Pulsar's replicator.
		select {
		case <-time.After(50 * time.Millisecond):
		case <-prod.Done():
		case <-r.ctx.Done():
		}
		return nil, r.ctx.Err()
	}
	ch := make(chan result, 1)
	r.cursor.ReadEntriesOrWait(min(r.t.b.cfg.DispatcherMaxReadBatchSize, maxEntries), 5<<20, func(es []managedledger.Entry, err error) {
		ch <- result{es, err}
	})
	select {
	case res := <-ch:
		return r.t.txns.Load().belowReadLimit(r.cursor, res.entries), res.err
	case <-prod.Done():
	case <-r.ctx.Done():
	}
	if !r.cursor.CancelPendingRead() {
		<-ch // the read completed meanwhile: its entries are read again after Rewind
	}
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	return nil, prod.Err()
}

// forwardEntry sends one entry or acknowledges it as not for the remote.
// It returns false once the producer failed.
func (r *replicator) forwardEntry(prod *replclient.Producer, e managedledger.Entry, window chan struct{}, inflight *sync.WaitGroup) bool {
	_, ent, err := wire.ParseStoredEntry(e.Data)
	var md pb.MessageMetadata
	if err == nil {
		err = ent.DecodeMetadata(&md)
	}
	if err == nil && md.MarkerType != nil && md.GetReplicatedFrom() == r.remote {
		// A marker from the remote this replicator serves: each replicator
		// sees every marker, only this one acts on it (replsubs.go).
		r.t.receivedMarker(r.remote, e.Position, markerType(&md), ent.Payload())
	}
	if err == nil && (md.TxnidMostBits != nil || md.TxnidLeastBits != nil) {
		id := txn.ID{Most: md.GetTxnidMostBits(), Least: md.GetTxnidLeastBits()}
		if md.MarkerType != nil || r.t.txns.Load().isAborted(id) {
			_ = r.cursor.Delete(r.ctx, e.Position) // transaction markers and aborted messages stay here
			return true
		}
	}
	if err != nil || md.ReplicatedFrom != nil || !replicatesTo(md.ReplicateTo, r.remote) {
		if err != nil {
			r.t.b.log.Warn("entry not replicated: it does not parse", "topic", r.t.name.String(), "position", e.Position, "err", err)
		}
		_ = r.cursor.Delete(r.ctx, e.Position)
		return true
	}
	select {
	case window <- struct{}{}:
	case <-prod.Done():
		return false
	case <-r.ctx.Done():
		return false
	}
	if len(window) == 1 || r.oldestMs.Load() == 0 {
		r.oldestMs.Store(int64(md.GetPublishTime()))
	}
	out := replclient.MarkReplicated(ent, r.t.b.cfg.ClusterName)
	if md.TxnidMostBits != nil || md.TxnidLeastBits != nil {
		// Committed: a plain message in the remote cluster, whose
		// transaction buffer would otherwise wait for its end marker.
		md.TxnidMostBits, md.TxnidLeastBits = nil, nil
		md.ReplicatedFrom = ptr(r.t.b.cfg.ClusterName)
		if head, err := wire.AppendEntry(nil, &md, ent.Payload()); err == nil {
			out = replclient.Replicated{Head: head}
		}
	}
	msgs := int64(max(md.GetNumMessagesInBatch(), 1))
	// Taken as sent, as Pulsar's replicator takes them: one message per
	// entry, batched or not, and the entry's bytes.
	r.limiter.consume(1, int64(out.Len()))
	inflight.Add(1)
	pos, marker := e.Position, md.MarkerType != nil
	prod.Send(out, int32(msgs), func(err error) {
		defer inflight.Done()
		<-window
		if err != nil {
			return
		}
		if !marker {
			r.msgsOut.Add(msgs)
			r.bytesOut.Add(int64(out.Len()))
		}
		if err := r.cursor.Delete(context.Background(), pos); err != nil {
			r.t.b.log.Warn("replicated entry not acknowledged", "topic", r.t.name.String(), "remote", r.remote, "err", err)
		}
		if len(window) == 0 {
			r.oldestMs.Store(0)
		}
	})
	return prod.Err() == nil
}

// replicatesTo applies a message's replicate_to (empty: everywhere).
func replicatesTo(list []string, remote string) bool {
	return len(list) == 0 || slices.Contains(list, remote)
}

// delaySeconds is how far replication lags: the age of the oldest entry
// not yet confirmed by the remote (0 with no backlog).
func (r *replicator) delaySeconds(now time.Time) float64 {
	if r.cursor.Backlog() == 0 {
		return 0
	}
	ms := r.oldestMs.Load()
	if ms <= 0 {
		return 0
	}
	return max(float64(now.UnixMilli()-ms)/1000, 0)
}

// updateRates computes the out rates since the last update (stats ticker).
func (r *replicator) updateRates(now time.Time) {
	r.rates.Store(rateStep(&r.prev, float64(r.msgsOut.Load()), float64(r.bytesOut.Load()), now))
}

func rateStep(prev *[3]float64, msgs, bytes float64, now time.Time) *[2]float64 {
	secs := float64(now.UnixNano()) / 1e9
	out := &[2]float64{}
	if prev[2] > 0 && secs > prev[2] {
		out[0], out[1] = (msgs-prev[0])/(secs-prev[2]), (bytes-prev[1])/(secs-prev[2])
	}
	*prev = [3]float64{msgs, bytes, secs}
	return out
}

func ratesOf(p *atomic.Pointer[[2]float64]) [2]float64 {
	if v := p.Load(); v != nil {
		return *v
	}
	return [2]float64{}
}

// updateReplicationRates refreshes the topic's replication rates.
func (t *topic) updateReplicationRates(now time.Time) {
	for _, r := range t.replicators() {
		r.updateRates(now)
	}
	t.repl.inbound.Range(func(_, v any) bool {
		c := v.(*inboundCounter)
		c.rates.Store(rateStep(&c.prev, float64(c.msgs.Load()), float64(c.bytes.Load()), now))
		return true
	})
}

// topicReplicationClusters reads a topic's own replication clusters
// (set: false when it has none).
func (b *Broker) topicReplicationClusters(ctx context.Context, name TopicName) ([]string, bool, error) {
	p, err := b.cfg.Resources.GetTopicPolicies(ctx, resourceTopic(name))
	if err != nil {
		return nil, false, err
	}
	return p.ReplicationClusters, len(p.ReplicationClusters) > 0, nil
}

// replicationStats is stats.replication: per remote cluster, the
// replicator to it and what arrived from it.
func (t *topic) replicationStats(now time.Time) map[string]admin.ReplicatorStats {
	out := map[string]admin.ReplicatorStats{}
	for _, r := range t.replicators() {
		rates := ratesOf(&r.rates)
		st := admin.ReplicatorStats{Connected: r.connected.Load(), MsgRateOut: rates[0], MsgThroughputOut: rates[1],
			ReplicationBacklog: r.cursor.Backlog(), ReplicationDelayInSeconds: int64(r.delaySeconds(now))}
		if r.connected.Load() {
			st.OutboundConnection = *r.outbound.Load()
			st.OutboundConnectedSince = *r.connectedSince.Load()
		}
		out[r.remote] = st
	}
	t.repl.inbound.Range(func(k, v any) bool {
		rates := ratesOf(&v.(*inboundCounter).rates)
		st := out[k.(string)]
		st.MsgRateIn, st.MsgThroughputIn = rates[0], rates[1]
		out[k.(string)] = st
		return true
	})
	return out
}

// remoteClient is how this broker reaches a remote cluster, as Pulsar's
// replicators do: the cluster's own authenticationPlugin/Parameters, else
// the broker's brokerClientAuthentication*; its brokerServiceUrlTls when
// the cluster or the broker has brokerClientTlsEnabled, trusting the
// cluster's brokerClientTrustCertsFilePath, else the broker's.
func (b *Broker) remoteClient(cd resources.ClusterData) (replclient.Config, error) {
	cfg := replclient.Config{ServiceURL: cd.BrokerServiceURL, Credentials: b.cfg.BrokerClient}
	if cd.AuthenticationPlugin != "" {
		creds, err := auth.ParseClientCredentials(cd.AuthenticationPlugin, cd.AuthenticationParameters)
		if err != nil {
			return cfg, fmt.Errorf("the cluster's authenticationPlugin: %w", err)
		}
		cfg.Credentials = creds
	}
	if !cd.BrokerClientTLSEnabled && !b.cfg.BrokerClientTLSEnabled {
		return cfg, nil
	}
	if cd.BrokerServiceURLTLS == "" {
		return cfg, errors.New("brokerClientTlsEnabled, but the cluster has no brokerServiceUrlTls")
	}
	t := b.cfg.BrokerClientTLS
	if cd.BrokerClientTrustCertsFilePath != "" {
		t.TrustCertsFile = cd.BrokerClientTrustCertsFilePath
	}
	t.AllowInsecure = t.AllowInsecure || cd.TLSAllowInsecureConnection
	tlsCfg, err := t.Config(cfg.Credentials)
	if err != nil {
		return cfg, err
	}
	cfg.ServiceURL, cfg.TLS = cd.BrokerServiceURLTLS, tlsCfg
	return cfg, nil
}
