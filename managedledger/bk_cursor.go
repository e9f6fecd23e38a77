package managedledger

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/magnetar-io/magnetar/ledger"
)

// bkCursor is a cursor of a bkLedger. Its ackState and the fields marked
// so are guarded by ml.mu; persistence state by persistMu.
type bkCursor struct {
	ackState
	ml      *bkLedger
	name    string
	durable bool
	closed  bool  // ml.mu
	dirty   bool  // ml.mu: state changed since the last persisted snapshot
	readGen int64 // ml.mu: bumped by seeks, so a read that raced one does not move the position

	waiter    func([]Entry, error) // ml.mu
	waitN     int
	waitBytes int64

	persistMu    sync.Mutex
	cursorLedger *ledger.WriteHandle // persistMu: where snapshots go
	oldLedger    int64               // persistMu: the previous cursor ledger, deleted once replaced
	snapshots    int64               // persistMu: snapshots in cursorLedger
	nodeVersion  int64               // persistMu: version of the cursor's metadata node
}

func (c *bkCursor) Name() string  { return c.name }
func (c *bkCursor) Durable() bool { return c.durable }

func (c *bkCursor) checkLocked() error {
	switch {
	case c.ml.mu.closed:
		return fmt.Errorf("%s: cursor %s: %w", c.ml.name, c.name, ErrClosed)
	case c.closed:
		return fmt.Errorf("%s: cursor %s: %w", c.ml.name, c.name, ErrCursorNotFound)
	}
	return nil
}

