package managedledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/ledger"
)

// Factory opens managed ledgers by name.
type Factory interface {
	Open(ctx context.Context, name string) (ManagedLedger, error)
}

// MemoryOptions configure the in-memory implementation.
type MemoryOptions struct {
	// MaxEntriesPerLedger is managedLedgerMaxEntriesPerLedger (default
	// 50000): the stream rolls over to a new ledger id after this many.
	MaxEntriesPerLedger int64
	// MaxSizePerLedger (bytes; default DefaultMemoryLedgerSize) rolls
	// the stream over once a ledger holds this much. Consumed entries go
	// a whole ledger at a time, as on bookies, so this bounds what a
	// topic keeps beyond its backlog and retention.
	MaxSizePerLedger int64
}

// DefaultMemoryLedgerSize is MemoryOptions.MaxSizePerLedger's default.
// Bookies' default (2 GiB, Pulsar's managedLedgerMaxSizePerLedgerMbytes)
// is disk; in memory it is heap, and 50,000 batched entries of 1 KiB
// messages are gigabytes, so memory rolls over sooner. Small topics
// still keep their consumed entries in the current ledger, so a
// subscription created later at the earliest position reads them, as
// users of Pulsar expect without retention.
const DefaultMemoryLedgerSize = 64 << 20

// MemoryFactory keeps managed ledgers in memory. A ledger closed and
// opened again through the same factory keeps its entries and cursors, as
// a persisted one would across a topic unload. A stream keeps its backlog,
// what retention asks for, and its current ledger (at most
// MaxSizePerLedger bytes).
type MemoryFactory struct {
	opts    MemoryOptions
	mu      sync.Mutex
	ledgers map[string]*memoryLedger
	views   uint64     // owner views made (Owner)
	side    memorySide // side.go
}

// NewMemoryFactory returns an empty factory.
func NewMemoryFactory(opts MemoryOptions) *MemoryFactory {
	if opts.MaxEntriesPerLedger <= 0 {
		opts.MaxEntriesPerLedger = 50000
	}
	if opts.MaxSizePerLedger <= 0 {
		opts.MaxSizePerLedger = DefaultMemoryLedgerSize
	}
	return &MemoryFactory{opts: opts, ledgers: map[string]*memoryLedger{}}
}

// Open returns the ledger called name, creating it if needed, for the
// factory's own owner (see Owner).
func (f *MemoryFactory) Open(ctx context.Context, name string) (ManagedLedger, error) {
	return f.openAs(ctx, name, 0)
}

// Owner returns a view of the factory for one more owner (a broker of an
// in-process cluster sharing this storage). Opens through one view share
// the ledger's handle while it is open, as one broker's do; an open
// through another view takes the ledger over (see memoryHandle).
func (f *MemoryFactory) Owner() Factory {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.views++
	return &memoryOwner{MemoryFactory: f, view: f.views}
}

// memoryOwner is one owner's view (Owner); every other method of the
// factory is its own.
type memoryOwner struct {
	*MemoryFactory
	view uint64
}

func (o *memoryOwner) Open(ctx context.Context, name string) (ManagedLedger, error) {
	return o.openAs(ctx, name, o.view)
}

func (f *MemoryFactory) openAs(ctx context.Context, name string, view uint64) (ManagedLedger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	ml, ok := f.ledgers[name]
	if !ok {
		ml = &memoryLedger{name: name, created: time.Now(), maxPerLedger: f.opts.MaxEntriesPerLedger, maxLedgerSize: f.opts.MaxSizePerLedger, ledgerID: 1,
			cursors: map[string]*memoryCursor{}, closedAt: map[int64]int64{}}
		f.ledgers[name] = ml
	}
	ml.mu.Lock()
	if !ml.closed && ml.handle != nil && ml.handle.view == view {
		h := ml.handle // open by this owner already: one handle
		ml.mu.Unlock()
		f.mu.Unlock()
		return h, nil
	}
	var woken []func()
	readers := ml.nonDurable // closeLocked drops them; newOwnerLocked fences them
	if !ml.closed && ml.handle != nil {
		// Still open under another owner: its pending reads end as its
		// close would have ended them.
		woken = ml.closeLocked()
	}
	if ml.handle != nil {
		ml.newOwnerLocked(readers)
	}
	ml.closed = false
	h := &memoryHandle{memoryLedger: ml, view: view}
	ml.handle = h
	ml.mu.Unlock()
	f.mu.Unlock()
	for _, w := range woken {
		w()
	}
	return h, nil
}

