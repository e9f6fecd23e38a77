package broker

// The transaction buffer of a topic (Pulsar's TopicTransactionBuffer).
//
// Behaviour:
//   - A message sent in a transaction is stored in the topic's ledgers
//     like any other, its metadata carrying the transaction id (set here
//     when the client left it out, as the Go client does: recovery reads
//     it back). The transaction is ongoing from before its first add
//     until its commit or abort marker (an entry with marker_type 20 or
//     21 and the id) is stored.
//   - While any transaction is ongoing, subscriptions and readers read no
//     further than the max read position: the entry before the first
//     entry of the oldest ongoing transaction (frozen at the last entry
//     when a transaction starts, while its first add is in flight). So no
//     consumer sees a message of an open transaction, nor anything after
//     it, as Pulsar. With none ongoing there is no limit.
//   - Aborted transactions are kept (with the ledger of their marker):
//     dispatch drops their messages and acknowledges them as it does
//     markers; committed ones need nothing.
//   - The state is snapshotted in the managed ledger's property
//     txnBufferProperty (the position up to which it holds, ongoing and
//     aborted transactions) after transactionBufferSnapshotMaxTransactionCount
//     ends or transactionBufferSnapshotMinTimeInMillis, and when the topic
//     closes; a topic that loads with the property replays only the
//     entries after that position. A topic without it never had a
//     transaction: the first transactional SEND writes it before the
//     message is stored, so a crash cannot leave a transactional message
//     that a reload would take for a plain one.
//
// Lock rules: txnBuffer.mu guards every field below it; it is taken in
// add callbacks (which run in append order, so state follows the
// ledger's order) and never held while calling the managed ledger.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/broker/txn"
	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/markers"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// Transaction marker types (Pulsar's MarkerType).
const (
	markerTxnCommit markers.Type = 20
	markerTxnAbort  markers.Type = 21
)

// txnBufferProperty names the managed-ledger property holding the
// transaction buffer's snapshot.
const txnBufferProperty = "txnBuffer"

// txnMarkerProducer is the producer name of transaction markers.
const txnMarkerProducer = "pulsar.txn.marker"

// recentlyEnded is how many ended transactions a buffer remembers, to
// refuse a SEND of a transaction that already ended.
const recentlyEnded = 4096

type txnBuffer struct {
	t *topic

	mu      sync.Mutex
	ongoing map[txn.ID]*ongoingTxn
	aborted map[txn.ID]int64 // → ledger of its abort marker
	ended   map[txn.ID]bool
	endedQ  []txn.ID // ended, oldest first (bounded by recentlyEnded)
	capped  bool
	maxRead managedledger.Position
	// applied is the last transactional entry or marker whose add called
	// back: the state holds up to it.
	applied managedledger.Position
	// unsaved counts ends since the last snapshot; saving: one runs.
	unsaved   int
	savedAt   time.Time
	saving    bool
	committed int64
	abortedN  int64
}

type ongoingTxn struct {
	first   managedledger.Position
	known   bool // first is set (an add called back)
	pending int  // adds in flight
}

func newTxnBuffer(t *topic) *txnBuffer {
	return &txnBuffer{t: t, ongoing: map[txn.ID]*ongoingTxn{}, aborted: map[txn.ID]int64{}, ended: map[txn.ID]bool{},
		savedAt: time.Now()}
}

// txnSnapshot is txnBufferProperty's JSON.
type txnSnapshot struct {
	UpTo    managedledger.Position `json:"upTo"`
	Ongoing []snapshotTxn          `json:"ongoing,omitempty"`
	Aborted []snapshotTxn          `json:"aborted,omitempty"`
}

type snapshotTxn struct {
	Most, Least uint64
	First       *managedledger.Position `json:",omitempty"`
	Ledger      int64                   `json:",omitempty"`
}

// loadTxnBuffer recovers the topic's buffer if the topic ever had a
// transaction: its snapshot, then the entries after it.
func (t *topic) loadTxnBuffer(ctx context.Context) error {
	raw, ok := t.ml.Properties()[txnBufferProperty]
	if !ok {
		return nil
	}
	var snap txnSnapshot
	if err := json.Unmarshal([]byte(raw), &snap); err != nil {
		return fmt.Errorf("transaction buffer snapshot of %s: %w", t.name, err)
	}
	tb := newTxnBuffer(t)
	tb.restore(snap)
	if err := tb.replay(ctx, snap.UpTo); err != nil {
		return err
	}
	tb.recomputeLocked(nil)
	t.txns.Store(tb)
	return nil
}

