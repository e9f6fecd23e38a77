package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/magnetar-io/magnetar/broker/console"
	"github.com/magnetar-io/magnetar/broker/ownership"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// topic is one loaded topic: its stream, producers and subscriptions.
//
// Lock rules: mu guards producers and subs; it is never held while calling
// into a subscription (which has its own lock) or the managed ledger.
// pub.mu guards the publish fence; order mu, then pub.mu, then the managed
// ledger's and dedup's locks (ResumeAdds, resetPushed run under pub.mu).
type topic struct {
	b    *Broker
	name TopicName
	ml   managedledger.ManagedLedger

	stats topicStats
	rates rateWindow // updated every StatsUpdateFrequency
	// entriesAdded counts the entries stored since the topic loaded
	// (messages, batches and markers alike): internal stats'
	// entriesAddedCounter.
	entriesAdded atomic.Int64
	// movedTo is the broker the topic's bundle is handed to while it
	// closes (nil otherwise): its clients are told to reconnect there.
	movedTo atomic.Pointer[ownership.LookupResult]
	// history is what the console's charts show (console.go).
	history console.Ring
	// dispatchLimit is the topic dispatch rate, shared by its
	// subscriptions (subdispatchrate.go).
	dispatchLimit dispatchLimiter
	// loadedAt is when the topic loaded here: the last activity of
	// subscriptions no consumer joined since (subexpiry.go).
	loadedAt time.Time
	// publishLimit is the topic's publish rate (publishLimited: it limits
	// anything), shared by its producers (subdispatchrate.go).
	publishLimit   dispatchLimiter
	publishLimited atomic.Bool
	// subscribeLimits hold each consumer to the subscribe rate
	// (subscriberate.go).
	subscribeLimits subscribeLimits
	// subRate is the subscription dispatch rate of the last refresh: a new
	// subscription starts with it.
	subRate atomic.Pointer[dispatchRate]
	// ratesAppliedAt: the inputs of the last refreshDispatchRates that
	// left the topic with no rate limited (nil: some rate is limited, or
	// not applied yet); the pass skips the topic while they stay.
	ratesAppliedAt atomic.Pointer[rateInputs]
	dedup          *dedup // nil unless deduplication is enabled
	// unloading is set once an add found the managed ledger closed for
	// good here (addFailed): the topic is being unloaded.
	unloading atomic.Bool
	// stamper adds broker entry metadata; nil without interceptors.
	stamper *entryStamper
	// sizeLimit is the topic's maxMessageSize policy (0: none), read
	// again once sizeLimitUntil (unix ns) passes: a SEND must not pay for
	// a policy lookup (topicpolicies.go).
	sizeLimit, sizeLimitUntil atomic.Int64
	// delayedDelivery is the delayed delivery policy in force, read again
	// once delayedUntil (unix ns) passes (topicpolicies.go).
	delayedDelivery atomic.Pointer[resources.DelayedDeliveryPolicies]
	delayedUntil    atomic.Int64
	// terminated is set by the admin terminate (admin_topics.go): new
	// producers are refused. The managed ledger refuses adds by itself;
	// this flag is not rebuilt when the topic loads again.
	terminated atomic.Bool
	// policiesRef is where the topic's own policies are (those of its
	// partitioned topic for a partition), or policiesRefErr why its name
	// has none; fixed at load (ownPolicies).
	policiesRef    resources.TopicPoliciesRef
	policiesRefErr error
	// ownPoliciesMemo: the policies at policiesRef (ownPoliciesOrErr).
	ownPoliciesMemo atomic.Pointer[policiesMemo]
	// txns is the transaction buffer (txnbuffer.go): nil until the topic
	// has had a transaction; txnInit serializes its creation.
	txns    atomic.Pointer[txnBuffer]
	txnInit sync.Mutex

	mu        sync.Mutex
	producers map[*producer]struct{}
	exclusive *producer          // the producer holding exclusive access, if any
	waiting   []*waitingProducer // WaitForExclusive producers, in arrival order
	epoch     uint64             // topic epoch: raised at each exclusive grant
	subs      map[string]*subscription
	readers   map[*subscription]struct{}
	closed    bool

	pub publishFence
	// repl are the topic's geo-replicators (replicator.go).
	repl replicationSet
	// rsubs are the replicated-subscription snapshots under way (replsubs.go).
	rsubs replSubs
	// compaction is the topic's compaction (compaction.go).
	compaction compactionState
	// offload is the topic's last requested offload (offload.go).
	offload offloadState
}

