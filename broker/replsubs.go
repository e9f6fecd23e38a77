package broker

// Replicated subscriptions, as Pulsar's ReplicatedSubscriptionsController,
// ReplicatedSubscriptionsSnapshotBuilder and
// ReplicatedSubscriptionSnapshotCache: a subscription created with
// replicate_subscription_state follows its consumers' progress in every
// cluster the topic replicates to, so a consumer group that moves to
// another cluster resumes close to where it was.
//
// Behaviour:
//   - A subscription is replicated once a consumer subscribed with
//     replicate_subscription_state=true (Go client
//     ConsumerOptions.ReplicateSubscriptionState) or a subscription update
//     created it; the flag is the cursor property
//     pulsar.replicated.subscription=1 (Pulsar's), so it outlives reloads.
//     It is never cleared by a later SUBSCRIBE without the flag.
//   - Snapshots. Every replicatedSubscriptionsSnapshotFrequency, a topic
//     with replicators, a replicated subscription, every replicator
//     connected and data stored since the last completed snapshot started
//     writes a SNAPSHOT_REQUEST marker (wire/markers) into itself. The
//     replicators carry it to each remote, whose broker answers with a
//     SNAPSHOT_RESPONSE marker (replicate_to: the requester) holding its
//     last position R. Once every remote answered (with more than one
//     remote, twice: Pulsar's second round catches what the clusters were
//     exchanging meanwhile), the requester writes a SNAPSHOT marker, local
//     to it, pairing P, the position where the last response was stored
//     here, with each remote's R. Everything stored in a remote up to R
//     is here before P (replication keeps order per remote), and what
//     came from here into the remote before R was here before P too; so a
//     subscription that acknowledged everything up to P may be moved to R
//     in that remote without losing anything.
//   - A replicated subscription's dispatcher keeps the SNAPSHOT markers it
//     reads (at most replicatedSubscriptionsSnapshotMaxCachedPerSubscription;
//     past it, thinned so that what is kept stays spread out). When its mark-delete position reaches a kept
//     snapshot's P, the newest such snapshot is taken (older ones dropped)
//     and an UPDATE marker (subscription, each remote's R) is written.
//   - A remote receiving an UPDATE moves the subscription of that name
//     forward to its own R (never back); a subscription that does not
//     exist there is created at R, replicated (Pulsar creates it at the
//     latest entry, skipping what was not consumed yet).
//   - Markers are entries with marker_type set, written through the
//     topic's normal add path. They are never dispatched to consumers (the
//     dispatcher acknowledges them as it reads them), never counted in
//     message stats and never deduplicated. A replicator forwards the
//     markers written here (subject to replicate_to, like any entry) and,
//     as any entry with replicated_from set, never one that arrived by
//     replication: markers go one hop. The replicator to a remote is also
//     where markers from that remote are acted on, once each.
//   - "Close to": the subscription moves to the newest snapshot its
//     mark-delete position passed, so a consumer moving clusters gets
//     again what was stored in the last snapshot interval (plus the time a
//     snapshot takes) before it stopped. Snapshots are taken only while
//     every remote is connected.
//
// Lock rules: replSubs.mu guards pending and the completed snapshot; it is
// never held while writing a marker or calling into a subscription.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/markers"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// replicatedSubProperty marks a replicated subscription's cursor
// (Pulsar's property name and value).
const replicatedSubProperty = "pulsar.replicated.subscription"

// maxPendingSnapshots bounds the snapshots under way per topic: with
// remotes that answer slowly, new ones wait until old ones time out.
const maxPendingSnapshots = 10

// replSubs is a topic's replicated-subscription snapshot state.
type replSubs struct {
	// lastDataNs is when the last entry that is not a marker was stored
	// (unix ns): no new data, no new snapshot.
	lastDataNs atomic.Int64
	// completed counts snapshots completed here (tests, debugging).
	completed atomic.Int64

	mu                   sync.Mutex
	pending              map[string]*pendingSnapshot
	lastCompletedStartNs int64
}

