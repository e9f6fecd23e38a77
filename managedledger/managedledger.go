// Package managedledger is the storage of a topic: one append-only stream
// of entries (a sequence of ledgers) with any number of cursors, each a
// subscription's position. managedledger.go is the contract the broker
// uses; bk*.go implement it over the ledger client (what brokers and
// standalone run), memory*.go in memory (broker tests).
//
// Positions are (ledger id, entry id) and increase along the stream. A
// cursor has a read position (the next entry to dispatch), a mark-delete
// position (everything at or before it is acknowledged) and a set of
// individually acknowledged entries after the mark-delete position, as
// Pulsar's ManagedCursor; for partly acknowledged batch entries it keeps
// the batch's ack set (batchack.go).
//
// # Metadata of the ledger-backed implementation (JSON)
//
//	/managed-ledgers/<name>            {"ledgers":[{"ledgerId","entries","size","timestamp",
//	                                                 "offload":{"uid","driver","complete",
//	                                                   "bookkeeperDeleted","timestamp"}}...],
//	                                    "properties":{...},"terminatedPosition":{...}}
//	/managed-ledgers/<name>/<cursor>   {"cursorsLedgerId","markDeletePosition","lastActive",
//	                                    "individualDeletedMessages":[[lo, hi]...],  first 1000
//	                                    "batchedEntryDeletionIndexInfo":[...],      4096 words
//	                                    "properties":{...}}
//
// Both are changed by compare-and-set only. The managed ledger's node is
// written by its owner; a version conflict means another broker opened it
// (and recovered, so fenced, this owner's ledger): the old owner stops.
// A cursor's state is a snapshot appended to its cursor ledger at most
// MarkDeleteRate times a second and when the managed ledger closes; the
// node points at the cursor ledger, and the last snapshot in it wins on
// reopen. A close whose cursor ledger does not answer within a quarter of
// CloseTimeout (a silent bookie) writes the state to the node instead, as
// Pulsar's cursor does to its metadata store: "cursorsLedgerId" -1, and
// the node's ranges, batch sets (same shapes as below) and properties are
// the cursor's state on reopen. A snapshot:
//
//	{"markDelete":{"LedgerID","EntryID"},
//	 "individuallyDeleted":[[lo, hi]...],                  first 10000 ranges
//	 "batchDeletedIndexes":[{"ledgerId","entryId",         first 10000 sets,
//	                         "ackSet":[word...]}...],      65536 words in all
//	 "properties":{"name":number...}}                      properties.go
//
// individuallyDeleted lists acknowledged ranges after markDelete (both
// ends positions). batchDeletedIndexes lists the partly acknowledged
// batch entries, in position order, each with the still-unacknowledged
// bits of its messages (ack_set; word i bit j is message 64*i+j, trailing
// zero words dropped). Both are optional (older snapshots lack the
// second) and bounded (managedLedgerMaxUnackedRangesToPersist,
// managedLedgerMaxBatchDeletedIndexToPersist): what is left out is
// redelivered after a reopen, never lost.
//
// # Non-obvious
//
//   - Opening recovers the last ledger before writing a new one: that is
//     what makes a takeover safe, and it fixes the last ledger's count.
//   - A write failure does not lose order: the failed writer's adds come
//     back in order, the ledger is recovered (entries that did land are
//     confirmed, not written twice), and the rest go to the next ledger
//     before anything added meanwhile. If that fails, adds stop
//     (ErrAddsStopped) until the owner resumes them: a later add never
//     lands after an earlier one failed.
//   - Cursors keep global entry indices in memory (ackState) and persist
//     positions, so trimming never renumbers what is stored.
//   - Trimming: closed ledgers every durable cursor has consumed go once
//     retention lets them. With no durable cursor every closed ledger is
//     consumed (as in Pulsar: a topic without subscriptions keeps only
//     what retention asks for, plus the current ledger); readers
//     (non-durable cursors) do not hold ledgers and are moved past what
//     goes. The in-memory implementation follows the same rule, so a long
//     run on --storage memory holds only what cursors and retention need.
package managedledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/ledger"
)

// EntryHeadroom is the scratch AddEntryInPlace wants in front of an
// entry (the ledger entry header and digest).
const EntryHeadroom = ledger.Headroom

// WithHeadroom returns a copy of entry with EntryHeadroom bytes of scratch
// in front of it, for AddEntryInPlace: the publish path's one copy of a
// message's bytes. Made by append, which leaves the bytes it copies
// unzeroed; make would clear the whole buffer first, as much work again
// as the copy for a large entry.
func WithHeadroom(entry []byte) []byte {
	var head [EntryHeadroom]byte
	return append(head[:], entry...)
}

// Position is an entry's place in the stream.
type Position struct {
	LedgerID, EntryID int64
}

// Compare orders positions: -1, 0 or +1.
func (p Position) Compare(o Position) int {
	switch {
	case p.LedgerID < o.LedgerID:
		return -1
	case p.LedgerID > o.LedgerID:
		return 1
	case p.EntryID < o.EntryID:
		return -1
	case p.EntryID > o.EntryID:
		return 1
	}
	return 0
}