// publishFence is what a failed add leaves (Pulsar's
// PersistentTopic.addFailed): the topic refuses SENDs and new producers,
// and its producers are closed, until every add made before the failure
// has called back; then the deduplication state is what was stored, the
// managed ledger takes adds again (it refuses them meanwhile too, see
// ManagedLedger.AddEntry), and producers reconnect. So after message N
// of a producer failed, nothing later of it is stored before the client
// resends N on a new producer.
type publishFence struct {
	mu      sync.Mutex
	fenced  bool
	pending int // adds handed to the managed ledger that have not called back
}

// waitingProducer is a WaitForExclusive producer not yet granted access;
// grant is called (without locks held) once it is.
type waitingProducer struct {
	p     *producer
	grant func(epoch uint64)
}

var (
	errProducerBusy = errors.New("topic has a producer with exclusive access, or producers that prevent it")
	// errProducerFenced refuses an Exclusive producer while others are
	// connected (Pulsar's ProducerFencedException).
	errProducerFenced = errors.New("topic has other producers: exclusive access refused")
	// errProducerNameInUse refuses a producer whose name another live
	// producer of the topic has (Pulsar's NamingException, ProducerBusy).
	errProducerNameInUse = errors.New("a producer with this name is already connected to the topic")
	errTopicClosing      = errors.New("topic is closing")
	errTopicFenced       = errors.New("topic is fenced after a failed write; reconnect the producer")
)

func newTopic(b *Broker, name TopicName, ml managedledger.ManagedLedger) *topic {
	t := &topic{b: b, name: name, ml: ml, producers: map[*producer]struct{}{}, subs: map[string]*subscription{},
		readers: map[*subscription]struct{}{}, loadedAt: time.Now()}
	t.policiesRef, t.policiesRefErr = resources.NewTopicPoliciesRef(resourceTopic(policyName(name)))
	// A topic terminated before this load (here or on another broker)
	// stays terminated: the managed ledger stores it.
	t.terminated.Store(ml.Terminated())
	return t
}

// loadDedup rebuilds the deduplication state when it is enabled, and
// otherwise drops a snapshot cursor left from when it was. Outside b.mu:
// replaying a large topic must not stall the broker.
func (t *topic) loadDedup(ctx context.Context) error {
	enabled, err := t.dedupEnabled(ctx)
	if err != nil {
		return err
	}
	if !enabled {
		if err := dropSystemCursor(ctx, t.ml, dedupCursor); err != nil {
			return fmt.Errorf("delete the deduplication cursor: %w", err)
		}
		return nil
	}
	t.dedup = newDedup(t.b.cfg.DeduplicationEntriesInterval, t.dedupSnapshotInterval(ctx))
	if err := t.dedup.rebuild(ctx, t.ml); err != nil {
		return fmt.Errorf("rebuild deduplication state: %w", err)
	}
	return nil
}

// dedupSnapshotInterval is the topic's deduplicationSnapshotInterval
// policy (seconds) when set, else its namespace's, else
// brokerDeduplicationSnapshotIntervalSeconds; read as the topic loads, as
// deduplicationEnabled is.
func (t *topic) dedupSnapshotInterval(ctx context.Context) time.Duration {
	if secs, ok := topicPolicy[int](ctx, t, "deduplicationSnapshotInterval"); ok {
		return time.Duration(secs) * time.Second
	}
	ns, _ := t.policies(ctx)
	return t.b.dedupSnapshotIntervalOf(ns)
}

