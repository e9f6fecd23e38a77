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
