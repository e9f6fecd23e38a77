package managedledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// Cursor persistence. A durable cursor has a metadata node (cursorNode)
// under its managed ledger's node and a cursor ledger of snapshots
// (cursorSnapshot, JSON, one per entry). Its state is written at most
// MarkDeleteRate times a second, and when the managed ledger closes; on
// open, the last snapshot of the cursor ledger wins over the node's
// mark-delete position (which is written when the ledger changes). A
// close that cannot reach the cursor ledger in time writes the whole state
// to the node, with no cursor ledger (persistClosing).
// After recovery a cursor writes to a new cursor ledger and deletes the
// old one once the node points at the new one.

// maxSnapshotsPerLedger rolls a cursor ledger over.
const maxSnapshotsPerLedger = 10000

// maxPersistedRanges bounds the individually acknowledged ranges a
// snapshot keeps (managedLedgerMaxUnackedRangesToPersist).
const maxPersistedRanges = 10000

type cursorNode struct {
	CursorLedger int64    `json:"cursorsLedgerId"`
	MarkDelete   Position `json:"markDeletePosition"`
	LastActive   int64    `json:"lastActive"`
	// The rest of a cursor's state is in the node only when CursorLedger
	// is -1 because a close could not reach the cursor ledger
	// (persistToNodes); otherwise the ledger's last snapshot holds it.
	Acked      [][2]Position    `json:"individualDeletedMessages,omitempty"`
	Batch      []batchSnapshot  `json:"batchedEntryDeletionIndexInfo,omitempty"`
	Properties map[string]int64 `json:"properties,omitempty"`
}

// snapshot is the cursor state a node holds by itself.
func (n cursorNode) snapshot() cursorSnapshot {
	return cursorSnapshot{MarkDelete: n.MarkDelete, Acked: n.Acked, Batch: n.Batch, Properties: n.Properties}
}

// maxNodeRanges and maxNodeBatchWords bound the acknowledged ranges and
// batch words a cursor's node takes when its state goes there
// (managedLedgerMaxUnackedRangesToPersistInMetadataStore): a metadata
// node is kept small. What is left out is redelivered, never lost.
const (
	maxNodeRanges     = 1000
	maxNodeBatchWords = 1 << 12
)

// maxPersistedBatchSets and maxPersistedBatchWords bound the partly
// acknowledged batch entries a snapshot keeps
// (managedLedgerMaxBatchDeletedIndexToPersist), and their words in all,
// so a snapshot stays far below the largest entry a ledger takes (a set
// may hold up to maxAckSetWords).
const (
	maxPersistedBatchSets  = 10000
	maxPersistedBatchWords = 1 << 16
)

type cursorSnapshot struct {
	MarkDelete Position      `json:"markDelete"`
	Acked      [][2]Position `json:"individuallyDeleted,omitempty"`
	// Batch is absent from snapshots written before batch-index acks.
	Batch []batchSnapshot `json:"batchDeletedIndexes,omitempty"`
	// Properties (properties.go) are absent when never set.
	Properties map[string]int64 `json:"properties,omitempty"`
}

// batchSnapshot is one partly acknowledged batch entry: its position and
// the bits of its messages still unacknowledged.
type batchSnapshot struct {
	LedgerID int64    `json:"ledgerId"`
	EntryID  int64    `json:"entryId"`
	AckSet   []uint64 `json:"ackSet"`
}

// cursorPath is a cursor's node: its name escaped as one segment, so any
// subscription name ('/', '%', dots) is one node under its ledger's.
func cursorPath(ml, cursor string) string { return mlPath(ml) + "/" + metadata.EscapeSegment(cursor) }

// snapshotLocked captures the cursor's state as positions.
func (c *bkCursor) snapshotLocked() cursorSnapshot {
	ml := c.ml
	s := cursorSnapshot{MarkDelete: ml.positionLocked(max(c.markDelete, ml.baseLocked()-1))}
	for _, r := range c.acked {
		if len(s.Acked) == maxPersistedRanges {
			break // the rest are redelivered after a restart, never lost
		}
		s.Acked = append(s.Acked, [2]Position{ml.positionLocked(r.lo), ml.positionLocked(r.hi)})
	}
	s.Batch = c.batchSnapshotLocked()
	s.Properties = maps.Clone(c.props)
	return s
}