// dedupSnapshotIntervalOf is a namespace's deduplication snapshot
// interval, else the broker's.
func (b *Broker) dedupSnapshotIntervalOf(ns resources.Policies) time.Duration {
	if s := ns.DeduplicationSnapshotIntervalSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return b.cfg.DeduplicationSnapshotInterval
}

// dedupEnabled is the topic's deduplicationEnabled policy when set, else
// its namespace's, else brokerDeduplicationEnabled (Pulsar's order). Policies that cannot
// be read fail the load: taking the broker default instead would turn
// deduplication off for a namespace that wants it, and drop its snapshot.
// A namespace that does not exist has no policy. The setting is read as
// the topic loads; a change applies at its next load (an unload).
func (t *topic) dedupEnabled(ctx context.Context) (bool, error) {
	if res := t.b.cfg.Resources; res != nil && t.name.Persistent() {
		own, err := t.ownPoliciesOrErr(ctx)
		if err != nil {
			return false, fmt.Errorf("deduplication policy: %w", err)
		}
		if on, ok := resources.TopicPolicy[bool](own, t.b.cfg.ClusterName, "deduplicationEnabled"); ok {
			return on, nil
		}
		p, err := res.NamespaceShared(ctx, t.name.Tenant, t.name.Namespace)
		switch {
		case errors.Is(err, resources.ErrNotFound):
		case err != nil:
			return false, fmt.Errorf("deduplication policy: %w", err)
		case p.DeduplicationEnabled != nil:
			return *p.DeduplicationEnabled, nil
		}
	}
	return t.b.cfg.BrokerDeduplicationEnabled, nil
}

// addEntry stores a producer's entry (which the caller may reuse once
// this returns: it aliases the connection's read buffer). While the topic
// is fenced it fails at once with errTopicFenced.
//
// sum is the entry's CRC32C if known (wire.Entry.Sum): storage builds its
// checksums from it.
func (t *topic) addEntry(entry []byte, sum crc32c.Known, messages int64, cb func(managedledger.Position, error)) {
	t.addEntryFrom(entry, false, sum, messages, cb)
}

// addEntryFrom is addEntry for an entry that may be owned: built for
// storage (a transactional SEND's, re-encoded with its transaction id),
// with managedledger.EntryHeadroom bytes of scratch in front of it and
// handed over, so storing it copies nothing more.
func (t *topic) addEntryFrom(entry []byte, owned bool, sum crc32c.Known, messages int64, cb func(managedledger.Position, error)) {
	if !t.beginAdd() {
		cb(managedledger.Position{}, fmt.Errorf("topic %s: %w", t.name, errTopicFenced))
		return
	}
	orig := cb
	cb = func(pos managedledger.Position, err error) {
		if err != nil && !errors.Is(err, managedledger.ErrTerminated) {
			t.addFailed(err) // before anything else: the next SEND must see the fence
		}
		if err == nil {
			t.entriesAdded.Add(1)
		}
		orig(pos, err)
		t.endAdd()
	}
	t.storeEntry(entry, owned, sum, messages, cb)
}

// storeEntry stores entry: owned says it has storage's headroom in front
// and is handed over (addEntryFrom), else it aliases a buffer reused once
// this returns.
func (t *topic) storeEntry(entry []byte, owned bool, sum crc32c.Known, messages int64, cb func(managedledger.Position, error)) {
	withRoom := entry
	if owned {
		entry = entry[managedledger.EntryHeadroom:]
	}
	if !t.name.Persistent() {
		// One copy for every subscription: the connection's buffer is
		// reused once this returns, the writes to consumers are not done.
		data := entry
		if !owned {
			data = bytes.Clone(entry)
		}
		t.ml.AddEntry(nil, func(pos managedledger.Position, err error) {
			t.publishNonPersistent(managedledger.Entry{Position: pos, Data: data})
			cb(pos, err)
		})
		return
	}
	if t.stamper != nil {
		t.stamper.add(t.ml, entry, sum, messages, cb)
		return
	}
	// The one copy out of the connection's buffer, with room in front for
	// storage to encode its entry without copying again.
	if !owned {
		withRoom = managedledger.WithHeadroom(entry)
	}
	t.ml.AddEntryInPlace(withRoom, sum, cb)
}

