package broker

// Message TTL (ttlDurationDefaultInSeconds, or the namespace's
// message_ttl_in_seconds; policies.go): messages older than the TTL
// count as acknowledged on every durable subscription, as Pulsar's expiry
// monitor does: each check moves a subscription's mark-delete position to
// the last entry published before now - TTL (never backwards), and the
// dispatcher drops what it held of them. The check runs every
// messageExpiryCheckIntervalInMinutes (default 5 minutes).
//
// The replicators' cursors (pulsar.repl.<remote>) expire too, as
// Pulsar's checkMessageExpiry expires its replicators: a remote cut off
// for longer than the TTL does not get what expired meanwhile, so a
// replication backlog is bounded by the TTL as a subscription's is. What
// a replicator had already read when its cursor moved is still sent
// (at most one read, dispatcherMaxReadBatchSize entries).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
)

// expireMessages acknowledges, on every durable subscription of every
// loaded topic, the entries published before cutoff.
func (b *Broker) expireMessages(ctx context.Context, cutoff time.Time) {
	for t := range b.topicPass() {
		t.expireBefore(ctx, cutoff)
	}
}

// expireBefore acknowledges, on every durable subscription, the entries
// published before cutoff.
func (t *topic) expireBefore(ctx context.Context, cutoff time.Time) {
	last, ok := lastPublishedBefore(ctx, t.ml, uint64(cutoff.UnixMilli()))
	if !ok {
		return
	}
	for _, s := range t.durableSubs() {
		s.expireUpTo(ctx, last)
	}
	for _, c := range t.replicatorCursors() {
		if _, err := expireCursorUpTo(ctx, c, last); err != nil && !cursorGone(err) {
			t.b.log.Warn("replication backlog not expired", "topic", t.name.String(), "cursor", c.Name(), "err", err)
		}
	}
}

// cursorGone reports whether err says the cursor or its ledger closed
// meanwhile (a remote removed, the topic unloaded): nothing to expire.
func cursorGone(err error) bool {
	return errors.Is(err, managedledger.ErrCursorNotFound) || errors.Is(err, managedledger.ErrClosed)
}

// replicatorCursors are the topic's replicator cursors, those of remotes
// no replicator runs for at the moment included.
func (t *topic) replicatorCursors() []managedledger.Cursor {
	var out []managedledger.Cursor
	for _, c := range t.ml.Cursors() {
		if isReplicatorCursor(c.Name()) {
			out = append(out, c)
		}
	}
	return out
}

// expireCursorUpTo moves a cursor's mark-delete position to pos, never
// backwards; moved says whether it did.
func expireCursorUpTo(ctx context.Context, c managedledger.Cursor, pos managedledger.Position) (moved bool, err error) {
	if c.MarkDeletePosition().Compare(pos) >= 0 {
		return false, nil
	}
	if err := c.MarkDelete(ctx, pos); err != nil {
		return false, fmt.Errorf("expire messages of %s up to %v: %w", c.Name(), pos, err)
	}
	return true, nil
}

// lastPublishedBefore finds the last entry published before t (ms), by
// the binary search of findByPublishTime.
func lastPublishedBefore(ctx context.Context, ml managedledger.ManagedLedger, t uint64) (managedledger.Position, bool) {
	if ml.Entries() == 0 {
		return managedledger.Position{}, false
	}
	first, found, err := ml.FindFirst(ctx, publishedAtOrAfter(t))
	if err != nil {
		return managedledger.Position{}, false
	}
	if !found {
		return ml.LastConfirmed(), true // everything stored is older
	}
	return positionBefore(ml, first)
}

// expireUpTo acknowledges everything up to pos on this subscription.
func (s *subscription) expireUpTo(ctx context.Context, pos managedledger.Position) {
	if moved, _ := expireCursorUpTo(ctx, s.cursor, pos); moved {
		s.dropUpTo(pos)
	}
}