// pendingSnapshot is a snapshot waiting for responses.
type pendingSnapshot struct {
	startNs        int64
	remotes        []string
	missing        map[string]bool
	responses      map[string]markers.MessageID
	twoRounds      bool
	firstRoundDone bool
	finalPending   bool // the SNAPSHOT marker is being written
}

func markerID(p managedledger.Position) markers.MessageID {
	return markers.MessageID{LedgerID: uint64(p.LedgerID), EntryID: uint64(p.EntryID)}
}

func markerPosition(id markers.MessageID) managedledger.Position {
	return managedledger.Position{LedgerID: int64(id.LedgerID), EntryID: int64(id.EntryID)}
}

// replicatedSubsEnabled reports whether the topic takes part in
// replicated subscriptions at all.
func (t *topic) replicatedSubsEnabled() bool {
	return !t.b.cfg.ReplicatedSubscriptionsDisabled && t.name.Persistent() && t.b.cfg.ClusterName != ""
}

// noteData records that an entry that is not a marker was stored.
func (t *topic) noteData() { t.rsubs.lastDataNs.Store(time.Now().UnixNano()) }

// snapshotReplicatedSubscriptions starts a snapshot on every loaded topic
// that needs one.
func (b *Broker) snapshotReplicatedSubscriptions() {
	now := time.Now()
	for t := range b.topicPass() {
		t.startSnapshot(now)
	}
}

// hasReplicatedSubscription reports whether any subscription cursor
// carries the replicated flag (loaded with a consumer or not).
func (t *topic) hasReplicatedSubscription() bool {
	for _, c := range t.subscriptionCursors() {
		if c.Properties()[replicatedSubProperty] == 1 {
			return true
		}
	}
	return false
}

// startSnapshot writes a snapshot request when the topic has replicated
// subscriptions, new data since the last snapshot and every replicator
// connected.
func (t *topic) startSnapshot(now time.Time) {
	if !t.replicatedSubsEnabled() || t.terminated.Load() {
		return // a terminated topic takes no more entries, markers included
	}
	reps := t.replicators()
	if len(reps) == 0 {
		return
	}
	rs := &t.rsubs
	rs.mu.Lock()
	for id, p := range rs.pending {
		if now.UnixNano()-p.startNs > int64(t.b.cfg.ReplicatedSubscriptionsSnapshotTimeout) {
			delete(rs.pending, id) // a late response finds nothing
		}
	}
	last := rs.lastDataNs.Load()
	skip := last == 0 || last < rs.lastCompletedStartNs || len(rs.pending) >= maxPendingSnapshots
	rs.mu.Unlock()
	if skip || !t.hasReplicatedSubscription() {
		return
	}
	remotes := make([]string, 0, len(reps))
	for _, r := range reps {
		if !r.connected.Load() {
			return // a snapshot needs every cluster's answer
		}
		remotes = append(remotes, r.remote)
	}
	slices.Sort(remotes)
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	p := &pendingSnapshot{startNs: now.UnixNano(), remotes: remotes, missing: map[string]bool{},
		responses: map[string]markers.MessageID{}, twoRounds: len(remotes) > 1}
	for _, r := range remotes {
		p.missing[r] = true
	}
	rs.mu.Lock()
	if rs.pending == nil {
		rs.pending = map[string]*pendingSnapshot{}
	}
	rs.pending[id] = p
	rs.mu.Unlock()
	t.writeMarker(markers.SnapshotRequest, markers.Request{SnapshotID: id, SourceCluster: t.b.cfg.ClusterName}.Encode(), nil, nil)
}