// beginAdd counts an add about to be handed to the managed ledger, unless
// the topic is fenced. Counted under the lock that addFailed sets the
// fence under: an add that passed this check is waited for before the
// fence lifts, and the managed ledger refuses it meanwhile.
func (t *topic) beginAdd() bool {
	t.pub.mu.Lock()
	defer t.pub.mu.Unlock()
	if t.pub.fenced {
		return false
	}
	t.pub.pending++
	return true
}

// addFailed fences the topic after a failed add and closes its producers
// (their clients reconnect and resend what they have pending). Runs in
// the add's callback, before the connection answers it.
//
// An add that found the managed ledger closed (ErrClosed: another owner
// opened it and fenced this one, or it is closing) will fail for every
// resend too: the topic is unloaded as well, so that its clients look it
// up again and it loads afresh wherever its bundle is owned, instead of
// refusing every SEND until something else unloads it (Pulsar closes a
// topic on ManagedLedgerFencedException). Found by the fault suite
// (tools/chaos, rolling-restart seed 1): a broker that took a bundle over
// while the old owner was still closing lost its managed ledger to that
// owner's last metadata write, then failed every SEND for 58 s.
func (t *topic) addFailed(err error) {
	t.unloadIfStorageLost(err)
	t.pub.mu.Lock()
	first := !t.pub.fenced
	t.pub.fenced = true
	t.pub.mu.Unlock()
	if !first {
		return
	}
	t.b.log.Warn("add failed; fencing the topic and closing its producers until its adds drain", "topic", t.name.String(), "err", err)
	for _, p := range t.takeProducers() {
		p.fence()
	}
}

// unloadIfStorageLost unloads the topic, once, when err says its managed
// ledger is closed or fenced under it (another owner opened it, or this
// one could not tell whether its own metadata write landed): every later
// write would fail the same way, so the topic loads afresh wherever its
// bundle is owned and its clients look it up again. Used by adds and by
// the saves of pending acknowledgements (the fault suite's txn-pipeline
// seed 1 of 5 Dec: a fenced managed ledger failed every later transaction
// on the topic while the topic stayed loaded).
func (t *topic) unloadIfStorageLost(err error) {
	lost := errors.Is(err, managedledger.ErrClosed) || errors.Is(err, ledger.ErrFenced)
	if lost && t.unloading.CompareAndSwap(false, true) {
		t.b.log.Warn("managed ledger closed or fenced under the topic; unloading it so that it loads again", "topic", t.name.String(), "err", err)
		t.b.spawn(func() { t.b.unloadWhere(t.b.ctx, func(x *topic) bool { return x == t }) })
	}
}

// endAdd notes that an add called back. The last one of a fenced topic
// lifts the fence: every add made before the failure is settled, so the
// deduplication state is reset to what was stored (sequence ids pushed
// but failed are forgotten) and the managed ledger takes adds again.
func (t *topic) endAdd() {
	t.pub.mu.Lock()
	defer t.pub.mu.Unlock()
	t.pub.pending--
	if !t.pub.fenced || t.pub.pending > 0 {
		return
	}
	if t.dedup != nil {
		t.dedup.resetPushed()
	}
	t.ml.ResumeAdds()
	t.pub.fenced = false
	t.b.log.Info("topic unfenced after a failed add; producers may reconnect", "topic", t.name.String())
}

// publishFenced reports whether a failed add fenced the topic.
func (t *topic) publishFenced() bool {
	t.pub.mu.Lock()
	defer t.pub.mu.Unlock()
	return t.pub.fenced
}