// batchSnapshotLocked lists the first batch sets, within the bounds (the
// messages of those left out are redelivered after a restart).
func (c *bkCursor) batchSnapshotLocked() []batchSnapshot {
	var out []batchSnapshot
	words := 0
	for _, b := range c.batch {
		if len(out) == maxPersistedBatchSets || words+len(b.bits) > maxPersistedBatchWords {
			break // the rest are redelivered after a restart, never lost
		}
		p := c.ml.positionLocked(b.index)
		out = append(out, batchSnapshot{LedgerID: p.LedgerID, EntryID: p.EntryID, AckSet: slices.Clone(b.bits)})
		words += len(b.bits)
	}
	return out
}

// restoreLocked sets the cursor's state from a snapshot.
func (c *bkCursor) restoreLocked(s cursorSnapshot) {
	ml := c.ml
	c.markDelete = max(ml.markDeleteIndexLocked(s.MarkDelete), ml.baseLocked()-1)
	c.acked, c.batch = nil, nil
	for _, r := range s.Acked {
		// One range at a time: one index at a time made reopening a cursor
		// with large acknowledged ranges take minutes, under mu.
		c.addAckedRange(ml.indexAtOrAfterLocked(r[0]), ml.markDeleteIndexLocked(r[1]))
	}
	c.normalise()
	c.restoreBatchLocked(s.Batch)
	c.props = s.Properties
	c.read = c.markDelete + 1
}

// restoreBatchLocked restores the batch sets of a snapshot (after its
// acknowledged ranges): sets of entries acknowledged or gone are dropped.
// A set that is too large or has no bit was never written (a snapshot
// never holds a fully acknowledged entry's set): it is left out, so its
// messages are redelivered rather than lost.
func (c *bkCursor) restoreBatchLocked(sets []batchSnapshot) {
	for _, b := range sets {
		i, ok := c.ml.indexAtLocked(Position{b.LedgerID, b.EntryID})
		if !ok || c.isAcked(i) || checkAckSet(b.AckSet) != nil || len(trimZeroWords(b.AckSet)) == 0 {
			continue
		}
		c.andAckSet(i, b.AckSet)
	}
}

func (ml *bkLedger) OpenCursor(ctx context.Context, name string, opts CursorOptions) (Cursor, error) {
	// metaMu orders the create with trims: a trim in flight (it holds
	// metaMu from choosing the ledgers to deleting them from the list)
	// does not know this cursor, so its start is taken after the trim,
	// never in a ledger the trim is removing.
	ml.metaMu.Lock()
	defer ml.metaMu.Unlock()
	ml.mu.Lock()
	if err := ml.openErrorLocked(); err != nil {
		ml.mu.Unlock()
		return nil, fmt.Errorf("%s: open cursor %s: %w", ml.name, name, err)
	}
	if c, ok := ml.mu.cursors[name]; ok {
		ml.mu.Unlock()
		return c, nil
	}
	start := ml.endLocked()
	if opts.Initial == Earliest {
		start = ml.baseLocked() // the first stored entry (Pulsar #11547 started at the end)
	}
	md := ml.positionLocked(start - 1)
	ml.mu.Unlock()
	b, _ := json.Marshal(cursorNode{CursorLedger: -1, MarkDelete: md, LastActive: time.Now().UnixMilli()})
	_, st, err := ml.cfg.Store.Create(ctx, cursorPath(ml.name, name), b, metadata.CreateOptions{})
	if errors.Is(err, metadata.ErrExists) {
		// Left by a delete whose node delete failed (the caller was told):
		// the cursor still exists, so it is opened as it was stored, as a
		// reload would. Taken with version 0 instead, its first persist
		// failed its CAS and the managed ledger closed itself as fenced.
		return ml.adoptCursor(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: create cursor %s: %w", ml.name, name, err)
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if c, ok := ml.mu.cursors[name]; ok {
		return c, nil
	}
	c := &bkCursor{ml: ml, name: name, durable: true, ackState: ackState{markDelete: start - 1, read: start}, dirty: true}
	c.nodeVersion = st.Version
	ml.mu.cursors[name] = c
	ml.schedulePersistLocked()
	return c, nil
}

// adoptCursor opens a cursor whose node exists though this owner does not
// know the cursor: it is recovered from the node (claimed at its version)
// and its last snapshot.
func (ml *bkLedger) adoptCursor(ctx context.Context, name string) (Cursor, error) {
	if err := ml.recoverCursor(ctx, name); err != nil {
		return nil, fmt.Errorf("%s: open cursor %s: its node exists: %w", ml.name, name, err)
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.mu.cursors[name], nil
}

func (ml *bkLedger) openErrorLocked() error {
	switch {
	case ml.mu.closed:
		return ErrClosed
	case ml.mu.fenced != nil:
		return fmt.Errorf("%w: %v", ErrClosed, ml.mu.fenced)
	}
	return nil
}

func (ml *bkLedger) NewNonDurableCursor(start Position) (Cursor, error) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if err := ml.openErrorLocked(); err != nil {
		return nil, fmt.Errorf("%s: reader: %w", ml.name, err)
	}
	i, ok := ml.indexAtLocked(start)
	if ok {
		i++ // start is exclusive
	}
	i = max(i, ml.baseLocked())
	c := &bkCursor{ml: ml, name: "reader", ackState: ackState{markDelete: i - 1, read: i}}
	ml.mu.nonDurable[c] = struct{}{}
	return c, nil
}

func (ml *bkLedger) DeleteCursor(ctx context.Context, name string) error {
	ml.mu.Lock()
	c, ok := ml.mu.cursors[name]
	var waiter func([]Entry, error)
	if ok {
		c.closed = true
		waiter, c.waiter = c.waiter, nil
		delete(ml.mu.cursors, name)
		ml.schedulePersistLocked() // without it, ledgers may be trimmable now
	}
	ml.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: delete cursor %s: %w", ml.name, name, ErrCursorNotFound)
	}
	if waiter != nil { // a waiting read ends, as on Close
		waiter(nil, fmt.Errorf("%s: cursor %s deleted: %w", ml.name, name, ErrCursorNotFound))
	}
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	if err := ml.cfg.Store.Delete(ctx, cursorPath(ml.name, name), -1); err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("%s: delete cursor %s: %w", ml.name, name, err)
	}
	c.dropLedgersLocked(ctx)
	return nil
}