// newOwnerLocked hands the cursors to a new handle, as a ledger-backed
// open recovers them: each durable cursor is a new object resuming from
// its first unacknowledged entry (what the previous owner had read but
// not acknowledged is read again, not lost), and the previous owner's
// cursor objects, durable or not, are fenced, so a late read, ack or
// cancel of theirs cannot touch the new owner's.
func (ml *memoryLedger) newOwnerLocked(readers map[*memoryCursor]struct{}) {
	for name, old := range ml.cursors {
		c := &memoryCursor{ml: ml, name: old.name, durable: old.durable, ackState: ackState{
			markDelete: old.markDelete, read: old.markDelete + 1, acked: slices.Clone(old.acked),
			props: maps.Clone(old.props), batch: slices.Clone(old.batch)}}
		old.fenced, old.waiter = true, nil
		ml.cursors[name] = c
	}
	for c := range readers {
		c.fenced, c.waiter = true, nil
	}
	ml.nonDurable = nil
}

// memoryHandle is one owner's view of a memory ledger. A factory shared by
// several brokers (the in-process cluster tests, through Owner) opens a
// ledger for its new owner while the old owner may not have closed it yet:
// a bundle is acquired elsewhere as soon as the old owner's session is
// gone, and the old owner closes its topics a little later. That late
// close must not close the new owner's ledger, and the old owner's adds,
// cursors and metadata changes fail with ledger.ErrFenced, as a fenced
// BookKeeper writer's do.
type memoryHandle struct {
	*memoryLedger
	view uint64 // the factory view that opened it (Owner)
}

func (h *memoryHandle) AddEntry(data []byte, cb func(Position, error)) {
	h.add(h, data, cb)
}

// AddEntryInPlace implements ManagedLedger: memory keeps the entry as it
// is, without its headroom.
func (h *memoryHandle) AddEntryInPlace(buf []byte, _ crc32c.Known, cb func(Position, error)) {
	h.add(h, buf[EntryHeadroom:], cb)
}

func (h *memoryHandle) Terminate(ctx context.Context) (Position, error) {
	return h.terminate(h)
}

func (h *memoryHandle) OpenCursor(ctx context.Context, name string, opts CursorOptions) (Cursor, error) {
	return h.openCursor(ctx, h, name, opts)
}

func (h *memoryHandle) NewNonDurableCursor(start Position) (Cursor, error) {
	return h.newNonDurableCursor(h, start)
}

func (h *memoryHandle) DeleteCursor(ctx context.Context, name string) error {
	return h.deleteCursor(h, name)
}

// UpdateProperties implements ManagedLedger.
func (h *memoryHandle) UpdateProperties(_ context.Context, set map[string]string, remove []string) error {
	return h.updateProperties(h, set, remove)
}

// ownerLocked fails op for a handle another owner's open took over.
func (ml *memoryLedger) ownerLocked(h *memoryHandle, op string) error {
	if h != ml.handle {
		return fmt.Errorf("%s: %s: a newer owner opened it: %w", ml.name, op, ledger.ErrFenced)
	}
	return nil
}

// Close implements ManagedLedger; an owner taken over has nothing left to
// close.
func (h *memoryHandle) Close(ctx context.Context) error {
	h.closeFor(h)
	return nil
}