// takeProducers removes every producer, granted or waiting, from the
// topic and returns them (the caller closes them). A closed topic's are
// left to close, which closed them already (a second CLOSE_PRODUCER could
// hit the id's next producer).
func (t *topic) takeProducers() []*producer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	out := make([]*producer, 0, len(t.producers)+len(t.waiting))
	for p := range t.producers {
		out = append(out, p)
	}
	for _, w := range t.waiting {
		out = append(out, w.p)
	}
	t.producers, t.waiting, t.exclusive = map[*producer]struct{}{}, nil, nil
	return out
}

// addProducer admits p under its access mode (Pulsar's
// ProducerAccessMode). ready is false for a WaitForExclusive producer
// that must wait; grant runs when it gets access. fenced are producers an
// ExclusiveWithFencing producer pushed out (the caller closes them).
func (t *topic) addProducer(p *producer, mode pb.ProducerAccessMode, grant func(uint64)) (epoch uint64, ready bool, fenced []*producer, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, false, nil, errTopicClosing
	}
	if t.publishFenced() { // answered ServiceNotReady: the client retries
		return 0, false, nil, errTopicFenced
	}
	if t.nameTakenLocked(p) {
		return 0, false, nil, fmt.Errorf("producer %q: %w", p.name, errProducerNameInUse)
	}
	switch mode {
	case pb.ProducerAccessMode_Shared:
		if t.exclusive != nil {
			return 0, false, nil, errProducerBusy
		}
		t.producers[p] = struct{}{}
		return t.epoch, true, nil, nil
	case pb.ProducerAccessMode_ExclusiveWithFencing:
		for q := range t.producers {
			fenced = append(fenced, q)
		}
		t.producers = map[*producer]struct{}{}
	case pb.ProducerAccessMode_WaitForExclusive:
		if len(t.producers) > 0 {
			t.waiting = append(t.waiting, &waitingProducer{p: p, grant: grant})
			return t.epoch, false, nil, nil
		}
	default: // Exclusive
		if len(t.producers) > 0 {
			return 0, false, nil, errProducerFenced
		}
	}
	t.grantLocked(p)
	return t.epoch, true, fenced, nil
}

// nameTakenLocked reports whether another producer of the topic, granted
// or waiting, has p's name. One whose connection is gone no longer
// counts: a client that reconnects before the broker has seen its old
// connection close gets its name back, as on Pulsar.
func (t *topic) nameTakenLocked(p *producer) bool {
	taken := func(q *producer) bool { return q != p && q.name == p.name && q.conn.ctx.Err() == nil }
	for q := range t.producers {
		if taken(q) {
			return true
		}
	}
	for _, w := range t.waiting {
		if taken(w.p) {
			return true
		}
	}
	return false
}

func (t *topic) grantLocked(p *producer) {
	t.epoch++
	t.exclusive = p
	t.producers[p] = struct{}{}
}

// removeProducer drops p; when the topic has no producer left, the first
// WaitForExclusive producer gets access.
func (t *topic) removeProducer(p *producer) {
	t.mu.Lock()
	delete(t.producers, p)
	for i, w := range t.waiting {
		if w.p == p {
			t.waiting = append(t.waiting[:i], t.waiting[i+1:]...)
			break
		}
	}
	if t.exclusive == p {
		t.exclusive = nil
	}
	var next *waitingProducer
	if len(t.producers) == 0 && len(t.waiting) > 0 {
		next, t.waiting = t.waiting[0], t.waiting[1:]
		t.grantLocked(next.p)
	}
	epoch := t.epoch
	t.mu.Unlock()
	if next != nil {
		next.grant(epoch)
	}
}