// planLocked lists up to n unacknowledged indices from the read position;
// with none left it moves the read position to the end.
func (c *bkCursor) planLocked(n int) []int64 {
	ml := c.ml
	ml.checkTrimLocked()
	c.read = max(c.read, ml.baseLocked(), c.markDelete+1)
	end := ml.endLocked()
	var out []int64
	for i := c.read; i < end && len(out) < n; i++ {
		if !c.isAcked(i) {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		c.read = end
	}
	return out
}

func (c *bkCursor) ReadEntries(ctx context.Context, n int, maxBytes int64) ([]Entry, error) {
	for {
		entries, err := c.readOnce(ctx, n, maxBytes)
		if !errors.Is(err, errTrimmed) {
			return entries, err
		}
		// Everything planned was trimmed before it was fetched (a reader
		// holds no ledgers): plan again from the first kept entry. Each
		// round starts past a trim, and trims are finite.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// readOnce plans and fetches one read. It fails with errTrimmed only when
// the first planned entry was trimmed before the fetch; entries read
// before a trimmed one are returned (the next read skips the rest).
func (c *bkCursor) readOnce(ctx context.Context, n int, maxBytes int64) ([]Entry, error) {
	c.ml.mu.Lock()
	if err := c.checkLocked(); err != nil {
		c.ml.mu.Unlock()
		return nil, err
	}
	indices := c.planLocked(min(n, c.ml.entriesForLocked(maxBytes)))
	gen := c.readGen
	c.ml.mu.Unlock()
	if len(indices) == 0 {
		return nil, nil
	}
	if hook := c.ml.testHookBeforeFetch; hook != nil {
		hook()
	}
	c.ml.readAhead.waitFor(ctx, indices[0])
	entries, err := c.ml.fetch(ctx, indices)
	c.ml.maybeReadAhead(indices[len(indices)-1] + 1)
	if err != nil && (len(entries) == 0 || !errors.Is(err, errTrimmed)) {
		return nil, err
	} // else: what was read before the trimmed entries
	return c.takeRead(gen, indices, entries, maxBytes), nil
}

// takeRead keeps the entries of a read (entries[i] is indices[i]) up to
// maxBytes, never fewer than one, and moves the read position past them
// unless a seek came since the read was planned (gen).
func (c *bkCursor) takeRead(gen int64, indices []int64, entries []Entry, maxBytes int64) []Entry {
	var bytes int64
	k := 0
	for k < len(entries) && (k == 0 || bytes < maxBytes) {
		bytes += int64(len(entries[k].Data))
		k++
	}
	c.ml.mu.Lock()
	if c.readGen == gen {
		c.read = max(c.read, indices[k-1]+1)
		c.ml.evictReadLocked()
	}
	c.ml.mu.Unlock()
	return entries[:k]
}

func (c *bkCursor) ReadEntriesOrWait(n int, maxBytes int64, cb func([]Entry, error)) {
	ml := c.ml
	ml.mu.Lock()
	if err := c.checkLocked(); err != nil {
		ml.mu.Unlock()
		cb(nil, err)
		return
	}
	indices := c.planLocked(min(n, ml.entriesForLocked(maxBytes)))
	if len(indices) == 0 {
		c.waiter, c.waitN, c.waitBytes = cb, n, maxBytes
		ml.mu.Unlock()
		return
	}
	positions := make([]Position, len(indices))
	for i, idx := range indices {
		positions[i] = ml.positionLocked(idx)
	}
	gen := c.readGen
	ml.mu.Unlock()
	if entries, ok := c.readCached(gen, indices, positions, maxBytes); ok {
		cb(entries, nil) // on this goroutine, as the in-memory ledger answers
		return
	}
	go func() {
		entries, err := c.ReadEntries(context.Background(), n, maxBytes)
		if err == nil && len(entries) == 0 {
			c.ReadEntriesOrWait(n, maxBytes, cb) // acknowledged meanwhile: wait again
			return
		}
		cb(entries, err)
	}()
}

// readCached takes a planned read (indices at positions) from the cache
// when every entry of it up to maxBytes is there: it waits for nothing
// (no bookie, no read-ahead), so ReadEntriesOrWait answers a tailing
// reader on the goroutine that added the entry instead of a goroutine of
// its own, one wake-up per entry fewer on the durable path (TUNING.md,
// "Wake-ups per entry"). ok false: something is not cached, nothing was
// taken, and the caller reads through readOnce.
func (c *bkCursor) readCached(gen int64, indices []int64, positions []Position, maxBytes int64) (entries []Entry, ok bool) {
	ml := c.ml
	entries = make([]Entry, 0, len(indices))
	var bytes int64
	for _, p := range positions {
		if len(entries) > 0 && bytes >= maxBytes {
			break
		}
		data, hit := ml.f.cache.peek(cacheKey{ml.id, p})
		if !hit {
			return nil, false
		}
		entries = append(entries, Entry{Position: p, Data: data})
		bytes += int64(len(data))
	}
	ml.f.cache.countHits(len(entries))
	entries = c.takeRead(gen, indices, entries, maxBytes)
	ml.maybeReadAhead(indices[len(entries)-1] + 1)
	return entries, true
}

func (c *bkCursor) CancelPendingRead() bool {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	had := c.waiter != nil
	c.waiter = nil
	return had
}

// takeWaitersLocked returns, for every cursor waiting for entries that
// now has some, a function that serves it (run after mu is released).
func (ml *bkLedger) takeWaitersLocked() []func() {
	var woken []func()
	for _, c := range ml.allCursorsLocked() {
		if c.waiter == nil || max(c.read, c.markDelete+1) >= ml.endLocked() {
			continue
		}
		cb, n, maxBytes := c.waiter, c.waitN, c.waitBytes
		c.waiter = nil
		woken = append(woken, func() { c.ReadEntriesOrWait(n, maxBytes, cb) })
	}
	return woken
}

func (ml *bkLedger) allCursorsLocked() []*bkCursor {
	out := make([]*bkCursor, 0, len(ml.mu.cursors)+len(ml.mu.nonDurable))
	for _, c := range ml.mu.cursors {
		out = append(out, c)
	}
	for c := range ml.mu.nonDurable {
		out = append(out, c)
	}
	return out
}

func (c *bkCursor) ReadPosition() Position {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.ml.positionLocked(max(c.read, c.markDelete+1, c.ml.baseLocked()))
}

func (c *bkCursor) MarkDeletePosition() Position {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.ml.positionLocked(max(c.markDelete, c.ml.baseLocked()-1))
}

// markDeleteIndexLocked converts a mark-delete position to an index:
// everything at or before pos.
func (ml *bkLedger) markDeleteIndexLocked(pos Position) int64 {
	i, ok := ml.indexAtLocked(pos)
	if ok {
		return i
	}
	return i - 1
}

func (c *bkCursor) MarkDelete(ctx context.Context, pos Position) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.markDeleteLocked(pos)
}

func (c *bkCursor) markDeleteLocked(pos Position) error {
	if err := c.checkLocked(); err != nil {
		return err
	}
	if pos.Compare(c.ml.positionLocked(c.ml.endLocked()-1)) > 0 {
		return fmt.Errorf("%s: cursor %s: mark-delete %v past the last entry: %w", c.ml.name, c.name, pos, ErrInvalidPosition)
	}
	if i := c.ml.markDeleteIndexLocked(pos); i > c.markDelete {
		c.markDelete = i
		c.normalise()
		c.dirty = true
		c.ml.schedulePersistLocked()
	}
	return nil
}

func (c *bkCursor) Delete(ctx context.Context, positions ...Position) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.checkLocked(); err != nil {
		return err
	}
	last := c.ml.positionLocked(c.ml.endLocked() - 1)
	for _, p := range positions {
		i, ok := c.ml.indexAtLocked(p)
		if !ok {
			if p.Compare(last) > 0 {
				return fmt.Errorf("%s: cursor %s: ack of %v past the last entry: %w", c.ml.name, c.name, p, ErrInvalidPosition)
			}
			continue // trimmed: already gone
		}
		if i > c.markDelete {
			c.addAcked(i)
			c.dirty = true
			c.ml.schedulePersistLocked()
		}
	}
	c.normalise()
	return nil
}

func (c *bkCursor) IsAcknowledged(pos Position) bool {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	i, ok := c.ml.indexAtLocked(pos)
	if !ok {
		return i <= c.ml.baseLocked()
	}
	return c.isAcked(i)
}

func (c *bkCursor) Seek(pos Position) {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	c.read = max(c.ml.indexAtOrAfterLocked(pos), c.markDelete+1)
	c.readGen++
}

func (c *bkCursor) Rewind() {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	c.read = c.markDelete + 1
	c.readGen++
}

// Reset moves both positions: pos is read next and everything before it
// counts as acknowledged. What is persisted is the mark-delete position
// (Pulsar #18236 persisted the read position and lost messages).
func (c *bkCursor) Reset(ctx context.Context, pos Position) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.checkLocked(); err != nil {
		return err
	}
	i := c.ml.indexAtOrAfterLocked(pos)
	c.resetTo(i)
	c.readGen++
	c.dirty = true
	c.ml.schedulePersistLocked()
	return nil
}