// writeMarker stores a marker entry through the topic's add path; done,
// if set, gets the position or the error.
func (t *topic) writeMarker(typ markers.Type, payload []byte, replicateTo []string, done func(managedledger.Position, error)) {
	entry, err := markers.Entry(typ, payload, replicateTo, uint64(time.Now().UnixMilli()))
	if err == nil && t.b.ctx.Err() != nil {
		err = t.b.ctx.Err()
	}
	if err != nil {
		if done != nil {
			done(managedledger.Position{}, err)
		}
		return
	}
	t.addEntry(entry, crc32c.Known{}, 1, func(pos managedledger.Position, err error) {
		if err != nil && !errors.Is(err, managedledger.ErrClosed) {
			t.b.log.Warn("replicated-subscription marker not stored", "topic", t.name.String(), "type", int(typ), "err", err)
		}
		if done != nil {
			done(pos, err)
		}
	})
}

// receivedMarker acts on a marker that arrived from cluster from (the
// replicator to from calls it, so each marker is handled once).
func (t *topic) receivedMarker(from string, pos managedledger.Position, typ markers.Type, payload []byte) {
	if !t.replicatedSubsEnabled() {
		return
	}
	var err error
	switch typ {
	case markers.SnapshotRequest:
		var req markers.Request
		if req, err = markers.ParseRequest(payload); err == nil {
			t.answerSnapshotRequest(req)
		}
	case markers.SnapshotResponse:
		var resp markers.Response
		if resp, err = markers.ParseResponse(payload); err == nil {
			t.snapshotResponse(pos, resp)
		}
	case markers.Update:
		var up markers.UpdateData
		if up, err = markers.ParseUpdate(payload); err == nil {
			t.subscriptionUpdate(up)
		}
	}
	if err != nil {
		t.b.log.Warn("replicated-subscription marker ignored: it does not parse", "topic", t.name.String(),
			"from", from, "position", pos, "err", err)
	}
}

// answerSnapshotRequest answers with this cluster's last position; the
// response is stored after it, so the requester receives everything up to
// that position before the response.
func (t *topic) answerSnapshotRequest(req markers.Request) {
	last := t.ml.LastConfirmed()
	resp := markers.Response{SnapshotID: req.SnapshotID,
		Cluster: markers.ClusterID{Cluster: t.b.cfg.ClusterName, ID: markerID(last)}}
	t.writeMarker(markers.SnapshotResponse, resp.Encode(), []string{req.SourceCluster}, nil)
}

// snapshotResponse records a remote's answer stored here at pos; the
// last answer of the last round completes the snapshot.
func (t *topic) snapshotResponse(pos managedledger.Position, resp markers.Response) {
	rs := &t.rsubs
	rs.mu.Lock()
	p := rs.pending[resp.SnapshotID]
	if p == nil || p.finalPending {
		rs.mu.Unlock()
		return // timed out, or already complete
	}
	if _, ok := p.responses[resp.Cluster.Cluster]; !ok {
		p.responses[resp.Cluster.Cluster] = resp.Cluster.ID
	}
	delete(p.missing, resp.Cluster.Cluster)
	if len(p.missing) > 0 {
		rs.mu.Unlock()
		return
	}
	if p.twoRounds && !p.firstRoundDone {
		p.firstRoundDone = true
		for _, r := range p.remotes {
			p.missing[r] = true
		}
		rs.mu.Unlock()
		t.writeMarker(markers.SnapshotRequest, markers.Request{SnapshotID: resp.SnapshotID, SourceCluster: t.b.cfg.ClusterName}.Encode(), nil, nil)
		return
	}
	p.finalPending = true
	snap := markers.SnapshotData{SnapshotID: resp.SnapshotID, Local: markerID(pos)}
	for _, r := range p.remotes {
		snap.Clusters = append(snap.Clusters, markers.ClusterID{Cluster: r, ID: p.responses[r]})
	}
	rs.mu.Unlock()
	local := []string{t.b.cfg.ClusterName} // the snapshot stays here
	t.writeMarker(markers.Snapshot, snap.Encode(), local, func(_ managedledger.Position, err error) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if err != nil {
			p.finalPending = false // a later response (second request) may complete it
			return
		}
		delete(rs.pending, snap.SnapshotID)
		rs.lastCompletedStartNs = max(rs.lastCompletedStartNs, p.startNs)
		rs.completed.Add(1)
	})
}