// subscription returns the named subscription, creating it (and its
// cursor) when needed.
func (t *topic) subscription(ctx context.Context, cmd *pb.CommandSubscribe) (*subscription, error) {
	name := cmd.GetSubscription()
	t.mu.Lock()
	if s, ok := t.subs[name]; ok && cmd.GetDurable() {
		t.mu.Unlock()
		// Its type is checked as the consumer joins (addConsumer).
		return s, t.replicateIfAsked(ctx, s, cmd)
	}
	t.mu.Unlock()
	if !cmd.GetDurable() {
		if s := t.returningReader(name); s != nil {
			return s, nil
		}
	}
	_, existed := t.durableSub(name)
	if cmd.GetDurable() && !existed {
		if !t.autoSubscriptionCreation(ctx) {
			return nil, fmt.Errorf("%s: subscription %s: Subscription does not exist (allowAutoSubscriptionCreation is off): %w",
				t.name, name, errSubNotFound)
		}
		if err := t.admitSubscriptionCount(ctx); err != nil {
			return nil, err
		}
	}
	if cmd.GetReadCompacted() {
		if err := checkReadCompacted(t, cmd); err != nil {
			return nil, err
		}
	}
	cursor, after, err := t.openCursor(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if cmd.GetReadCompacted() {
		if cmd.GetDurable() && (existed || cmd.GetInitialPosition() != pb.CommandSubscribe_Earliest) {
			after = nil // resume where the subscription is
		}
		if cursor, err = t.readCompactedCursor(ctx, cursor, after); err != nil {
			return nil, err
		}
	}
	s := newSubscription(t, name, cmd.GetSubType(), cursor, cmd.GetDurable())
	t.mu.Lock()
	if !cmd.GetDurable() {
		// Readers: one private subscription per consumer, tracked so the
		// topic can close them.
		t.readers[s] = struct{}{}
		t.mu.Unlock()
		return s, nil
	}
	if existing, ok := t.subs[name]; ok {
		s = existing
	} else {
		t.subs[name] = s
	}
	t.mu.Unlock()
	return s, t.replicateIfAsked(ctx, s, cmd)
}

// autoSubscriptionCreation is whether a SUBSCRIBE may create a durable
// subscription: the topic's override, else the namespace's, else the broker's
// allowAutoSubscriptionCreation (dynamic).
func (t *topic) autoSubscriptionCreation(ctx context.Context) bool {
	if o, ok := topicPolicy[resources.AutoSubscriptionCreationOverride](ctx, t, "autoSubscriptionCreation"); ok {
		return o.AllowAutoSubscriptionCreation
	}
	if p, ok := t.policies(ctx); ok && p.AutoSubscriptionCreationOverride != nil {
		return p.AutoSubscriptionCreationOverride.AllowAutoSubscriptionCreation
	}
	return t.b.settings().autoSubscriptionCreation
}

// replicateIfAsked marks a durable subscription replicated when the
// SUBSCRIBE asks for it (replsubs.go); a SUBSCRIBE without the flag
// leaves it as it is.
func (t *topic) replicateIfAsked(ctx context.Context, s *subscription, cmd *pb.CommandSubscribe) error {
	if !cmd.GetReplicateSubscriptionState() || !t.name.Persistent() {
		return nil
	}
	if err := s.setReplicated(ctx); err != nil {
		return fmt.Errorf("mark subscription %s replicated: %w", s.name, err)
	}
	return nil
}

// openCursor opens the subscription's cursor; after is where a new one
// starts reading (the entry after it; {-1,-1} for the earliest).
func (t *topic) openCursor(ctx context.Context, cmd *pb.CommandSubscribe) (cur managedledger.Cursor, after *managedledger.Position, err error) {
	if !cmd.GetDurable() {
		// Without a start message id (a NonDurable consumer rather than
		// a reader) the initial position decides, as on Pulsar: Latest
		// (the default) starts after the last entry, not at the first.
		start := managedledger.Position{LedgerID: -1, EntryID: -1}
		if cmd.GetStartMessageId() == nil && cmd.GetInitialPosition() == pb.CommandSubscribe_Latest {
			start = t.ml.LastConfirmed()
		}
		if id := cmd.GetStartMessageId(); id != nil {
			start = managedledger.Position{LedgerID: int64(id.GetLedgerId()), EntryID: int64(id.GetEntryId())}
			// Start AT the entry (the cursor starts after its argument):
			// the client filters inside a batch and for exclusive starts.
			if start.EntryID >= 0 && start.LedgerID >= 0 {
				start.EntryID--
			}
		}
		cur, err = t.ml.NewNonDurableCursor(start)
		return cur, &start, err
	}
	initial := managedledger.Latest
	after = &managedledger.Position{LedgerID: -1, EntryID: -1}
	if cmd.GetInitialPosition() == pb.CommandSubscribe_Earliest {
		initial = managedledger.Earliest
	}
	cur, err = t.ml.OpenCursor(ctx, cmd.GetSubscription(), managedledger.CursorOptions{Initial: initial})
	return cur, after, err
}

// unsubscribe removes a subscription that has no consumer left but c.
func (t *topic) unsubscribe(ctx context.Context, s *subscription, c *consumer) error {
	if err := s.closeIfOnly(c); err != nil {
		return err
	}
	t.mu.Lock()
	delete(t.subs, s.name)
	t.mu.Unlock()
	s.close()
	if !s.durable {
		return nil
	}
	return t.ml.DeleteCursor(ctx, s.name)
}

// durableSubs is a snapshot of the topic's durable subscriptions.
func (t *topic) durableSubs() []*subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	return subs
}