func (c *bkCursor) Backlog() int64 {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.backlog(c.ml.baseLocked(), c.ml.endLocked())
}

// Close drops a pending read; a durable cursor's state is persisted by
// the managed ledger (its persist loop, and when it closes).
func (c *bkCursor) Close(ctx context.Context) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	c.waiter = nil
	if !c.durable {
		delete(c.ml.mu.nonDurable, c)
	}
	return nil
}

// BacklogSize estimates the backlog's bytes from the average entry size
// of the stored ledgers (entries are not all in memory).
func (c *bkCursor) BacklogSize() int64 {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	var n, size int64
	for _, l := range c.ml.mu.ledgers {
		n += l.meta.Entries
		size += l.meta.Size
	}
	if n == 0 {
		return 0
	}
	return c.backlog(c.ml.baseLocked(), c.ml.endLocked()) * size / n
}

func (c *bkCursor) SkipEntries(ctx context.Context, n int64) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.checkLocked(); err != nil {
		return err
	}
	if c.skip(n, c.ml.baseLocked(), c.ml.endLocked()) > 0 {
		c.dirty = true
		c.ml.schedulePersistLocked()
	}
	return nil
}

func (c *bkCursor) ClearBacklog(ctx context.Context) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.checkLocked(); err != nil {
		return err
	}
	c.clear(c.ml.endLocked())
	c.dirty = true
	c.ml.schedulePersistLocked()
	return nil
}
