package managedledger

// Cursor properties, as Pulsar's mark-delete properties: a small map of
// numbers stored with a cursor's position, written by the same throttled
// snapshots and recovered with it. The broker's deduplication keeps its
// snapshot (producer name → highest sequence id stored up to the
// position) in the properties of its own cursor, so that loading a topic
// replays only what was added after the last snapshot.
//
// The properties replace each other as a whole, like Pulsar's; they are
// recovered only from a snapshot in the cursor ledger (a cursor whose
// node is all that survived comes back without them: callers must then
// rebuild what they held from the stream).

import (
	"context"
	"fmt"
	"maps"
)

// MarkDeleteWithProperties implements Cursor: position and properties
// change under one lock, so a snapshot never pairs one call's position
// with another's properties.
func (c *bkCursor) MarkDeleteWithProperties(ctx context.Context, pos Position, props map[string]int64) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.markDeleteLocked(pos); err != nil {
		return err
	}
	c.props = maps.Clone(props)
	c.dirty = true
	c.ml.schedulePersistLocked()
	return nil
}

// Properties implements Cursor.
func (c *bkCursor) Properties() map[string]int64 {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return maps.Clone(c.props)
}

// MarkDeleteWithProperties implements Cursor.
func (c *memoryCursor) MarkDeleteWithProperties(ctx context.Context, pos Position, props map[string]int64) error {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	if err := c.markDeleteLocked(pos); err != nil {
		return err
	}
	c.props = maps.Clone(props)
	return nil
}

// Properties implements Cursor.
func (c *memoryCursor) Properties() map[string]int64 {
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	return maps.Clone(c.props)
}

// Flusher is a cursor that can make its state durable on demand: Flush
// returns once every change made before the call is persisted. The
// broker's transactions flush a subscription's cursor after applying a
// committed transaction's acknowledgements and before forgetting them
// (their only other record), since cursors persist in the background.
type Flusher interface {
	Flush(ctx context.Context) error
}

var (
	_ Flusher = (*bkCursor)(nil)
	_ Flusher = (*memoryCursor)(nil)
)

// Flush implements Flusher: persistCursor writes the state if it changed
// and is serialized with the background persists, so when it returns a
// persist that took the state before this call has finished too.
func (c *bkCursor) Flush(ctx context.Context) error {
	if !c.Durable() {
		return nil
	}
	if err := c.ml.persistCursor(ctx, c); err != nil {
		return err
	}
	c.ml.mu.Lock()
	defer c.ml.mu.Unlock()
	switch {
	case c.ml.mu.fenced != nil: // persistCursor wrote nothing: another owner has the cursor
		return fmt.Errorf("%s: cursor %s not persisted: %w", c.ml.name, c.name, c.ml.mu.fenced)
	case c.closed:
		return fmt.Errorf("%s: cursor %s not persisted: %w", c.ml.name, c.name, ErrClosed)
	}
	return nil
}

// Flush implements Flusher: memory keeps nothing past the process.
func (c *memoryCursor) Flush(context.Context) error { return nil }