// dropLedgersLocked closes and deletes the cursor's ledgers (persistMu held).
func (c *bkCursor) dropLedgersLocked(ctx context.Context) {
	ids := []int64{c.oldLedger}
	if c.cursorLedger != nil {
		_ = c.cursorLedger.Close(ctx)
		ids = append(ids, c.cursorLedger.ID())
		c.cursorLedger = nil
	}
	for _, id := range ids {
		if id > 0 {
			if err := c.ml.cfg.Ledgers.Delete(ctx, id); err != nil && !errors.Is(err, ledger.ErrNoSuchLedger) {
				c.ml.f.log.Warn("managed ledger could not delete a cursor ledger", "managed_ledger", c.ml.name, "cursor", c.name, "ledger", id, "err", err)
			}
		}
	}
	c.oldLedger = 0
}

func (ml *bkLedger) Cursors() []Cursor {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	out := make([]Cursor, 0, len(ml.mu.cursors)+len(ml.mu.nonDurable))
	for _, c := range ml.allCursorsLocked() {
		out = append(out, c)
	}
	return out
}

// recoverCursorsAtOnce bounds how many cursors an open recovers side by
// side: each recovery is a few metadata and bookie round trips.
const recoverCursorsAtOnce = 16

// recoverCursors opens every durable cursor stored for the ledger, side
// by side (as Pulsar's managed ledger initialises its cursors): the open
// a producer waits for after a failover took the sum of its cursors'
// recoveries. The first error is returned once every recovery ended.
func (ml *bkLedger) recoverCursors(ctx context.Context) error {
	nodes, err := ml.cfg.Store.Children(ctx, mlPath(ml.name))
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("%s: list cursors: %w", ml.name, err)
	}
	names := make([]string, 0, len(nodes))
	for _, node := range nodes {
		name, err := metadata.UnescapeSegment(node)
		if err != nil {
			return fmt.Errorf("%s: cursor node: %w", ml.name, err)
		}
		names = append(names, name)
	}
	var g errgroup.Group
	g.SetLimit(recoverCursorsAtOnce)
	for _, name := range names {
		g.Go(func() error { return ml.recoverCursor(ctx, name) })
	}
	return g.Wait()
}

