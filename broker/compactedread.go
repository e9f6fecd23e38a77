package broker

// Reading a compacted topic (SUBSCRIBE with read_compacted). Behavior:
//   - Only persistent topics, and only Exclusive or Failover subscriptions
//     (and readers), as Pulsar: one consumer reads at a time, so the
//     switch from the compacted ledger to the topic happens once, in order.
//   - Up to the compaction horizon the subscription is given the compacted
//     ledger's entries (each key's last message, with its original id);
//     after it, the topic's entries as any subscription.
//   - The cursor counts acknowledgements by entries still stored, so a
//     position in a ledger already trimmed cannot be its mark-delete
//     position. A compacted reader's progress there is kept in the
//     cursor's properties (compactedReadLedger/Entry, as a position): a new
//     subscription starting at the earliest message, or one whose
//     mark-delete position is before the first stored entry, reads the
//     compacted ledger from that position on. Individual acknowledgements
//     of trimmed positions are not kept: after a reconnect those messages
//     come again (at least once, never lost).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

const (
	compactedReadLedgerKey = "compactedReadLedger"
	compactedReadEntryKey  = "compactedReadEntry"
)

// errReadCompactedNotAllowed: read_compacted on a subscription type that
// may have several consumers reading at once.
var errReadCompactedNotAllowed = errors.New("read compacted can only be used with exclusive or failover persistent subscriptions")

// compactedCursor is a subscription's cursor that reads the compacted
// ledger up to the horizon. mu guards next and idx; it is never held
// across storage calls other than the compacted ledger's reads, which
// only this cursor's reader makes (one read at a time per subscription).
type compactedCursor struct {
	managedledger.Cursor
	t *topic

	mu sync.Mutex
	// next is the first position not yet read from the compacted ledger
	// (nil: reading the topic itself); idx is the compacted ledger entry
	// holding it, valid while idxOf is that ledger's id.
	next  *managedledger.Position
	idx   int64
	idxOf int64
}

// readCompactedCursor wraps cursor for a read_compacted subscription.
// after, when set, is where reading starts (the first entry after it): a
// reader's start, or {-1,-1} for a new durable subscription at the
// earliest message, which then reads the compacted ledger from its first
// entry. Otherwise reading resumes after the stored progress.
func (t *topic) readCompactedCursor(ctx context.Context, cursor managedledger.Cursor, after *managedledger.Position) (*compactedCursor, error) {
	c := &compactedCursor{Cursor: cursor, t: t, idxOf: -1}
	if after == nil {
		c.rewindLocked()
		return c, nil
	}
	if cursor.Durable() {
		if err := c.storeProgress(ctx, cursor.MarkDeletePosition(), *after); err != nil {
			return nil, err
		}
	}
	c.next = &managedledger.Position{LedgerID: after.LedgerID, EntryID: after.EntryID + 1}
	return c, nil
}

// checkReadCompacted refuses read_compacted where Pulsar refuses it.
func checkReadCompacted(t *topic, cmd *pb.CommandSubscribe) error {
	if !t.name.Persistent() {
		return fmt.Errorf("%s: %w", t.name, errReadCompactedNotAllowed)
	}
	switch cmd.GetSubType() {
	case pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover:
		return nil
	}
	return fmt.Errorf("%s: subscription %s: %w", t.name, cmd.GetSubscription(), errReadCompactedNotAllowed)
}

// storeProgress keeps the compacted read position in the cursor's
// properties with mark-delete position md.
func (c *compactedCursor) storeProgress(ctx context.Context, md, read managedledger.Position) error {
	props := maps.Clone(c.Cursor.Properties())
	if props == nil {
		props = map[string]int64{}
	}
	props[compactedReadLedgerKey], props[compactedReadEntryKey] = read.LedgerID, read.EntryID
	return c.Cursor.MarkDeleteWithProperties(ctx, md, props)
}

// rewindLocked starts compacted reads from the first unacknowledged
// position (the stored progress when the mark-delete position is before
// every stored entry).
func (c *compactedCursor) rewindLocked() {
	md := c.Cursor.MarkDeletePosition()
	start := managedledger.Position{LedgerID: md.LedgerID, EntryID: md.EntryID + 1}
	props := c.Cursor.Properties()
	if l, ok := props[compactedReadLedgerKey]; ok && c.t.beforeFirstStored(md) {
		start = managedledger.Position{LedgerID: l, EntryID: props[compactedReadEntryKey] + 1}
	}
	c.next, c.idxOf = &start, -1
}