// memoryLedger is one stream. Entries are addressed internally by a global
// index (base is the index of entries[0]); cursors keep indices.
//
// Lock rules: mu guards everything in the ledger and its cursors.
// Callbacks (add receipts, woken reads) run after mu is released.
type memoryLedger struct {
	name          string
	created       time.Time // first opened through its factory
	maxPerLedger  int64
	maxLedgerSize int64

	mu         sync.Mutex
	entries    []Entry
	base       int64    // global index of entries[0]
	lastTrim   Position // position of index base-1 once entries were trimmed
	size       int64
	ledgerID   int64 // ledger of the next entry
	entryID    int64 // entry id of the next entry
	ledgerSize int64 // bytes added to the current ledger id
	cursors    map[string]*memoryCursor
	nonDurable map[*memoryCursor]struct{}
	closed     bool
	handle     *memoryHandle // the latest owner's; older ones are fenced
	terminated bool
	props      map[string]string
	retention  Retention
	closedAt   map[int64]int64 // unix ms when each stored ledger id rolled over
}

func (ml *memoryLedger) Name() string { return ml.name }

// CreatedAt implements CreationTimer.
func (ml *memoryLedger) CreatedAt() time.Time { return ml.created }

// add appends data for handle h.
func (ml *memoryLedger) add(h *memoryHandle, data []byte, cb func(Position, error)) {
	ml.mu.Lock()
	switch {
	case h != ml.handle:
		ml.mu.Unlock()
		cb(Position{}, ml.ownerLocked(h, "add"))
		return
	case ml.closed:
		ml.mu.Unlock()
		cb(Position{}, fmt.Errorf("%s: add: %w", ml.name, ErrClosed))
		return
	case ml.terminated:
		ml.mu.Unlock()
		cb(Position{}, fmt.Errorf("%s: add: %w", ml.name, ErrTerminated))
		return
	}
	pos := Position{ml.ledgerID, ml.entryID}
	ml.entries = append(ml.entries, Entry{Position: pos, Data: data})
	ml.size += int64(len(data))
	ml.entryID++
	ml.ledgerSize += int64(len(data))
	if ml.entryID >= ml.maxPerLedger || ml.ledgerSize >= ml.maxLedgerSize {
		ml.closedAt[ml.ledgerID] = time.Now().UnixMilli()
		ml.ledgerID, ml.entryID, ml.ledgerSize = ml.ledgerID+1, 0, 0
		ml.trimLocked() // the closed ledger may be trimmable now
	}
	woken := ml.takeWaitersLocked()
	ml.mu.Unlock()
	cb(pos, nil)
	for _, w := range woken {
		w()
	}
}

// ResumeAdds implements ManagedLedger: adds in memory fail only once
// closed or terminated, for good, so there is nothing to resume.
func (ml *memoryLedger) ResumeAdds() {}

// end is the global index after the last entry.
func (ml *memoryLedger) endLocked() int64 { return ml.base + int64(len(ml.entries)) }

// indexAtOrAfter is the index of the first entry at or after p.
func (ml *memoryLedger) indexAtOrAfterLocked(p Position) int64 {
	i := sort.Search(len(ml.entries), func(i int) bool { return ml.entries[i].Position.Compare(p) >= 0 })
	return ml.base + int64(i)
}

// positionLocked is the position of index i; for the end index it is the
// next position to be written, and for base-1 the one before the first.
func (ml *memoryLedger) positionLocked(i int64) Position {
	switch {
	case i >= ml.base && i < ml.endLocked():
		return ml.entries[i-ml.base].Position
	case i >= ml.endLocked():
		return Position{ml.ledgerID, ml.entryID}
	case ml.base > 0:
		return ml.lastTrim
	case len(ml.entries) > 0:
		first := ml.entries[0].Position
		return Position{first.LedgerID, first.EntryID - 1}
	}
	return Position{ml.ledgerID, ml.entryID - 1}
}

func (ml *memoryLedger) openCursor(ctx context.Context, h *memoryHandle, name string, opts CursorOptions) (Cursor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if err := ml.ownerLocked(h, "open cursor "+name); err != nil {
		return nil, err
	}
	if ml.closed {
		return nil, fmt.Errorf("%s: open cursor %s: %w", ml.name, name, ErrClosed)
	}
	if c, ok := ml.cursors[name]; ok {
		return c, nil
	}
	start := ml.endLocked()
	if opts.Initial == Earliest {
		start = ml.base
	}
	c := &memoryCursor{ml: ml, name: name, durable: true, ackState: ackState{markDelete: start - 1, read: start}}
	ml.cursors[name] = c
	return c, nil
}

