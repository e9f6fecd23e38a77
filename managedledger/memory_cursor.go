package managedledger

import (
	"context"
	"fmt"

	"github.com/magnetar-io/magnetar/ledger"
)

// memoryCursor keeps its state in global indices (ackState). All fields
// are guarded by ml.mu.
type memoryCursor struct {
	ackState
	ml      *memoryLedger
	name    string
	durable bool
	closed  bool
	fenced  bool // its owner's ledger handle was taken over (newOwnerLocked)

	waiter    func([]Entry, error)
	waitN     int
	waitBytes int64
}

func (c *memoryCursor) Name() string  { return c.name }
func (c *memoryCursor) Durable() bool { return c.durable }

func (c *memoryCursor) check() error {
	switch {
	case c.fenced:
		return fmt.Errorf("%s: cursor %s: a newer owner opened the ledger: %w", c.ml.name, c.name, ledger.ErrFenced)
	case c.ml.closed:
		return fmt.Errorf("%s: cursor %s: %w", c.ml.name, c.name, ErrClosed)
	case c.closed:
		return fmt.Errorf("%s: cursor %s: %w", c.ml.name, c.name, ErrCursorNotFound)
	}
	return nil
}

func (c *memoryCursor) ReadEntries(ctx context.Context, n int, maxBytes int64) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.readLocked(n, maxBytes), nil
}

// readLocked returns up to n entries from the read position, skipping
// individually acknowledged ones, and advances past them.
func (c *memoryCursor) readLocked(n int, maxBytes int64) []Entry {
	ml := c.ml
	c.read = max(c.read, ml.base, c.markDelete+1)
	var out []Entry
	var bytes int64
	for c.read < ml.endLocked() && len(out) < n && (len(out) == 0 || bytes < maxBytes) {
		if !c.isAcked(c.read) {
			e := ml.entries[c.read-ml.base]
			out = append(out, e)
			bytes += int64(len(e.Data))
		}
		c.read++
	}
	return out
}

func (c *memoryCursor) ReadEntriesOrWait(n int, maxBytes int64, cb func([]Entry, error)) {
	c.ml.mu.Lock()
	if err := c.check(); err != nil {
		c.ml.mu.Unlock()
		cb(nil, err)
		return
	}
	if entries := c.readLocked(n, maxBytes); len(entries) > 0 {
		c.ml.mu.Unlock()
		cb(entries, nil)
		return
	}
	c.waiter, c.waitN, c.waitBytes = cb, n, maxBytes
	c.ml.mu.Unlock()
}

func (c *memoryCursor) CancelPendingRead() bool {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	had := c.waiter != nil
	c.waiter = nil
	return had
}

func (c *memoryCursor) ReadPosition() Position {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.ml.positionLocked(max(c.read, c.markDelete+1))
}

func (c *memoryCursor) MarkDeletePosition() Position {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.ml.positionLocked(c.markDelete)
}

// indexAtLocked is the index of the entry at pos; ok is false when no
// stored entry has that position.
func (c *memoryCursor) indexAtLocked(pos Position) (int64, bool) {
	i := c.ml.indexAtOrAfterLocked(pos)
	return i, i < c.ml.endLocked() && c.ml.entries[i-c.ml.base].Position == pos
}

func (c *memoryCursor) MarkDelete(ctx context.Context, pos Position) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.markDeleteLocked(pos)
}

func (c *memoryCursor) markDeleteLocked(pos Position) error {
	if err := c.check(); err != nil {
		return err
	}
	i, ok := c.indexAtLocked(pos)
	if !ok {
		if pos.Compare(c.ml.positionLocked(c.ml.endLocked()-1)) > 0 {
			return fmt.Errorf("%s: cursor %s: mark-delete %v past the last entry: %w", c.ml.name, c.name, pos, ErrInvalidPosition)
		}
		i-- // a position between entries (trimmed): everything before it
	}
	if i > c.markDelete {
		c.markDelete = i
		c.normalise()
		c.ml.trimLocked()
	}
	return nil
}

func (c *memoryCursor) Delete(ctx context.Context, positions ...Position) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.check(); err != nil {
		return err
	}
	for _, p := range positions {
		i, ok := c.indexAtLocked(p)
		if !ok {
			if p.Compare(c.ml.positionLocked(c.ml.endLocked()-1)) > 0 {
				return fmt.Errorf("%s: cursor %s: ack of %v past the last entry: %w", c.ml.name, c.name, p, ErrInvalidPosition)
			}
			continue // trimmed: already gone
		}
		if i > c.markDelete {
			c.addAcked(i)
		}
	}
	c.normalise()
	c.ml.trimLocked()
	return nil
}

func (c *memoryCursor) IsAcknowledged(pos Position) bool {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	i, ok := c.indexAtLocked(pos)
	if !ok {
		return i <= c.ml.base // trimmed entries were acknowledged
	}
	return c.isAcked(i)
}

func (c *memoryCursor) Seek(pos Position) {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	c.read = max(c.ml.indexAtOrAfterLocked(pos), c.markDelete+1)
}

func (c *memoryCursor) Rewind() {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	c.read = c.markDelete + 1
}

func (c *memoryCursor) Reset(ctx context.Context, pos Position) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.check(); err != nil {
		return err
	}
	i := c.ml.indexAtOrAfterLocked(pos)
	c.resetTo(i)
	return nil
}

func (c *memoryCursor) Backlog() int64 {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return c.backlog(c.ml.base, c.ml.endLocked())
}

func (c *memoryCursor) Close(ctx context.Context) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	c.waiter = nil
	if !c.durable {
		delete(c.ml.nonDurable, c)
	}
	return nil
}

func (c *memoryCursor) BacklogSize() int64 {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	var n int64
	for i := max(c.markDelete+1, c.ml.base); i < c.ml.endLocked(); i++ {
		if !c.isAcked(i) {
			n += int64(len(c.ml.entries[i-c.ml.base].Data))
		}
	}
	return n
}

func (c *memoryCursor) SkipEntries(ctx context.Context, n int64) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.check(); err != nil {
		return err
	}
	c.skip(n, c.ml.base, c.ml.endLocked())
	c.ml.trimLocked()
	return nil
}

func (c *memoryCursor) ClearBacklog(ctx context.Context) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.check(); err != nil {
		return err
	}
	c.clear(c.ml.endLocked())
	c.ml.trimLocked()
	return nil
}