// beforeFirstStored reports whether p is before the first stored entry;
// true when that cannot be looked up (the managed ledger refuses a
// reader): every caller then falls back to the compacted progress, which
// delivers again rather than skips.
func (t *topic) beforeFirstStored(p managedledger.Position) bool {
	first, ok := t.firstStored()
	return !ok || p.Compare(first) < 0
}

// firstStored is the position of the first stored entry (the next one
// to be written when none is); false when the managed ledger refuses a
// reader (closed, fenced).
func (t *topic) firstStored() (managedledger.Position, bool) {
	cur, err := t.ml.NewNonDurableCursor(managedledger.Position{LedgerID: -1, EntryID: -1})
	if err != nil {
		return managedledger.Position{}, false
	}
	defer cur.Close(context.Background())
	return cur.ReadPosition(), true
}

func (c *compactedCursor) ReadPosition() managedledger.Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next != nil {
		return *c.next
	}
	return c.Cursor.ReadPosition()
}

func (c *compactedCursor) Seek(pos managedledger.Position) {
	c.mu.Lock()
	c.next, c.idxOf = &pos, -1 // the next read decides which side pos is on
	c.mu.Unlock()
	c.Cursor.Seek(pos)
}

func (c *compactedCursor) Rewind() {
	c.Cursor.Rewind()
	c.mu.Lock()
	c.rewindLocked()
	c.mu.Unlock()
}

func (c *compactedCursor) Reset(ctx context.Context, pos managedledger.Position) error {
	if err := c.Cursor.Reset(ctx, pos); err != nil {
		return err
	}
	c.mu.Lock()
	c.next, c.idxOf = &pos, -1
	c.mu.Unlock()
	return nil
}

// MarkDelete also keeps the compacted progress when pos is at or before
// the horizon (see the file comment).
func (c *compactedCursor) MarkDelete(ctx context.Context, pos managedledger.Position) error {
	v, err := c.t.compactedView(ctx)
	if err != nil || v == nil || pos.Compare(v.horizon) > 0 {
		return c.Cursor.MarkDelete(ctx, pos)
	}
	if !c.t.beforeFirstStored(pos) {
		return c.Cursor.MarkDelete(ctx, pos)
	}
	return c.storeProgress(ctx, pos, pos)
}

func (c *compactedCursor) ReadEntries(ctx context.Context, n int, maxBytes int64) ([]managedledger.Entry, error) {
	entries, done, err := c.readCompacted(ctx, n, maxBytes)
	if err != nil || done {
		return entries, err
	}
	return c.Cursor.ReadEntries(ctx, n, maxBytes)
}

func (c *compactedCursor) ReadEntriesOrWait(n int, maxBytes int64, cb func([]managedledger.Entry, error)) {
	entries, done, err := c.readCompacted(context.Background(), n, maxBytes)
	if err != nil || done {
		cb(entries, err)
		return
	}
	c.Cursor.ReadEntriesOrWait(n, maxBytes, cb)
}

// readCompacted reads up to n entries of the compacted ledger from next;
// done is false once the horizon is passed (read the topic instead).
func (c *compactedCursor) readCompacted(ctx context.Context, n int, maxBytes int64) (out []managedledger.Entry, done bool, err error) {
	v, err := c.t.compactedView(ctx)
	if err != nil {
		return nil, true, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		if v == nil || c.Cursor.ReadPosition().Compare(v.horizon) > 0 {
			return nil, false, nil
		}
		rp := c.Cursor.ReadPosition()
		c.next, c.idxOf = &rp, -1
	}
	if v == nil || c.next.Compare(v.horizon) > 0 {
		c.leaveCompactedLocked(v)
		return nil, false, nil
	}
	if c.idxOf != v.ledgerID {
		if c.idx, err = c.searchLocked(ctx, v, *c.next); err != nil {
			return nil, true, err
		}
		c.idxOf = v.ledgerID
	}
	var size int64
	for c.idx <= v.last && len(out) < n && (len(out) == 0 || size < maxBytes) {
		e, err := readCompactedEntry(ctx, v, c.idx)
		if err != nil {
			if len(out) > 0 {
				// Hand out what was read (a read that fails is dropped
				// whole, and next has moved past these): the failed
				// entry is read again next time.
				return out, true, nil
			}
			return nil, true, err
		}
		c.idx++
		next := managedledger.Position{LedgerID: e.Position.LedgerID, EntryID: e.Position.EntryID + 1}
		c.next = &next
		if !c.acknowledged(e.Position) {
			out = append(out, e)
			size += int64(len(e.Data))
		}
	}
	if c.idx > v.last {
		c.leaveCompactedLocked(v)
		if len(out) == 0 {
			return nil, false, nil // read the topic now rather than answer nothing
		}
	}
	return out, true, nil
}