func (tb *txnBuffer) restore(snap txnSnapshot) {
	tb.applied = snap.UpTo
	for _, o := range snap.Ongoing {
		if o.First != nil {
			tb.ongoing[txn.ID{Most: o.Most, Least: o.Least}] = &ongoingTxn{first: *o.First, known: true}
		}
	}
	for _, a := range snap.Aborted {
		tb.aborted[txn.ID{Most: a.Most, Least: a.Least}] = a.Ledger
	}
}

// replay applies the entries after upTo.
func (tb *txnBuffer) replay(ctx context.Context, upTo managedledger.Position) error {
	cur, err := tb.t.ml.NewNonDurableCursor(upTo)
	if err != nil {
		return fmt.Errorf("transaction buffer of %s: replay from %v: %w", tb.t.name, upTo, err)
	}
	defer cur.Close(ctx)
	for cur.ReadPosition().Compare(tb.t.ml.LastConfirmed()) <= 0 {
		entries, err := cur.ReadEntries(ctx, 500, 8<<20)
		if err != nil {
			return fmt.Errorf("transaction buffer of %s: replay: %w", tb.t.name, err)
		}
		if len(entries) == 0 {
			break
		}
		for _, e := range entries {
			tb.replayEntry(e)
		}
	}
	return nil
}

func (tb *txnBuffer) replayEntry(e managedledger.Entry) {
	info := entryInfoOf(e.Data)
	if !info.hasTxn {
		return
	}
	tb.applied = e.Position
	switch info.marker {
	case markerTxnCommit, markerTxnAbort:
		tb.endedLocked(info.txn, info.marker == markerTxnCommit, e.Position)
	case 0:
		if tb.ended[info.txn] || tb.aborted[info.txn] != 0 {
			return
		}
		if _, ok := tb.ongoing[info.txn]; !ok {
			tb.ongoing[info.txn] = &ongoingTxn{first: e.Position, known: true}
		}
	}
}

// buffer returns the topic's transaction buffer, creating it (and its
// first snapshot, before any transactional message is stored) if the
// topic has none. It may write metadata: not on an event loop.
func (t *topic) buffer(ctx context.Context) (*txnBuffer, error) {
	t.txnInit.Lock()
	defer t.txnInit.Unlock()
	if tb := t.txns.Load(); tb != nil {
		return tb, nil
	}
	tb := newTxnBuffer(t)
	tb.applied = t.ml.LastConfirmed()
	if err := tb.save(ctx); err != nil {
		return nil, err
	}
	t.txns.Store(tb)
	return tb, nil
}

// errTxnEnded refuses a SEND of a transaction this topic saw end.
var errTxnEnded = errors.New("transaction already ended on this topic")

// beginSend notes a transactional add about to be made.
func (tb *txnBuffer) beginSend(id txn.ID) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.ended[id] || tb.aborted[id] != 0 {
		return fmt.Errorf("transaction %v: %w", id, errTxnEnded)
	}
	if len(tb.ongoing) == 0 {
		// Everything stored so far may be read; nothing after, until
		// this transaction ends.
		tb.capped, tb.maxRead = true, tb.t.ml.LastConfirmed()
	}
	o := tb.ongoing[id]
	if o == nil {
		o = &ongoingTxn{}
		tb.ongoing[id] = o
	}
	o.pending++
	return nil
}

// isOngoing reports whether id has messages in the topic and has not
// ended.
func (tb *txnBuffer) isOngoing(id txn.ID) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	_, ok := tb.ongoing[id]
	return ok
}