// allSubs is a snapshot of the durable subscriptions and the readers.
func (t *topic) allSubs() []*subscription {
	subs := t.durableSubs()
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.readers {
		subs = append(subs, s)
	}
	return subs
}

// subscriptionCursors are the managed ledger's cursors that are
// subscriptions: all but the broker's own (dedupCursor, indexCursor,
// the replicators' pulsar.repl.<remote>).
func (t *topic) subscriptionCursors() []managedledger.Cursor {
	all := t.ml.Cursors()
	out := all[:0:0]
	for _, c := range all {
		if c.Name() != dedupCursor && c.Name() != indexCursor && !isReplicatorCursor(c.Name()) {
			out = append(out, c)
		}
	}
	return out
}

// removeSubscription drops a non-persistent topic's subscription once
// its last consumer left, unless another consumer joined meanwhile.
func (t *topic) removeSubscription(s *subscription) {
	s.mu.Lock()
	if len(s.consumers) > 0 {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs[s.name] == s {
		delete(t.subs, s.name)
	}
}

// returningReader is the reader subscription named name that a SEEK left
// without its consumer, if any: the client subscribes again and resumes
// where the seek put the cursor, its start message id ignored, as Pulsar
// reuses a non-durable subscription that still exists.
func (t *topic) returningReader(name string) *subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.readers {
		if s.name == name && s.awaitingReturn() {
			return s
		}
	}
	return nil
}

func (t *topic) removeReader(s *subscription) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.readers, s)
}

// close disconnects the topic's producers and consumers and closes its
// managed ledger.
func (t *topic) close(ctx context.Context) {
	t.mu.Lock()
	t.closed = true
	subs := make([]*subscription, 0, len(t.subs)+len(t.readers))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	for s := range t.readers {
		subs = append(subs, s)
	}
	producers := make([]*producer, 0, len(t.producers))
	for p := range t.producers {
		producers = append(producers, p)
	}
	for _, w := range t.waiting {
		producers = append(producers, w.p)
	}
	t.mu.Unlock()
	t.stopReplication()
	for _, p := range producers {
		p.fence()
	}
	for _, s := range subs {
		s.disconnectConsumers()
		s.close()
	}
	if tb := t.txns.Load(); tb != nil {
		tb.saveIfChanged(ctx) // a reload replays less
	}
	_ = t.ml.Close(ctx)
}