func (ml *memoryLedger) newNonDurableCursor(h *memoryHandle, start Position) (Cursor, error) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if err := ml.ownerLocked(h, "reader"); err != nil {
		return nil, err
	}
	if ml.closed {
		return nil, fmt.Errorf("%s: reader: %w", ml.name, ErrClosed)
	}
	i := ml.indexAtOrAfterLocked(start)
	if i < ml.endLocked() && ml.entries[i-ml.base].Position == start {
		i++ // start is exclusive
	}
	c := &memoryCursor{ml: ml, name: "reader", ackState: ackState{markDelete: i - 1, read: i}}
	if ml.nonDurable == nil {
		ml.nonDurable = map[*memoryCursor]struct{}{}
	}
	ml.nonDurable[c] = struct{}{}
	return c, nil
}

func (ml *memoryLedger) deleteCursor(h *memoryHandle, name string) error {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if err := ml.ownerLocked(h, "delete cursor "+name); err != nil {
		return err
	}
	c, ok := ml.cursors[name]
	if !ok {
		return fmt.Errorf("%s: delete cursor %s: %w", ml.name, name, ErrCursorNotFound)
	}
	c.closed = true
	delete(ml.cursors, name)
	ml.trimLocked()
	return nil
}

func (ml *memoryLedger) Cursors() []Cursor {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	out := make([]Cursor, 0, len(ml.cursors)+len(ml.nonDurable))
	for _, c := range ml.cursors {
		out = append(out, c)
	}
	for c := range ml.nonDurable {
		out = append(out, c)
	}
	return out
}

func (ml *memoryLedger) ReadEntry(ctx context.Context, pos Position) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	i := ml.indexAtOrAfterLocked(pos)
	if i >= ml.endLocked() || ml.entries[i-ml.base].Position != pos {
		return Entry{}, fmt.Errorf("%s: read %v: %w", ml.name, pos, ErrInvalidPosition)
	}
	return ml.entries[i-ml.base], nil
}

func (ml *memoryLedger) LastConfirmed() Position {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.positionLocked(ml.endLocked() - 1)
}

func (ml *memoryLedger) Entries() int64 {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return int64(len(ml.entries))
}

func (ml *memoryLedger) Size() int64 {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.size
}

// terminate stops the stream for handle h.
func (ml *memoryLedger) terminate(h *memoryHandle) (Position, error) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if err := ml.ownerLocked(h, "terminate"); err != nil {
		return Position{}, err
	}
	ml.terminated = true
	return ml.positionLocked(ml.endLocked() - 1), nil
}

// Properties implements ManagedLedger.
func (ml *memoryLedger) Properties() map[string]string {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return maps.Clone(ml.props)
}

// updateProperties changes the ledger's properties for handle h.
func (ml *memoryLedger) updateProperties(h *memoryHandle, set map[string]string, remove []string) error {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if err := ml.ownerLocked(h, "update properties"); err != nil {
		return err
	}
	if ml.props == nil {
		ml.props = map[string]string{}
	}
	maps.Copy(ml.props, set)
	for _, k := range remove {
		delete(ml.props, k)
	}
	return nil
}

// closeFor closes the ledger unless an owner newer than h took it over
// (h nil: whoever holds it, as a delete), and ends its pending reads.
func (ml *memoryLedger) closeFor(h *memoryHandle) {
	ml.mu.Lock()
	var woken []func()
	if h == nil || h == ml.handle {
		woken = ml.closeLocked()
	}
	ml.mu.Unlock()
	for _, w := range woken {
		w()
	}
}