func (ml *bkLedger) recoverCursor(ctx context.Context, name string) error {
	node, version, err := ml.claimCursorNode(ctx, name)
	if err != nil {
		return err
	}
	snap := node.snapshot()
	if node.CursorLedger > 0 {
		if s, ok, err := ml.lastSnapshot(ctx, node.CursorLedger); err != nil {
			return fmt.Errorf("%s: recover cursor %s from ledger %d: %w", ml.name, name, node.CursorLedger, err)
		} else if ok {
			snap = s
		}
	}
	c := &bkCursor{ml: ml, name: name, durable: true, nodeVersion: version, oldLedger: max(node.CursorLedger, 0)}
	ml.mu.Lock()
	c.restoreLocked(snap)
	c.dirty = true // written to a new cursor ledger at the next persist
	ml.mu.cursors[name] = c
	ml.schedulePersistLocked()
	ml.mu.Unlock()
	return nil
}

// maxCursorClaims bounds claimCursorNode's retries: each one follows a
// write by the previous owner, which stops after its first failed CAS.
const maxCursorClaims = 5

// claimCursorNode reads a cursor's node and writes it back unchanged at
// the version read, so its version moves before this owner recovers from
// it. A previous owner may have passed checkOwner just before this owner
// wrote the managed ledger's node, and be about to point the cursor's node
// at a new cursor ledger: its CAS now fails and it stops (lostOwnership).
// Without the claim that late write won, and this owner fenced itself at
// its first cursor write (its version was gone). A write of the previous
// owner that lands between the read and the claim is read on the retry;
// appends to a cursor ledger need no claim (recovery fences the ledger).
func (ml *bkLedger) claimCursorNode(ctx context.Context, name string) (cursorNode, int64, error) {
	path := cursorPath(ml.name, name)
	for range maxCursorClaims {
		b, st, err := ml.cfg.Store.Get(ctx, path)
		if err != nil {
			return cursorNode{}, 0, fmt.Errorf("%s: read cursor %s: %w", ml.name, name, err)
		}
		var node cursorNode
		if err := json.Unmarshal(b, &node); err != nil {
			return cursorNode{}, 0, fmt.Errorf("%s: cursor %s metadata is not valid JSON: %w", ml.name, name, err)
		}
		st, err = ml.cfg.Store.Put(ctx, path, b, st.Version)
		if err == nil {
			return node, st.Version, nil
		}
		if !errors.Is(err, metadata.ErrBadVersion) {
			return cursorNode{}, 0, fmt.Errorf("%s: claim cursor %s: %w", ml.name, name, err)
		}
	}
	return cursorNode{}, 0, fmt.Errorf("%s: cursor %s changed %d times while this owner recovered it: %w", ml.name, name, maxCursorClaims, ledger.ErrFenced)
}

// lastSnapshot recovers a cursor ledger and decodes its last entry.
func (ml *bkLedger) lastSnapshot(ctx context.Context, id int64) (cursorSnapshot, bool, error) {
	r, err := ml.cfg.Ledgers.OpenRecover(ctx, id, ml.cfg.Password)
	if errors.Is(err, ledger.ErrNoSuchLedger) {
		return cursorSnapshot{}, false, nil
	}
	if err != nil {
		return cursorSnapshot{}, false, err
	}
	last := r.Metadata().LastEntryID
	if last < 0 {
		return cursorSnapshot{}, false, nil
	}
	es, err := r.Read(ctx, last, last)
	if err != nil {
		return cursorSnapshot{}, false, err
	}
	var s cursorSnapshot
	if err := json.Unmarshal(es[0].Payload, &s); err != nil {
		return cursorSnapshot{}, false, fmt.Errorf("snapshot %d: %w", last, err)
	}
	return s, true, nil
}

// persistCursor writes the cursor's state if it changed.
func (ml *bkLedger) persistCursor(ctx context.Context, c *bkCursor) error {
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	ml.mu.Lock()
	if !c.dirty || c.closed || ml.mu.fenced != nil {
		ml.mu.Unlock()
		return nil
	}
	snap := c.snapshotLocked()
	c.dirty = false
	ml.mu.Unlock()
	err := ml.writeSnapshot(ctx, c, snap)
	if err != nil {
		ml.mu.Lock()
		c.dirty = true
		ml.mu.Unlock()
	}
	return err
}

