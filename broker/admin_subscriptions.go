package broker

// The subscription operations of the admin API (admin.Subscriptions);
// package broker/admin parses the requests (and unescapes names).
//
// Behaviour:
//   - A subscription is a durable cursor of the topic, whether or not a
//     consumer attached since the topic loaded. Calls act on its dispatcher
//     when it has one (so what consumers hold is dropped or sent again),
//     else on the cursor alone. Readers are not listed (stats show them).
//   - delete: errInUse while consumers are connected unless force, which
//     disconnects them; they resubscribe to a new subscription.
//   - skip and clear acknowledge the next n unacknowledged entries (a batch
//     entry counts once, where Pulsar counts its messages) or all.
//   - reset moves the subscription so that the first entry published at or
//     after the time, or the entry, is read next, and disconnects its
//     consumers, as SEEK.
//   - expire acknowledges the entries published before a time, as message
//     TTL does (ttl.go).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/managedledger"
)

// subTarget is a durable subscription an admin call acts on.
type subTarget struct {
	name   string
	s      *subscription // nil: no consumer attached since the topic loaded
	cursor managedledger.Cursor
}

// durableSub finds a subscription by name.
func (t *topic) durableSub(name string) (subTarget, bool) {
	t.mu.Lock()
	s, ok := t.subs[name]
	t.mu.Unlock()
	if ok {
		return subTarget{name: name, s: s, cursor: s.cursor}, true
	}
	for _, c := range t.subscriptionCursors() {
		if c.Durable() && c.Name() == name {
			return subTarget{name: name, cursor: c}, true
		}
	}
	return subTarget{}, false
}

// durableSubNames lists the subscriptions, sorted.
func (t *topic) durableSubNames() []string {
	seen := map[string]bool{}
	for _, s := range t.durableSubs() {
		seen[s.name] = true
	}
	for _, c := range t.subscriptionCursors() {
		if c.Durable() {
			seen[c.Name()] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// targetOf loads the topic and finds the subscription a call is about.
func (b *Broker) targetOf(ctx context.Context, name, sub string) (*topic, subTarget, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return nil, subTarget{}, err
	}
	st, ok := t.durableSub(sub)
	if !ok {
		return nil, subTarget{}, fmt.Errorf("subscription %s of %s: %w", sub, t.name, errSubNotFound)
	}
	return t, st, nil
}

// Subscriptions lists a topic's subscriptions (admin.Subscriptions).
func (b *Broker) Subscriptions(ctx context.Context, name string) ([]string, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	return t.durableSubNames(), nil
}

// createPartitionedSubscription creates sub on each of base's n
// partitions: here, or through the admin API of the partition's owner.
// A partition that has it already is left as it is, so a retried call
// completes what a failed one began; when every partition had it, the
// answer is errExists (409), as Pulsar's.
func (b *Broker) createPartitionedSubscription(ctx context.Context, base TopicName, n int, sub string, start admin.MessageID) error {
	existed := 0
	for i := range n {
		p := partitionName(base, i)
		res, err := b.lookup(ctx, p, false)
		if err != nil {
			return err
		}
		if !res.Self {
			err = b.peers.RemoteCreateSubscription(ctx, res, topicPath(p), sub, start)
		} else {
			err = b.CreateSubscription(ctx, p.String(), sub, start)
		}
		switch {
		case admin.StatusOf(err) == http.StatusConflict: // here (errExists) or there
			existed++
		case err != nil:
			return fmt.Errorf("partition %d: %w", i, err)
		}
	}
	if existed == n {
		return fmt.Errorf("subscription %s of %s: %w", sub, base, errExists)
	}
	return nil
}

// CreateSubscription opens a durable cursor at start (admin.Subscriptions).
// On a partitioned topic it creates the subscription on every partition,
// wherever each is served, as Pulsar does.
func (b *Broker) CreateSubscription(ctx context.Context, name, sub string, start admin.MessageID) error {
	if base, err := adminTopic(name); err == nil {
		if n, err := b.partitions(ctx, base); err == nil && n > 0 {
			return b.createPartitionedSubscription(ctx, base, n, sub, start)
		}
	}
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return err
	}
	if _, ok := t.durableSub(sub); ok {
		return fmt.Errorf("subscription %s of %s: %w", sub, t.name, errExists)
	}
	initial := managedledger.Latest
	if start.LedgerID < 0 {
		initial = managedledger.Earliest
	}
	c, err := t.ml.OpenCursor(ctx, sub, managedledger.CursorOptions{Initial: initial})
	if err != nil {
		return fmt.Errorf("subscription %s of %s: %w", sub, t.name, err)
	}
	if start.LedgerID >= 0 && start.LedgerID != admin.LatestLedger {
		if err := c.Reset(ctx, positionOf(start)); err != nil {
			_ = t.ml.DeleteCursor(ctx, sub) // no half-made subscription
			return fmt.Errorf("subscription %s of %s: start at %v: %w", sub, t.name, positionOf(start), err)
		}
	}
	t.b.log.Info("subscription created", "topic", t.name.String(), "subscription", sub, "start", positionOf(start).String())
	return nil
}

// DeleteSubscription removes a subscription: refused while consumers are
// connected unless force, which disconnects them. The closed subscription
// stays in the topic until its cursor is gone, so a consumer coming back
// meanwhile is refused (and retries) rather than handed the dying cursor.
func (b *Broker) DeleteSubscription(ctx context.Context, name, sub string, force bool) error {
	t, st, err := b.targetOf(ctx, name, sub)
	if err != nil {
		return err
	}
	if st.s != nil {
		if err := st.s.closeForDelete(force); err != nil {
			return err
		}
		st.s.disconnectConsumers()
	}
	err = t.ml.DeleteCursor(ctx, st.name)
	if st.s != nil {
		t.mu.Lock()
		if t.subs[st.name] == st.s {
			delete(t.subs, st.name)
		}
		t.mu.Unlock()
		st.s.close()
	}
	if err != nil && !errors.Is(err, managedledger.ErrCursorNotFound) {
		return fmt.Errorf("delete subscription %s of %s: %w", st.name, t.name, err)
	}
	t.b.log.Info("subscription deleted", "topic", t.name.String(), "subscription", st.name)
	return nil
}

// closeForDelete marks the subscription closed for deletion, so no
// consumer can join; errInUse while it has consumers, unless force.
func (s *subscription) closeForDelete(force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.consumers); n > 0 && !force {
		return fmt.Errorf("subscription %s %w: %d consumers", s.name, errInUse, n)
	}
	s.closed = true
	return nil
}