// subscriptionUpdate moves the named subscription to this cluster's
// position in the update, creating it there if it does not exist.
func (t *topic) subscriptionUpdate(up markers.UpdateData) {
	i := slices.IndexFunc(up.Clusters, func(c markers.ClusterID) bool { return c.Cluster == t.b.cfg.ClusterName })
	if i < 0 {
		return
	}
	name := up.Subscription
	if name == dedupCursor || name == indexCursor || isReplicatorCursor(name) {
		return // never the broker's own cursors
	}
	pos := markerPosition(up.Clusters[i].ID)
	if last := t.ml.LastConfirmed(); pos.Compare(last) > 0 {
		pos = last // not possible while positions come from here; never past the end
	}
	ctx := t.b.ctx
	t.mu.Lock()
	s := t.subs[name]
	t.mu.Unlock()
	if s != nil && s.durable {
		s.moveForward(ctx, pos)
		return
	}
	cur, err := t.ml.OpenCursor(ctx, name, managedledger.CursorOptions{Initial: managedledger.Earliest})
	if err == nil {
		err = markReplicated(ctx, cur)
	}
	if err == nil && pos.Compare(cur.MarkDeletePosition()) > 0 {
		err = cur.MarkDelete(ctx, pos)
	}
	if err != nil && !errors.Is(err, managedledger.ErrClosed) {
		t.b.log.Warn("replicated subscription not updated", "topic", t.name.String(), "subscription", name, "err", err)
	}
}

// markReplicated sets the replicated flag in a cursor's properties
// (keeping the others) unless it is set.
func markReplicated(ctx context.Context, cur managedledger.Cursor) error {
	props := cur.Properties()
	if props[replicatedSubProperty] == 1 {
		return nil
	}
	if props == nil {
		props = map[string]int64{}
	}
	props[replicatedSubProperty] = 1
	return cur.MarkDeleteWithProperties(ctx, cur.MarkDeletePosition(), props)
}

// isReplicatedCursor reports whether a subscription's cursor carries the
// replicated flag.
func isReplicatedCursor(cur managedledger.Cursor) bool {
	return cur.Durable() && cur.Properties()[replicatedSubProperty] == 1
}

// setReplicated marks the subscription replicated (a SUBSCRIBE with
// replicate_subscription_state), keeping the flag in its cursor.
func (s *subscription) setReplicated(ctx context.Context) error {
	if !s.durable || s.replicated.Load() {
		return nil
	}
	if err := markReplicated(ctx, s.cursor); err != nil {
		return err
	}
	s.replicated.Store(true)
	return nil
}

// moveForward acknowledges everything up to pos (an update from another
// cluster); what consumers hold at or before it is forgotten.
func (s *subscription) moveForward(ctx context.Context, pos managedledger.Position) {
	if pos.Compare(s.cursor.MarkDeletePosition()) <= 0 {
		return
	}
	if err := s.cursor.MarkDelete(ctx, pos); err != nil {
		s.topic.b.log.Warn("replicated subscription not moved", "topic", s.topic.name.String(), "subscription", s.name, "err", err)
		return
	}
	s.mu.Lock()
	for p := range s.inflight {
		if p.Compare(pos) <= 0 {
			s.ackedLocked(p)
		}
	}
	for p := range s.replay {
		if p.Compare(pos) <= 0 {
			delete(s.replay, p)
		}
	}
	s.mu.Unlock()
	s.dispatch()
}