func (p Position) String() string { return fmt.Sprintf("%d:%d", p.LedgerID, p.EntryID) }

// Entry is one stored entry: the bytes the producer sent, unchanged.
type Entry struct {
	Position Position
	Data     []byte
}

// InitialPosition is where a new cursor starts.
type InitialPosition int

const (
	// Latest: only entries added after the cursor is created.
	Latest InitialPosition = iota
	// Earliest: the first entry still stored.
	Earliest
)

// CursorOptions configure OpenCursor.
type CursorOptions struct {
	// Initial applies only when the cursor does not exist yet.
	Initial InitialPosition
}

// Retention keeps ledgers every durable cursor has consumed (Pulsar's
// RetentionPolicies). A consumed ledger is deleted once it is older than
// Time or the stored size is above Size, whichever comes first; a
// negative value sets no limit in that dimension, so both negative keep
// everything; both zero (the default) delete a ledger as soon as it is
// consumed. The ledger being written is never deleted.
type Retention struct {
	Time time.Duration
	Size int64
}

// expired reports whether a consumed ledger closed at closed (unix ms)
// may go, with retained bytes stored before deleting it.
func (r Retention) expired(now time.Time, closedMS, retained int64) bool {
	old := r.Time >= 0 && now.Sub(time.UnixMilli(closedMS)) >= r.Time
	big := r.Size >= 0 && retained > r.Size
	return old || big
}

// Errors; test with errors.Is.
var (
	ErrClosed          = errors.New("managedledger: closed")
	ErrTerminated      = errors.New("managedledger: topic terminated")
	ErrCursorNotFound  = errors.New("managedledger: cursor not found")
	ErrInvalidPosition = errors.New("managedledger: invalid position")
	ErrInvalidAckSet   = errors.New("managedledger: invalid ack set")
	// ErrInvalidName: a managed-ledger name outside the stored layout
	// (names.go).
	ErrInvalidName = errors.New("managedledger: invalid name")
	// ErrAddsStopped: an earlier add failed, and adds are refused until
	// the owner calls ResumeAdds.
	ErrAddsStopped = errors.New("managedledger: an earlier add failed; adds stopped until the owner resumes them")
)

// CreationTimer is implemented by managed ledgers that know when they
// were created (Pulsar's topicCreationTimeStamp: the metadata node's
// creation time).
type CreationTimer interface {
	CreatedAt() time.Time
}

// ManagedLedger is one topic's stream. Safe for concurrent use.
type ManagedLedger interface {
	// Name is the managed ledger's name (tenant/namespace/persistent/topic).
	Name() string
	// AddEntry appends data (which the ledger keeps; the caller must not
	// change it) and calls cb with its position once durable. Callbacks
	// run in append order.
	//
	// Nothing is stored after an add that failed: when an add fails (a
	// write failure the managed ledger could not recover from), every
	// add after it fails too, and later ones with ErrAddsStopped until
	// ResumeAdds. So a producer's message N+1 is never stored after N
	// failed unless the owner allows it, once it knows what was stored.
	// (An entry refused for its size fails alone: it can never be
	// stored, so nothing overtakes it.)
	AddEntry(data []byte, cb func(Position, error))
	// AddEntryInPlace is AddEntry for buf[EntryHeadroom:], the
	// EntryHeadroom bytes in front of it being scratch the storage may use
	// to encode the entry without copying it (the broker's publish path).
	// buf is the storage's, as data is AddEntry's. sum is the CRC32C of
	// buf[EntryHeadroom:] if the caller has it (the broker, from the
	// producer's verified checksum): storage builds its checksums from it
	// rather than reading the data again. It must be right: a wrong one
	// makes the entry unreadable.
	AddEntryInPlace(buf []byte, sum crc32c.Known, cb func(Position, error))
	// ResumeAdds accepts adds again after a failed one (ErrAddsStopped).
	// The broker calls it once every add it made before the failure has
	// called back and its producers must reconnect (Pulsar's topic fence).
	ResumeAdds()
	// OpenCursor opens a durable cursor, creating it if needed.
	OpenCursor(ctx context.Context, name string, opts CursorOptions) (Cursor, error)
	// NewNonDurableCursor makes a cursor that is not persisted (readers);
	// it starts reading at the first entry after start.
	NewNonDurableCursor(start Position) (Cursor, error)
	// DeleteCursor removes a durable cursor (unsubscribe).
	DeleteCursor(ctx context.Context, name string) error
	// Cursors lists the open cursors.
	Cursors() []Cursor
	// ReadEntry reads the stored entry at pos (ErrInvalidPosition if
	// there is none).
	ReadEntry(ctx context.Context, pos Position) (Entry, error)
	// ReadEntriesAt reads the stored entries at positions, in position
	// order, reading runs of consecutive entries together (readat.go);
	// positions not stored (trimmed, or never written) are left out.
	ReadEntriesAt(ctx context.Context, positions []Position) ([]Entry, error)
	// LastConfirmed is the position of the last entry added, or the
	// position just before the first entry when the stream is empty.
	LastConfirmed() Position
	// Entries and Size count what is stored (not yet trimmed).
	Entries() int64
	Size() int64
	// SetRetention replaces the retention (namespace policies) and trims
	// by it soon, also when no acknowledgement would trigger a trim.
	SetRetention(r Retention)
	// Terminated reports whether the stream was terminated (also by an
	// earlier owner: the state is stored with the managed ledger).
	Terminated() bool
	// Terminate stops the stream: later adds fail with ErrTerminated.
	Terminate(ctx context.Context) (Position, error)
	// Properties are the managed ledger's labels (Pulsar's managed
	// ledger properties; the broker's topic properties), kept in its
	// metadata node: nil when none.
	Properties() map[string]string
	// UpdateProperties sets the keys of set and removes those of remove
	// in one metadata write.
	UpdateProperties(ctx context.Context, set map[string]string, remove []string) error
	// Close releases the ledger; pending reads fail with ErrClosed.
	Close(ctx context.Context) error
	// FindFirst returns the position of the first stored entry for which
	// match returns true, assuming match is monotonic along the stream
	// (false ... false true ... true, as "published at or after t" is for
	// publish times that only grow); it reads O(log n) entries by binary
	// search over the stored entries across ledgers. When no entry matches
	// it returns the position just after the last entry (found=false):
	// LastConfirmed with EntryID+1, which Reset takes as "read from the
	// next entry added". match runs with no lock held; its error (or
	// ctx's) ends the search.
	FindFirst(ctx context.Context, match func(Entry) (bool, error)) (pos Position, found bool, err error)
}

