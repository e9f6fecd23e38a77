package broker

// Non-persistent topics (non-persistent://tenant/ns/topic), as in Pulsar:
// nothing is stored. A SEND is handed at once to one consumer of each
// subscription that has a permit for it, chosen by the subscription type
// (Exclusive and Failover: the active consumer; Shared: round-robin;
// Key_Shared: the key's consumer), and its receipt follows at once. A
// subscription whose consumers have no permits, or whose consumer's
// connection is congested, loses the message (counted as msgDrop); it is
// never queued in the broker. Acknowledgements, redelivery requests and
// seeks have nothing to act on. A subscription lives while it has
// consumers.
//
// The topic and subscription types are shared with persistent topics: the
// topic's stream is a streamOfNothing (every add succeeds at once at the
// next position, nothing can be read back, every cursor is a
// cursorOfNothing), so producers, access modes, limits, stats and the
// admin API work as for persistent topics, and subscription.push does the
// dispatching in place of cursor reads.

import (
	"context"
	"errors"
	"sync"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

var errNonPersistent = errors.New("not available on non-persistent topics")

// push hands an entry just published to the consumer that may take it
// now, or drops it. Called by the publishing connection, in its SEND
// order.
func (s *subscription) push(e managedledger.Entry) {
	info := entryInfoOf(e.Data)
	slot := int32(-1)
	if s.kind() == pb.CommandSubscribe_Key_Shared {
		slot = keySlot(info.key)
	}
	s.mu.Lock()
	var c *consumer
	if !s.closed {
		c = s.pickLocked(e.Position, info, slot)
	}
	if c == nil {
		s.mu.Unlock()
		s.topic.stats.msgsDropped.Add(int64(info.messages))
		return
	}
	c.permits -= int64(info.messages)
	s.mu.Unlock()
	s.topic.stats.msgsOut.Add(int64(info.messages))
	s.topic.stats.bytesOut.Add(int64(len(e.Data)))
	c.conn.sendMessage(c.id, e, wire.MessageHeader{})
}

// publishNonPersistent gives an entry to every subscription of a
// non-persistent topic.
func (t *topic) publishNonPersistent(e managedledger.Entry) {
	for _, s := range t.allSubs() {
		s.push(e)
	}
}

// streamOfNothing is a non-persistent topic's managed ledger: adds
// succeed at once and are not kept.
type streamOfNothing struct {
	name string

	mu   sync.Mutex
	next int64 // entry id of the next add
}

func newStreamOfNothing(name string) *streamOfNothing { return &streamOfNothing{name: name} }

func (n *streamOfNothing) Name() string { return n.name }

// AddEntry positions the entry (ledger 0, as Pulsar's non-persistent
// message ids; entry ids count up so that a topic's messages have
// distinct ids) and completes at once.
func (n *streamOfNothing) AddEntry(_ []byte, cb func(managedledger.Position, error)) {
	cb(n.take(), nil)
}

// AddEntryInPlace implements managedledger.ManagedLedger.
func (n *streamOfNothing) AddEntryInPlace(_ []byte, _ crc32c.Known, cb func(managedledger.Position, error)) {
	cb(n.take(), nil)
}

// Properties implements managedledger.ManagedLedger: a non-persistent
// topic keeps none.
func (n *streamOfNothing) Properties() map[string]string { return nil }

// UpdateProperties implements managedledger.ManagedLedger: refused, as
// Pulsar keeps topic properties in the managed ledger a non-persistent
// topic does not have.
func (n *streamOfNothing) UpdateProperties(context.Context, map[string]string, []string) error {
	return errNoProperties
}

var errNoProperties = errors.New("non-persistent topics have no properties")

// ResumeAdds implements managedledger.ManagedLedger: its adds never fail.
func (n *streamOfNothing) ResumeAdds() {}

func (n *streamOfNothing) take() managedledger.Position {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := managedledger.Position{LedgerID: 0, EntryID: n.next}
	n.next++
	return p
}

func (n *streamOfNothing) OpenCursor(_ context.Context, name string, _ managedledger.CursorOptions) (managedledger.Cursor, error) {
	return &cursorOfNothing{name: name, durable: true}, nil
}

func (n *streamOfNothing) NewNonDurableCursor(managedledger.Position) (managedledger.Cursor, error) {
	return &cursorOfNothing{}, nil
}

func (n *streamOfNothing) DeleteCursor(context.Context, string) error { return nil }
func (n *streamOfNothing) Cursors() []managedledger.Cursor            { return nil }

func (n *streamOfNothing) ReadEntry(context.Context, managedledger.Position) (managedledger.Entry, error) {
	return managedledger.Entry{}, managedledger.ErrInvalidPosition
}

func (n *streamOfNothing) ReadEntriesAt(context.Context, []managedledger.Position) ([]managedledger.Entry, error) {
	return nil, nil
}

// LastConfirmed is "before the first entry": nothing can be read.
func (n *streamOfNothing) LastConfirmed() managedledger.Position {
	return managedledger.Position{LedgerID: -1, EntryID: -1}
}

func (n *streamOfNothing) FindFirst(context.Context, func(managedledger.Entry) (bool, error)) (managedledger.Position, bool, error) {
	return managedledger.Position{LedgerID: -1, EntryID: 0}, false, nil
}

func (n *streamOfNothing) Entries() int64                       { return 0 }
func (n *streamOfNothing) Size() int64                          { return 0 }
func (n *streamOfNothing) SetRetention(managedledger.Retention) {}
func (n *streamOfNothing) Terminated() bool                     { return false }

func (n *streamOfNothing) Terminate(context.Context) (managedledger.Position, error) {
	return managedledger.Position{}, errNonPersistent
}

func (n *streamOfNothing) Close(context.Context) error { return nil }

// cursorOfNothing is a subscription position on a stream of nothing.
type cursorOfNothing struct {
	name    string
	durable bool
}

func (c *cursorOfNothing) Name() string  { return c.name }
func (c *cursorOfNothing) Durable() bool { return c.durable }

func (c *cursorOfNothing) ReadEntries(context.Context, int, int64) ([]managedledger.Entry, error) {
	return nil, nil
}

// ReadEntriesOrWait never completes: push delivers instead.
func (c *cursorOfNothing) ReadEntriesOrWait(int, int64, func([]managedledger.Entry, error)) {}
func (c *cursorOfNothing) CancelPendingRead() bool                                          { return true }

func (c *cursorOfNothing) ReadPosition() managedledger.Position {
	return managedledger.Position{LedgerID: -1, EntryID: 0}
}

func (c *cursorOfNothing) MarkDeletePosition() managedledger.Position {
	return managedledger.Position{LedgerID: -1, EntryID: -1}
}

func (c *cursorOfNothing) MarkDelete(context.Context, managedledger.Position) error { return nil }
func (c *cursorOfNothing) Delete(context.Context, ...managedledger.Position) error  { return nil }
func (c *cursorOfNothing) IsAcknowledged(managedledger.Position) bool               { return true }
func (c *cursorOfNothing) Seek(managedledger.Position)                              {}
func (c *cursorOfNothing) Rewind()                                                  {}
func (c *cursorOfNothing) Reset(context.Context, managedledger.Position) error {
	return errNonPersistent
}
func (c *cursorOfNothing) Backlog() int64                              { return 0 }
func (c *cursorOfNothing) BacklogSize() int64                          { return 0 }
func (c *cursorOfNothing) SkipEntries(context.Context, int64) error    { return nil }
func (c *cursorOfNothing) ClearBacklog(context.Context) error          { return nil }
func (c *cursorOfNothing) BatchAckSet(managedledger.Position) []uint64 { return nil }
func (c *cursorOfNothing) Close(context.Context) error                 { return nil }

func (c *cursorOfNothing) MarkDeleteWithProperties(context.Context, managedledger.Position, map[string]int64) error {
	return nil
}

func (c *cursorOfNothing) Properties() map[string]int64 { return nil }

func (c *cursorOfNothing) AckBatchIndexes(context.Context, managedledger.Position, []uint64, bool) error {
	return nil
}