// keepSnapshotLocked adds a SNAPSHOT marker read by the dispatcher to the
// subscription's cache (oldest dropped past the limit).
func (s *subscription) keepSnapshotLocked(payload []byte) {
	snap, err := markers.ParseSnapshot(payload)
	if err != nil {
		s.topic.b.log.Warn("snapshot marker ignored: it does not parse", "topic", s.topic.name.String(), "err", err)
		return
	}
	if n := len(s.snapshots); n > 0 && markerPosition(snap.Local).Compare(markerPosition(s.snapshots[n-1].Local)) <= 0 {
		return // read again (redelivery, seek): already kept or passed
	}
	s.snapshots = append(s.snapshots, snap)
	s.snapshots = thinSnapshots(s.snapshots, s.topic.b.cfg.ReplicatedSubscriptionsSnapshotMaxCached)
}

// thinSnapshots drops snapshots until at most limit are left, each time
// the one (never the oldest nor the newest) whose neighbours are closest
// together, so that the largest gap it leaves is smallest: what is kept
// stays spread over the backlog, so a consumer that read
// far ahead of its acknowledgements still finds a snapshot near its
// mark-delete position (dropping the oldest would leave it none until it
// caught up with the read position).
func thinSnapshots(snaps []markers.SnapshotData, limit int) []markers.SnapshotData {
	for len(snaps) > max(limit, 2) {
		best, bestGap := 1, uint64(math.MaxUint64)
		for i := 1; i < len(snaps)-1; i++ {
			if gap := snapshotGap(snaps[i-1].Local, snaps[i+1].Local); gap < bestGap {
				best, bestGap = i, gap
			}
		}
		snaps = slices.Delete(snaps, best, best+1)
	}
	return snaps
}

// snapshotGap is how far apart two positions are, in entries within a
// ledger; positions in different ledgers count as far apart in proportion
// to the ledgers between them.
func snapshotGap(a, b markers.MessageID) uint64 {
	if a.LedgerID == b.LedgerID {
		return b.EntryID - a.EntryID
	}
	return (b.LedgerID - a.LedgerID) << 32
}

// advanceSnapshots writes an update marker when the mark-delete position
// passed a kept snapshot: the newest one passed; older ones are dropped.
func (s *subscription) advanceSnapshots() {
	if !s.replicated.Load() {
		return
	}
	md := s.cursor.MarkDeletePosition()
	s.mu.Lock()
	i := 0
	for i < len(s.snapshots) && markerPosition(s.snapshots[i].Local).Compare(md) <= 0 {
		i++
	}
	if i == 0 {
		s.mu.Unlock()
		return
	}
	snap := s.snapshots[i-1]
	s.snapshots = slices.Delete(s.snapshots, 0, i)
	s.mu.Unlock()
	up := markers.UpdateData{Subscription: s.name, Clusters: snap.Clusters}
	s.topic.writeMarker(markers.Update, up.Encode(), nil, nil)
}

// markerType is an entry's marker type, 0 when it is no marker.
func markerType(md *pb.MessageMetadata) markers.Type { return markers.Type(md.GetMarkerType()) }

// SetReplicatedSubscriptionStatus turns a subscription's replication on
// or off (admin.Subscriptions; Pulsar's replicatedSubscriptionStatus).
// Off removes the flag from the cursor and forgets the kept snapshots.
func (b *Broker) SetReplicatedSubscriptionStatus(ctx context.Context, name, sub string, enabled bool) error {
	_, st, err := b.targetOf(ctx, name, sub)
	if err != nil {
		return err
	}
	if enabled {
		if st.s != nil {
			return st.s.setReplicated(ctx)
		}
		return markReplicated(ctx, st.cursor)
	}
	if st.s != nil {
		st.s.replicated.Store(false)
		st.s.mu.Lock()
		st.s.snapshots = nil
		st.s.mu.Unlock()
	}
	props := st.cursor.Properties()
	if _, ok := props[replicatedSubProperty]; !ok {
		return nil
	}
	delete(props, replicatedSubProperty)
	return st.cursor.MarkDeleteWithProperties(ctx, st.cursor.MarkDeletePosition(), props)
}