// writeSnapshot appends snap to the cursor ledger, starting a new one
// (and pointing the cursor's node at it) when needed. persistMu is held.
func (ml *bkLedger) writeSnapshot(ctx context.Context, c *bkCursor, snap cursorSnapshot) error {
	data, _ := json.Marshal(snap)
	if c.cursorLedger != nil && c.snapshots < maxSnapshotsPerLedger {
		_, err := c.cursorLedger.Append(ctx, data)
		if err == nil {
			c.snapshots++
			return nil
		}
		if errors.Is(err, ledger.ErrFenced) {
			// Another owner opened the managed ledger and recovered this
			// cursor: pointing the node at a new cursor ledger now would
			// overwrite its state and make it fence itself.
			return ml.lostOwnership(fmt.Errorf("%s: cursor %s: cursor ledger %d fenced: %w", ml.name, c.name, c.cursorLedger.ID(), err))
		}
		// Write failed: continue in a new cursor ledger.
	}
	opts, err := ml.cfg.ledgerOptions(ctx, ml.name,
		map[string][]byte{"pulsar/managed-ledger": []byte(ml.name), "pulsar/cursor": []byte(c.name)})
	var w *ledger.WriteHandle
	if err == nil {
		w, err = ml.cfg.Ledgers.Create(ctx, opts)
	}
	if err != nil {
		return fmt.Errorf("%s: cursor %s: create cursor ledger: %w", ml.name, c.name, err)
	}
	if _, err := w.Append(ctx, data); err != nil {
		_ = w.Close(ctx)
		_ = ml.cfg.Ledgers.Delete(ctx, w.ID())
		return fmt.Errorf("%s: cursor %s: write snapshot: %w", ml.name, c.name, err)
	}
	if err := ml.checkOwner(ctx); err != nil {
		_ = w.Close(ctx)
		_ = ml.cfg.Ledgers.Delete(ctx, w.ID())
		return err
	}
	b, _ := json.Marshal(cursorNode{CursorLedger: w.ID(), MarkDelete: snap.MarkDelete, LastActive: time.Now().UnixMilli()})
	path := cursorPath(ml.name, c.name)
	st, err := ml.cfg.Store.Put(ctx, path, b, c.nodeVersion)
	if uncertain(err) {
		// The answer was lost, not the write (see writeMetadata): if it
		// landed, the node names w, which must not be deleted.
		v, landed, rerr := ml.landed(path, b, c.nodeVersion)
		switch {
		case rerr != nil:
			_ = w.Close(ctx) // kept: the node may name it
			return fmt.Errorf("%s: cursor %s: point at ledger %d: %w (and then: %w)", ml.name, c.name, w.ID(), err, rerr)
		case landed:
			st, err = metadata.Stat{Version: v}, nil
		}
	}
	if err != nil {
		_ = w.Close(ctx)
		_ = ml.cfg.Ledgers.Delete(ctx, w.ID())
		if lost := ml.cursorNodeLost(c, err); lost != nil {
			return lost
		}
		return fmt.Errorf("%s: cursor %s: point at ledger %d: %w", ml.name, c.name, w.ID(), err)
	}
	old := c.cursorLedger
	c.cursorLedger, c.snapshots, c.nodeVersion = w, 1, st.Version
	if old != nil {
		_ = old.Close(ctx)
		c.oldLedger = old.ID()
	}
	ml.deleteOldCursorLedger(ctx, c)
	return nil
}

// deleteOldCursorLedger deletes the cursor ledger c's node no longer
// names; a failure leaves it for the next persist. persistMu is held.
func (ml *bkLedger) deleteOldCursorLedger(ctx context.Context, c *bkCursor) {
	if c.oldLedger <= 0 {
		return
	}
	if err := ml.cfg.Ledgers.Delete(ctx, c.oldLedger); err != nil && !errors.Is(err, ledger.ErrNoSuchLedger) {
		ml.f.log.Warn("managed ledger could not delete an old cursor ledger", "managed_ledger", ml.name, "cursor", c.name, "ledger", c.oldLedger, "err", err)
		return
	}
	c.oldLedger = 0
}

// cursorNodeLost turns a version conflict or a missing node on a cursor
// node write into this owner's loss of the managed ledger; nil for any
// other error.
func (ml *bkLedger) cursorNodeLost(c *bkCursor, err error) error {
	if errors.Is(err, metadata.ErrBadVersion) || errors.Is(err, metadata.ErrNotFound) {
		return ml.lostOwnership(fmt.Errorf("%s: cursor %s changed or deleted under this owner: %w", ml.name, c.name, ledger.ErrFenced))
	}
	return nil
}