// sent notes a transactional add's outcome (in its callback).
func (tb *txnBuffer) sent(id txn.ID, pos managedledger.Position, err error) {
	if tb.t.b.cfg.TraceReaders {
		tb.t.b.log.Info("trace: txn message stored", "topic", tb.t.name.String(), "txn", id.String(), "position", pos.String(), "err", err)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	o := tb.ongoing[id]
	if o == nil {
		return // ended meanwhile
	}
	o.pending--
	if err == nil {
		if !o.known {
			o.first, o.known = pos, true
		}
		tb.applied = pos
		return
	}
	if !o.known && o.pending == 0 {
		delete(tb.ongoing, id)
		tb.recomputeLocked(nil)
	}
}

// endedLocked applies a commit or abort marker stored at pos.
func (tb *txnBuffer) endedLocked(id txn.ID, commit bool, pos managedledger.Position) {
	delete(tb.ongoing, id)
	if !commit {
		tb.aborted[id] = pos.LedgerID // before the limit moves past its messages
		tb.abortedN++
	} else {
		tb.committed++
	}
	if !tb.ended[id] {
		tb.ended[id] = true
		tb.endedQ = append(tb.endedQ, id)
		if len(tb.endedQ) > recentlyEnded {
			delete(tb.ended, tb.endedQ[0])
			tb.endedQ = tb.endedQ[1:]
		}
	}
	tb.unsaved++
	tb.recomputeLocked(&pos)
}

// recomputeLocked sets the read limit after a transaction ended (at
// marker, when it was a marker) or vanished.
func (tb *txnBuffer) recomputeLocked(marker *managedledger.Position) {
	if len(tb.ongoing) == 0 {
		tb.capped = false
		return
	}
	var first *managedledger.Position
	for _, o := range tb.ongoing {
		if o.known && (first == nil || o.first.Compare(*first) < 0) {
			first = &o.first
		}
	}
	switch {
	case first != nil:
		// The entry before it: entry -1 of its ledger sorts after every
		// entry of earlier ledgers and before its first.
		tb.capped, tb.maxRead = true, managedledger.Position{LedgerID: first.LedgerID, EntryID: first.EntryID - 1}
	case marker != nil:
		// Those left are all in flight, so after the marker.
		tb.capped, tb.maxRead = true, *marker
	}
}

// readLimit is the last position subscriptions may read, if limited.
func (tb *txnBuffer) readLimit() (managedledger.Position, bool) {
	if tb == nil {
		return managedledger.Position{}, false
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.maxRead, tb.capped
}

// isAborted reports whether id aborted (its messages are never delivered).
func (tb *txnBuffer) isAborted(id txn.ID) bool {
	if tb == nil {
		return false
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	_, ok := tb.aborted[id]
	return ok
}

// end stores id's commit or abort marker (END_TXN_ON_PARTITION). Ending
// an ended transaction again stores nothing more.
func (tb *txnBuffer) end(ctx context.Context, id txn.ID, commit bool) error {
	tb.mu.Lock()
	if tb.ended[id] {
		tb.mu.Unlock()
		return nil
	}
	tb.mu.Unlock()
	marker, err := txnMarker(id, commit)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	tb.t.addEntry(marker, crc32c.Known{}, 0, func(pos managedledger.Position, err error) {
		if tb.t.b.cfg.TraceReaders {
			tb.t.b.log.Info("trace: txn marker stored", "topic", tb.t.name.String(), "txn", id.String(), "commit", commit,
				"position", pos.String(), "err", err)
		}
		if err == nil {
			tb.mu.Lock()
			tb.applied = pos
			tb.endedLocked(id, commit, pos)
			tb.mu.Unlock()
		}
		done <- err
	})
	select {
	case err = <-done:
	case <-ctx.Done():
		return fmt.Errorf("transaction %v on %s: marker: %w", id, tb.t.name, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("transaction %v on %s: marker: %w", id, tb.t.name, err)
	}
	tb.t.wakeSubscriptions()
	tb.maybeSave()
	return nil
}

// txnMarker encodes a commit or abort marker entry.
func txnMarker(id txn.ID, commit bool) ([]byte, error) {
	kind := markerTxnAbort
	if commit {
		kind = markerTxnCommit
	}
	md := &pb.MessageMetadata{ProducerName: ptr(txnMarkerProducer), SequenceId: ptr(uint64(0)),
		PublishTime: ptr(uint64(time.Now().UnixMilli())), MarkerType: ptr(int32(kind)),
		TxnidMostBits: ptr(id.Most), TxnidLeastBits: ptr(id.Least)}
	return wire.AppendEntry(nil, md, nil)
}

// maybeSave snapshots in the background after enough ends or time.
func (tb *txnBuffer) maybeSave() {
	cfg := tb.t.b.cfg
	tb.mu.Lock()
	due := tb.unsaved > 0 && (tb.unsaved >= cfg.TransactionBufferSnapshotMaxTransactionCount ||
		time.Since(tb.savedAt) >= cfg.TransactionBufferSnapshotMinTime)
	if !due || tb.saving {
		tb.mu.Unlock()
		return
	}
	tb.saving = true
	tb.mu.Unlock()
	tb.t.b.spawn(func() {
		if err := tb.save(tb.t.b.ctx); err != nil && !errors.Is(err, managedledger.ErrClosed) {
			tb.t.b.log.Warn("transaction buffer snapshot not saved; a reload replays more", "topic", tb.t.name.String(), "err", err)
		}
		tb.mu.Lock()
		tb.saving = false
		tb.mu.Unlock()
	})
}

// saveIfChanged snapshots if anything ended since the last snapshot.
func (tb *txnBuffer) saveIfChanged(ctx context.Context) {
	tb.mu.Lock()
	changed := tb.unsaved > 0
	tb.mu.Unlock()
	if changed {
		if err := tb.save(ctx); err != nil {
			tb.t.b.log.Warn("transaction buffer snapshot not saved; a reload replays more", "topic", tb.t.name.String(), "err", err)
		}
	}
}

// save writes the snapshot property.
func (tb *txnBuffer) save(ctx context.Context) error {
	tb.mu.Lock()
	snap := txnSnapshot{UpTo: tb.applied}
	if len(tb.ongoing) == 0 {
		// Nothing transactional is in flight: everything stored so far
		// is covered.
		snap.UpTo = tb.t.ml.LastConfirmed()
	}
	for id, o := range tb.ongoing {
		if o.known {
			snap.Ongoing = append(snap.Ongoing, snapshotTxn{Most: id.Most, Least: id.Least, First: &o.first})
		}
	}
	for id, ledger := range tb.aborted {
		snap.Aborted = append(snap.Aborted, snapshotTxn{Most: id.Most, Least: id.Least, Ledger: ledger})
	}
	unsaved := tb.unsaved
	tb.mu.Unlock()
	slices.SortFunc(snap.Aborted, func(a, b snapshotTxn) int { return int(a.Least - b.Least) })
	if err := saveJSONProperty(ctx, tb.t.ml, txnBufferProperty, snap); err != nil {
		return fmt.Errorf("transaction buffer of %s: save snapshot: %w", tb.t.name, err)
	}
	tb.mu.Lock()
	tb.unsaved -= unsaved
	tb.savedAt = time.Now()
	tb.mu.Unlock()
	return nil
}

// saveJSONProperty stores v, as JSON, in the managed ledger's property key
// (a metadata write: durable when it returns). The transaction buffer's
// snapshot and the pending acknowledgements live there.
func saveJSONProperty(ctx context.Context, ml managedledger.ManagedLedger, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ml.UpdateProperties(ctx, map[string]string{key: string(raw)}, nil)
}

// wakeSubscriptions dispatches every subscription: the read limit moved.
func (t *topic) wakeSubscriptions() {
	for _, s := range t.allSubs() {
		s.dispatch()
	}
}

// bufferStats are the figures of admin's transaction-buffer stats.
type bufferStats struct {
	MaxRead             managedledger.Position
	Capped              bool
	Ongoing, Aborted    int
	Committed, AbortedN int64
	SnapshotUpTo        managedledger.Position
	SnapshotAt          time.Time
}

func (tb *txnBuffer) stats() bufferStats {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return bufferStats{MaxRead: tb.maxRead, Capped: tb.capped, Ongoing: len(tb.ongoing), Aborted: len(tb.aborted),
		Committed: tb.committed, AbortedN: tb.abortedN, SnapshotAt: tb.savedAt}
}

// belowReadLimit drops the entries of a cursor read past the read limit
// and moves cur back to the first of them: they are read again once the
// transaction ends. Subscriptions and replicators read through it.
func (tb *txnBuffer) belowReadLimit(cur managedledger.Cursor, entries []managedledger.Entry) []managedledger.Entry {
	limit, capped := tb.readLimit()
	if !capped {
		return entries
	}
	for i, e := range entries {
		if e.Position.Compare(limit) > 0 {
			cur.Seek(e.Position)
			return entries[:i]
		}
	}
	return entries
}

// maxStepsBack bounds how far lastDispatchable looks back over markers and
// aborted messages.
const maxStepsBack = 1000

// lastDispatchable is the last entry a reader can be given (Pulsar's
// getLastDispatchablePosition): at most the read limit, stepping back over
// transaction markers and aborted transactions' messages.
func (t *topic) lastDispatchable(ctx context.Context) managedledger.Position {
	tb := t.txns.Load()
	last := t.ml.LastConfirmed()
	if limit, capped := tb.readLimit(); capped && limit.Compare(last) < 0 {
		last = limit
	}
	for range maxStepsBack {
		if last.EntryID < 0 {
			prev, ok := t.previousLedgerEnd(last.LedgerID)
			if !ok {
				return last
			}
			last = prev
		}
		e, err := t.ml.ReadEntry(ctx, last)
		if err != nil {
			return last
		}
		info := entryInfoOf(e.Data)
		if info.marker == 0 && !(info.hasTxn && tb.isAborted(info.txn)) {
			return last
		}
		last.EntryID--
	}
	return last
}

// previousLedgerEnd is the last entry of the ledger before ledger id that
// has entries.
func (t *topic) previousLedgerEnd(id int64) (managedledger.Position, bool) {
	lister, ok := t.ml.(managedledger.LedgerLister)
	if !ok {
		return managedledger.Position{}, false
	}
	ledgers := lister.Ledgers()
	for i := len(ledgers) - 1; i >= 0; i-- {
		if l := ledgers[i]; l.ID < id && l.Entries > 0 {
			return managedledger.Position{LedgerID: l.ID, EntryID: l.Entries - 1}, true
		}
	}
	return managedledger.Position{}, false
}