// Cursor is a position in the stream. Safe for concurrent use.
type Cursor interface {
	Name() string
	Durable() bool
	// ReadEntries returns up to n entries (and at most about maxBytes,
	// never less than one entry) from the read position and advances it
	// past them. It returns none when the cursor has caught up.
	ReadEntries(ctx context.Context, n int, maxBytes int64) ([]Entry, error)
	// ReadEntriesOrWait is ReadEntries that, when caught up, waits for the
	// next add and then calls cb (once) without polling.
	ReadEntriesOrWait(n int, maxBytes int64, cb func([]Entry, error))
	// CancelPendingRead cancels a waiting ReadEntriesOrWait; it reports
	// whether one was cancelled (its callback is then never called).
	CancelPendingRead() bool
	// ReadPosition is the next entry ReadEntries returns.
	ReadPosition() Position
	// MarkDeletePosition: everything at or before it is acknowledged.
	MarkDeletePosition() Position
	// MarkDelete acknowledges everything at or before pos (cumulative).
	MarkDelete(ctx context.Context, pos Position) error
	// MarkDeleteWithProperties is MarkDelete that also replaces the
	// properties stored with the cursor (properties.go).
	MarkDeleteWithProperties(ctx context.Context, pos Position, props map[string]int64) error
	// Properties are those of the last MarkDeleteWithProperties, as
	// recovered (nil if none).
	Properties() map[string]int64
	// Delete acknowledges individual entries.
	Delete(ctx context.Context, positions ...Position) error
	// IsAcknowledged reports whether pos was acknowledged.
	IsAcknowledged(pos Position) bool
	// Seek moves the read position (redelivery rewinds with it).
	Seek(pos Position)
	// Rewind moves the read position to the first unacknowledged entry.
	Rewind()
	// Reset moves both positions so that pos is the next entry read and
	// everything before it counts as acknowledged (subscription seek).
	Reset(ctx context.Context, pos Position) error
	// Backlog is the number of stored entries not yet acknowledged.
	Backlog() int64
	// BacklogSize is the bytes of the backlog (estimated from average
	// entry sizes where entries are not in memory).
	BacklogSize() int64
	// SkipEntries acknowledges the next n unacknowledged entries
	// (pulsar-admin topics skip).
	SkipEntries(ctx context.Context, n int64) error
	// ClearBacklog acknowledges every stored entry (clear-backlog).
	ClearBacklog(ctx context.Context) error
	// AckBatchIndexes acknowledges some messages of the batch entry at pos.
	// ackSet is the protocol's ack_set: a little-endian bit set over the
	// batch's messages (word i bit j = message 64*i+j) where a SET bit means
	// the message is still unacknowledged. The cursor keeps, per partly
	// acknowledged entry, the AND of every ack set it was given; once no bit
	// is left the entry is acknowledged as by Delete. With cumulative true,
	// every entry before pos is acknowledged too (mark-delete moves to the
	// entry before pos) and pos keeps its ack set.
	AckBatchIndexes(ctx context.Context, pos Position, ackSet []uint64, cumulative bool) error
	// BatchAckSet returns a copy of the still-unacknowledged bits of a partly
	// acknowledged batch entry, or nil when no ack set is kept for pos (none
	// of its messages was acknowledged individually, or all were).
	BatchAckSet(pos Position) []uint64
	Close(ctx context.Context) error
}