// checkOwner fails (and fences the ledger) if the managed ledger's node
// is no longer at this owner's version. A new owner writes that node
// before it recovers the cursors, so a cursor's node must not be pointed
// at a new cursor ledger after it: the new owner read the cursor's node
// at the version this one would replace, and would fence itself. The
// check and the cursor node's CAS are two calls: a new owner can take over
// between them, so it claims each cursor node (claimCursorNode), and the
// CAS then fails here.
func (ml *bkLedger) checkOwner(ctx context.Context) error {
	ml.metaMu.Lock() // no write of our own in flight: the versions compare
	defer ml.metaMu.Unlock()
	ml.mu.Lock()
	mine := ml.mu.version
	ml.mu.Unlock()
	if v, landed, err := ml.resolveLostWrite(mine); err != nil {
		return err
	} else if landed {
		ml.mu.Lock()
		ml.mu.version = v // our own write, whose answer was lost, moved the node on
		ml.mu.Unlock()
	}
	_, st, err := ml.cfg.Store.Get(ctx, mlPath(ml.name))
	if err != nil {
		return fmt.Errorf("%s: read metadata: %w", ml.name, err)
	}
	ml.mu.Lock()
	mine = ml.mu.version
	ml.mu.Unlock()
	if st.Version != mine {
		return ml.lostOwnership(fmt.Errorf("%s: metadata at version %d, this owner wrote %d: %w", ml.name, st.Version, mine, ledger.ErrFenced))
	}
	return nil
}

// The persister runs only when there is work (a broker may hold
// thousands of idle topics): a cursor change or a rollover arms a timer
// at the mark-delete rate, and its tick persists changed cursors and
// trims consumed ledgers, re-arming while a cursor is still unsaved.

func (ml *bkLedger) persistInterval() time.Duration {
	return time.Duration(float64(time.Second) / ml.cfg.MarkDeleteRate)
}

// schedulePersistLocked arms the persist timer unless it is armed, the
// ledger closed, or its cursors are still being recovered (the open arms
// it once they are).
func (ml *bkLedger) schedulePersistLocked() {
	if ml.mu.persistTimer != nil || ml.mu.closed || !ml.mu.recovered {
		return
	}
	ml.mu.persistTimer = time.AfterFunc(ml.persistInterval(), ml.persistTick)
}

func (ml *bkLedger) persistTick() {
	ml.mu.Lock()
	ml.mu.persistTimer = nil
	if ml.mu.closed {
		ml.mu.Unlock()
		return
	}
	ml.persistWG.Add(1) // under mu while open: Close waits for it
	ml.mu.Unlock()
	defer ml.persistWG.Done()
	ctx, cancel := context.WithTimeout(ml.persistCtx, time.Minute)
	defer cancel()
	ml.persistAll(ctx)
	if err := ml.trim(ctx); err != nil {
		ml.f.log.Warn("managed ledger trim failed; retrying", "managed_ledger", ml.name, "err", err)
		ml.mu.Lock()
		ml.schedulePersistLocked()
		ml.mu.Unlock()
		return
	}
	ml.mu.Lock()
	for _, c := range ml.mu.cursors {
		if c.dirty {
			ml.schedulePersistLocked()
			break
		}
	}
	ml.mu.Unlock()
}

func (ml *bkLedger) persistAll(ctx context.Context) error {
	ml.mu.Lock()
	if ml.mu.fenced != nil {
		ml.mu.Unlock()
		return nil // another owner has the cursors now
	}
	var cs []*bkCursor
	for _, c := range ml.mu.cursors {
		cs = append(cs, c)
	}
	ml.mu.Unlock()
	return eachCursor(cs, func(c *bkCursor) error {
		err := ml.persistCursor(ctx, c)
		if err != nil {
			ml.f.log.Warn("managed ledger could not persist a cursor; retrying", "managed_ledger", ml.name, "cursor", c.name, "err", err)
		}
		return err
	})
}

// persistCursorsAtOnce bounds the cursors of one managed ledger persisted
// side by side: one after another, a topic with many subscriptions took
// their round trips in turn, and a close on a silent bookie gave the
// whole of CloseTimeout to the first.
const persistCursorsAtOnce = 16