// SkipMessages acknowledges the next n unacknowledged entries
// (admin.Subscriptions).
func (b *Broker) SkipMessages(ctx context.Context, name, sub string, n int64) error {
	_, st, err := b.targetOf(ctx, name, sub)
	if err != nil {
		return err
	}
	if err := st.cursor.SkipEntries(ctx, n); err != nil {
		return fmt.Errorf("skip %d on subscription %s: %w", n, st.name, err)
	}
	st.dropAcknowledged()
	return nil
}

// ClearBacklog acknowledges everything (admin.Subscriptions).
func (b *Broker) ClearBacklog(ctx context.Context, name, sub string) error {
	_, st, err := b.targetOf(ctx, name, sub)
	if err != nil {
		return err
	}
	if err := st.cursor.ClearBacklog(ctx); err != nil {
		return fmt.Errorf("clear backlog of subscription %s: %w", st.name, err)
	}
	st.dropAcknowledged()
	return nil
}

// dropAcknowledged makes the dispatcher forget what the cursor now counts
// as acknowledged.
func (st subTarget) dropAcknowledged() {
	if st.s != nil {
		st.s.dropUpTo(st.cursor.MarkDeletePosition())
	}
}

// ResetCursorToTime moves the subscription to the first entry published
// at or after ms (admin.Subscriptions).
func (b *Broker) ResetCursorToTime(ctx context.Context, name, sub string, ms int64) error {
	t, st, err := b.targetOf(ctx, name, sub)
	if err != nil {
		return err
	}
	pos, err := findByPublishTime(ctx, t.ml, uint64(ms))
	if err != nil {
		return fmt.Errorf("reset subscription %s: find publish time %d: %w", st.name, ms, err)
	}
	return st.reset(ctx, pos)
}

// ResetCursor moves the subscription to an entry (admin.Subscriptions).
func (b *Broker) ResetCursor(ctx context.Context, name, sub string, to admin.MessageID) error {
	_, st, err := b.targetOf(ctx, name, sub)
	if err != nil {
		return err
	}
	pos := positionOf(to)
	if to.IsExcluded && pos.EntryID < math.MaxInt64 {
		// Read from the entry after it; a position past a ledger's last
		// entry resets to the next ledger's first (indexAtOrAfter).
		pos.EntryID++
	}
	return st.reset(ctx, pos)
}