// closeLocked closes the ledger and returns its pending reads' callbacks,
// to be run once mu is released.
func (ml *memoryLedger) closeLocked() []func() {
	ml.closed = true
	var woken []func()
	for _, c := range ml.allCursorsLocked() {
		if c.waiter != nil {
			cb := c.waiter
			c.waiter = nil
			woken = append(woken, func() { cb(nil, fmt.Errorf("%s: read: %w", ml.name, ErrClosed)) })
		}
	}
	ml.nonDurable = nil
	return woken
}

func (ml *memoryLedger) allCursorsLocked() []*memoryCursor {
	out := make([]*memoryCursor, 0, len(ml.cursors)+len(ml.nonDurable))
	for _, c := range ml.cursors {
		out = append(out, c)
	}
	for c := range ml.nonDurable {
		out = append(out, c)
	}
	return out
}

// takeWaitersLocked serves every cursor waiting for entries and returns
// the callbacks to run once mu is released.
func (ml *memoryLedger) takeWaitersLocked() []func() {
	var woken []func()
	for _, c := range ml.allCursorsLocked() {
		if c.waiter == nil || c.read >= ml.endLocked() {
			continue
		}
		cb, n, max := c.waiter, c.waitN, c.waitBytes
		c.waiter = nil
		entries := c.readLocked(n, max)
		woken = append(woken, func() { cb(entries, nil) })
	}
	return woken
}

// trimLocked drops whole ledgers every durable cursor has acknowledged,
// beyond retention; with no durable cursor every closed ledger counts as
// acknowledged (the durable path's rule: bkLedger.trim).
func (ml *memoryLedger) trimLocked() {
	if len(ml.entries) == 0 {
		return
	}
	keep := ml.endLocked()
	for _, c := range ml.cursors {
		keep = min(keep, c.markDelete+1)
	}
	if keep >= ml.endLocked() {
		keep = ml.endLocked() - 1 // keep the last entry: LastConfirmed stays an entry
	}
	if keep <= ml.base {
		return
	}
	// Only whole ledgers go, as with real ledgers.
	firstKept := ml.entries[keep-ml.base].Position.LedgerID
	cut := ml.retainedCutLocked(firstKept, time.Now())
	if cut == 0 {
		return
	}
	for _, e := range ml.entries[:cut] {
		ml.size -= int64(len(e.Data))
	}
	ml.lastTrim = ml.entries[cut-1].Position
	// Clear, then reslice: the trimmed payloads are garbage at once, and
	// the kept entries are not copied (append moves them when it next
	// grows the array, which then leaves the trimmed front behind).
	clear(ml.entries[:cut])
	ml.entries = ml.entries[cut:]
	ml.base += int64(cut)
	for id := range ml.closedAt {
		if id <= ml.lastTrim.LedgerID { // closed and dropped whole
			delete(ml.closedAt, id)
		}
	}
	for c := range ml.nonDurable {
		c.read = max(c.read, ml.base)
		c.markDelete = max(c.markDelete, ml.base-1)
		c.dropBatchThrough(c.markDelete)
	}
}

// retainedCutLocked is how many leading entries may go: those of whole
// ledgers before firstKept that retention lets go, in order.
func (ml *memoryLedger) retainedCutLocked(firstKept int64, now time.Time) int {
	cut, retained := 0, ml.size
	for cut < len(ml.entries) && ml.entries[cut].Position.LedgerID < firstKept {
		id := ml.entries[cut].Position.LedgerID
		if !ml.retention.expired(now, ml.closedAt[id], retained) {
			break
		}
		for cut < len(ml.entries) && ml.entries[cut].Position.LedgerID == id {
			retained -= int64(len(ml.entries[cut].Data))
			cut++
		}
	}
	return cut
}

// SetRetention implements ManagedLedger; it trims by r at once.
func (ml *memoryLedger) SetRetention(r Retention) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	ml.retention = r
	ml.trimLocked()
}

// Lister lists managed ledgers by name prefix; factories that can
// implement it (the broker lists a namespace's topics with it).
type Lister interface {
	List(ctx context.Context, prefix string) ([]string, error)
}

// List returns the names of the ledgers that start with prefix, sorted.
func (f *MemoryFactory) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for name := range f.ledgers {
		if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}