// eachCursor runs fn for every cursor, persistCursorsAtOnce at a time,
// and joins their errors.
func eachCursor(cs []*bkCursor, fn func(*bkCursor) error) error {
	var (
		g    errgroup.Group
		mu   sync.Mutex
		errs []error
	)
	g.SetLimit(persistCursorsAtOnce)
	for _, c := range cs {
		g.Go(func() error {
			if err := fn(c); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// persistClosing persists every cursor as the managed ledger closes: in
// its cursor ledger if that answers within a quarter of CloseTimeout,
// else in its metadata node (persistToNodes), so that a silent bookie
// costs a close neither the whole of CloseTimeout nor the cursors'
// positions.
func (ml *bkLedger) persistClosing(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, ml.cfg.CloseTimeout/4)
	err := ml.persistAll(lctx)
	cancel()
	if err == nil || ctx.Err() != nil {
		return err
	}
	if nerr := ml.persistToNodes(ctx); nerr != nil {
		return errors.Join(err, nerr)
	}
	ml.f.log.Warn("cursors written to their metadata nodes: their cursor ledgers did not answer in time",
		"managed_ledger", ml.name, "waited", ml.cfg.CloseTimeout/4, "err", err)
	return nil
}

// persistToNodes writes the state of every cursor still dirty to its
// metadata node, with no cursor ledger (CursorLedger -1), as Pulsar's
// cursor persists its position to the metadata store when it closes.
func (ml *bkLedger) persistToNodes(ctx context.Context) error {
	ml.mu.Lock()
	if ml.mu.fenced != nil {
		ml.mu.Unlock()
		return nil // another owner has the cursors now
	}
	cs := ml.allCursorsLocked()
	ml.mu.Unlock()
	return eachCursor(cs, func(c *bkCursor) error { return ml.persistToNode(ctx, c) })
}

// persistToNode writes c's state to its node at the node's version and
// drops its cursor ledger: closed at once (an append a silent bookie
// holds fails now) and deleted, since the node no longer names it.
func (ml *bkLedger) persistToNode(ctx context.Context, c *bkCursor) error {
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	ml.mu.Lock()
	if !c.dirty || c.closed || !c.durable || ml.mu.fenced != nil {
		ml.mu.Unlock()
		return nil
	}
	snap := c.snapshotLocked()
	c.dirty = false
	ml.mu.Unlock()
	node := cursorNode{CursorLedger: -1, MarkDelete: snap.MarkDelete, LastActive: time.Now().UnixMilli(),
		Acked: snap.Acked[:min(len(snap.Acked), maxNodeRanges)], Batch: boundBatch(snap.Batch, maxNodeBatchWords),
		Properties: snap.Properties}
	b, _ := json.Marshal(node)
	st, err := ml.cfg.Store.Put(ctx, cursorPath(ml.name, c.name), b, c.nodeVersion)
	if err != nil {
		ml.mu.Lock()
		c.dirty = true
		ml.mu.Unlock()
		if lost := ml.cursorNodeLost(c, err); lost != nil {
			return lost
		}
		return fmt.Errorf("%s: cursor %s: write its state to its node: %w", ml.name, c.name, err)
	}
	c.nodeVersion = st.Version
	if old := c.cursorLedger; old != nil {
		c.cursorLedger, c.snapshots = nil, 0
		abandoned, cancel := context.WithCancel(ctx)
		cancel()
		_ = old.Close(abandoned)
		c.oldLedger = old.ID()
	}
	ml.deleteOldCursorLedger(ctx, c)
	return nil
}

// boundBatch keeps the first batch sets of at most words words in all.
func boundBatch(sets []batchSnapshot, words int) []batchSnapshot {
	n := 0
	for i, b := range sets {
		if n+len(b.AckSet) > words {
			return sets[:i]
		}
		n += len(b.AckSet)
	}
	return sets
}

// SetRetention implements ManagedLedger.
func (ml *bkLedger) SetRetention(r Retention) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	ml.mu.retention = r
	ml.schedulePersistLocked() // persists (nothing, when clean), then trims
}

// trim deletes ledgers every durable cursor has consumed, beyond
// retention. The current ledger is never trimmed. With no durable cursor
// every closed ledger counts as consumed: as in Pulsar, a topic without
// subscriptions keeps only what retention asks for (and the current
// ledger), so it does not grow without bound.
func (ml *bkLedger) trim(ctx context.Context) error {
	gone, err := ml.trimMetadata(ctx)
	for _, l := range gone {
		ml.mu.Lock()
		r := l.offReader
		l.offReader = nil
		ml.mu.Unlock()
		if r != nil {
			_ = r.Close()
		}
		if err := ml.f.deleteLedgerCopies(ctx, ml.name, l.meta); err != nil {
			ml.f.log.Warn("managed ledger could not delete a consumed ledger", "managed_ledger", ml.name, "ledger", l.meta.ID, "err", err)
		}
	}
	return err
}

// trimMetadata drops the ledgers to trim from the list (metadata first)
// and returns them.
func (ml *bkLedger) trimMetadata(ctx context.Context) ([]*ledgerInfo, error) {
	ml.metaMu.Lock() // no rollover or terminate writes the node meanwhile
	defer ml.metaMu.Unlock()
	ml.mu.Lock()
	// Only by every cursor (recovered), and never once closed: a closed or
	// abandoned instance may not know a cursor a new owner created.
	if ml.mu.rolling || !ml.mu.recovered || ml.mu.closed || ml.mu.fenced != nil {
		ml.mu.Unlock()
		return nil, nil
	}
	slowest := ml.endLocked()
	for _, c := range ml.mu.cursors {
		slowest = min(slowest, c.markDelete+1)
	}
	cut := 0
	var retained int64
	for _, l := range ml.mu.ledgers {
		retained += l.meta.Size
	}
	now := time.Now()
	for cut < len(ml.mu.ledgers)-1 {
		l := ml.mu.ledgers[cut]
		consumed := l.first+l.meta.Entries <= slowest
		if !consumed || !ml.mu.retention.expired(now, l.meta.Timestamp, retained) {
			break
		}
		retained -= l.meta.Size
		cut++
	}
	if cut == 0 {
		ml.mu.Unlock()
		return nil, nil
	}
	gone := ml.mu.ledgers[:cut]
	kept := ml.mu.ledgers[cut:]
	md, version := ml.metadataLocked(kept), ml.mu.version
	ml.mu.Unlock()
	v, err := ml.writeMetadata(ctx, md, version)
	if err != nil {
		return nil, err
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	last := gone[len(gone)-1]
	ml.mu.lastTrim = Position{last.meta.ID, last.meta.Entries - 1}
	ml.mu.version = v
	ml.mu.ledgers = append([]*ledgerInfo(nil), ml.mu.ledgers[cut:]...)
	for c := range ml.mu.nonDurable {
		c.read = max(c.read, ml.baseLocked())
		c.markDelete = max(c.markDelete, ml.baseLocked()-1)
		c.dropBatchThrough(c.markDelete)
	}
	return gone, nil
}

// Close stops the ledger: waiting reads fail, cursors are persisted, the
// current ledger is closed. Its storage work is bounded by CloseTimeout
// (see Config): past it, what is still pending fails and the ledgers are
// left for the next owner's recovery.
func (ml *bkLedger) Close(ctx context.Context) error {
	done, ok := ml.f.closing(ml) // sets closed
	if !ok {
		return nil
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, ml.cfg.CloseTimeout)
	defer cancel()
	ml.mu.Lock()
	var woken []func()
	for _, c := range ml.allCursorsLocked() {
		if cb := c.waiter; cb != nil {
			c.waiter = nil
			woken = append(woken, func() { cb(nil, fmt.Errorf("%s: read: %w", ml.name, ErrClosed)) })
		}
	}
	var rolled chan struct{}
	if ml.mu.rolling {
		rolled = ml.mu.rollDone
	}
	ml.mu.Unlock()
	for _, wake := range woken {
		wake()
	}
	ml.mu.Lock()
	if t := ml.mu.persistTimer; t != nil {
		t.Stop()
		ml.mu.persistTimer = nil
	}
	ml.mu.Unlock()
	ml.stopPersist()    // a tick in flight gives up: its cursors are persisted below
	ml.persistWG.Wait() // and returns (its storage calls end with their context)
	err := ml.persistClosing(ctx)
	ml.mu.Lock()
	cs := ml.allCursorsLocked()
	ml.mu.Unlock()
	for _, c := range cs {
		c.persistMu.Lock()
		if c.cursorLedger != nil {
			_ = c.cursorLedger.Close(ctx)
		}
		c.persistMu.Unlock()
	}
	if rolled != nil { // the writer it started (if any) is the one to close
		select {
		case <-rolled:
		case <-ctx.Done():
		}
	}
	ml.mu.Lock()
	w := ml.mu.writer
	ml.mu.Unlock()
	if w != nil {
		if werr := w.Close(ctx); werr != nil && err == nil && !errors.Is(werr, ledger.ErrClosed) {
			err = werr
		}
		<-w.Delivered()
	}
	if ctx.Err() != nil {
		ml.f.log.Warn("managed ledger closed without waiting longer for its storage; the next owner recovers its ledgers",
			"managed_ledger", ml.name, "waited", ml.cfg.CloseTimeout, "err", err)
	}
	return err
}