// ExpireMessagesTo acknowledges the subscription up to the entry to, or
// the one before it when to.IsExcluded (admin.Subscriptions; Pulsar's
// expire-messages by position). A position past the topic's last entry is
// refused, as it names no message.
func (b *Broker) ExpireMessagesTo(ctx context.Context, name, sub string, to admin.MessageID) error {
	t, st, err := b.expireTargetOf(ctx, name, sub)
	if err != nil {
		return err
	}
	pos := positionOf(to)
	if last := t.ml.LastConfirmed(); pos.Compare(last) > 0 {
		return admin.BadRequest("messageId", "position %v is after the topic's last entry %v", pos, last)
	}
	if to.IsExcluded {
		prev, ok := positionBefore(t.ml, pos)
		if !ok {
			return nil // nothing before it
		}
		pos = prev
	}
	return st.expireUpTo(ctx, pos)
}

// reset moves the subscription so that pos is read next and disconnects
// its consumers, as SEEK does.
func (st subTarget) reset(ctx context.Context, pos managedledger.Position) error {
	if st.s == nil {
		if err := st.cursor.Reset(ctx, pos); err != nil {
			return fmt.Errorf("reset subscription %s to %v: %w", st.name, pos, err)
		}
		return nil
	}
	if err := st.s.seek(ctx, pos); err != nil {
		return fmt.Errorf("reset subscription %s to %v: %w", st.name, pos, err)
	}
	st.s.disconnectConsumers()
	return nil
}

// ExpireMessages acknowledges what was published before cutoff
// (admin.Subscriptions). sub may name a replicator's cursor
// (pulsar.repl.<remote>), as on Pulsar.
func (b *Broker) ExpireMessages(ctx context.Context, name, sub string, cutoff time.Time) error {
	t, st, err := b.expireTargetOf(ctx, name, sub)
	if err != nil {
		return err
	}
	last, ok := lastPublishedBefore(ctx, t.ml, uint64(cutoff.UnixMilli()))
	if !ok {
		return nil
	}
	return st.expireUpTo(ctx, last)
}

// expireTargetOf is targetOf that also finds a replicator's cursor by its
// name, which Pulsar's expire-messages accepts.
func (b *Broker) expireTargetOf(ctx context.Context, name, sub string) (*topic, subTarget, error) {
	if !isReplicatorCursor(sub) {
		return b.targetOf(ctx, name, sub)
	}
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return nil, subTarget{}, err
	}
	for _, c := range t.replicatorCursors() {
		if c.Name() == sub {
			return t, subTarget{name: sub, cursor: c}, nil
		}
	}
	return nil, subTarget{}, fmt.Errorf("replicator cursor %s of %s: %w", sub, t.name, errSubNotFound)
}

// ExpireAllSubscriptions acknowledges, on every subscription and
// replicator cursor, what was published before cutoff
// (admin.Subscriptions).
func (b *Broker) ExpireAllSubscriptions(ctx context.Context, name string, cutoff time.Time) error {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return err
	}
	last, ok := lastPublishedBefore(ctx, t.ml, uint64(cutoff.UnixMilli()))
	if !ok {
		return nil
	}
	for _, sub := range t.durableSubNames() {
		st, found := t.durableSub(sub)
		if !found {
			continue // deleted meanwhile
		}
		if err := st.expireUpTo(ctx, last); err != nil {
			return err
		}
	}
	for _, c := range t.replicatorCursors() {
		if err := (subTarget{name: c.Name(), cursor: c}).expireUpTo(ctx, last); err != nil && !cursorGone(err) {
			return err
		}
	}
	return nil
}

// expireUpTo acknowledges everything up to pos (never moving back).
func (st subTarget) expireUpTo(ctx context.Context, pos managedledger.Position) error {
	if moved, err := expireCursorUpTo(ctx, st.cursor, pos); !moved {
		return err
	}
	st.dropAcknowledged()
	return nil
}

// PeekMessage is the subscription's n-th (from 1) unacknowledged entry
// (admin.Subscriptions).
//
// Peeking a subscription the topic does not have creates it at the
// earliest position first, as Pulsar's getSubscriptionReference does
// (pulsaradmin's own TestPeekMessagesWithProperties relies on it).
func (b *Broker) PeekMessage(ctx context.Context, name, sub string, n int) (admin.Message, error) {
	t, st, err := b.targetOf(ctx, name, sub)
	if errors.Is(err, errSubNotFound) {
		err = b.CreateSubscription(ctx, name, sub, admin.MessageID{LedgerID: -1, EntryID: -1})
		if err == nil || errors.Is(err, errExists) {
			t, st, err = b.targetOf(ctx, name, sub)
		}
	}
	if err != nil {
		return admin.Message{}, err
	}
	e, err := nthUnacknowledged(ctx, t.ml, st.cursor, n)
	if err != nil {
		return admin.Message{}, fmt.Errorf("peek subscription %s: %w", st.name, err)
	}
	return b.messageOf(ctx, e)
}