// IsAcknowledged also answers for positions before the first stored
// entry, which the cursor counts acknowledged (trimmed): there, by the
// stored compacted progress.
//
// The cursor is asked first and the first stored entry looked up after:
// a trim may run between the two, and trimming only moves the first
// stored entry forward, so a position still stored after the answer was
// stored when the cursor gave it. Looked up before, a trim in between
// made the cursor's "trimmed, so acknowledged" pass for a real
// acknowledgement, and the read skipped keys nobody had read.
func (c *compactedCursor) IsAcknowledged(pos managedledger.Position) bool {
	return c.acknowledged(pos)
}

func (c *compactedCursor) acknowledged(pos managedledger.Position) bool {
	if !c.Cursor.IsAcknowledged(pos) {
		return false
	}
	if !c.t.beforeFirstStored(pos) {
		return true
	}
	props := c.Cursor.Properties()
	l, ok := props[compactedReadLedgerKey]
	return ok && pos.Compare(managedledger.Position{LedgerID: l, EntryID: props[compactedReadEntryKey]}) <= 0
}

// leaveCompactedLocked moves reads to the topic, after the horizon.
func (c *compactedCursor) leaveCompactedLocked(v *compactedView) {
	c.next, c.idxOf = nil, -1
	if v != nil && c.Cursor.ReadPosition().Compare(v.horizon) <= 0 {
		c.Cursor.Seek(managedledger.Position{LedgerID: v.horizon.LedgerID, EntryID: v.horizon.EntryID + 1})
	}
}

// searchLocked finds the first compacted entry at or after pos by binary
// search (O(log n) entry reads).
func (c *compactedCursor) searchLocked(ctx context.Context, v *compactedView, pos managedledger.Position) (int64, error) {
	var failed error
	i := sort.Search(int(v.last+1), func(i int) bool {
		if failed != nil {
			return true
		}
		e, err := readCompactedEntry(ctx, v, int64(i))
		if err != nil {
			failed = err
			return true
		}
		return e.Position.Compare(pos) >= 0
	})
	return int64(i), failed
}

func readCompactedEntry(ctx context.Context, v *compactedView, i int64) (managedledger.Entry, error) {
	recs, err := v.reader.Read(ctx, i, i)
	if err != nil {
		return managedledger.Entry{}, fmt.Errorf("read compacted ledger %d entry %d: %w", v.ledgerID, i, err)
	}
	if len(recs) != 1 {
		return managedledger.Entry{}, fmt.Errorf("read compacted ledger %d entry %d: %d entries answered", v.ledgerID, i, len(recs))
	}
	e, err := decodeCompacted(recs[0])
	if err != nil {
		return managedledger.Entry{}, fmt.Errorf("compacted ledger %d entry %d: %w", v.ledgerID, i, err)
	}
	return e, nil
}

// readCompactedAt reads replayed positions: those at or before the
// horizon from the compacted ledger (left out when compaction dropped
// them), the rest from the topic.
func (c *compactedCursor) readCompactedAt(ctx context.Context, positions []managedledger.Position) ([]managedledger.Entry, error) {
	v, err := c.t.compactedView(ctx)
	if err != nil {
		return nil, err
	}
	var old, recent []managedledger.Position
	for _, p := range positions {
		if v != nil && p.Compare(v.horizon) <= 0 {
			old = append(old, p)
		} else {
			recent = append(recent, p)
		}
	}
	var out []managedledger.Entry
	for _, p := range old {
		i, err := c.searchLocked(ctx, v, p)
		if err != nil {
			return nil, err
		}
		if i > v.last {
			continue
		}
		e, err := readCompactedEntry(ctx, v, i)
		if err != nil {
			return nil, err
		}
		if e.Position == p {
			out = append(out, e)
		}
	}
	rest, err := c.t.ml.ReadEntriesAt(ctx, recent)
	return append(out, rest...), err
}
