package entrylog

import (
	"errors"

	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Errors of the Storage contract. Corruption is never one of these: a
// record that fails its checksum or cannot be decoded is reported as an
// error wrapping engine.ErrCorruption, naming the file and offset, so that
// nobody mistakes damaged data for data that was never written (BookKeeper
// #2908 truncated ledgers that way).
var (
	// ErrNoLedger: the storage holds no state for this ledger (never
	// written here, or deleted).
	ErrNoLedger = errors.New("entrylog: no such ledger")
	// ErrNoEntry: the ledger exists here but this entry was never stored.
	ErrNoEntry = errors.New("entrylog: no such entry")
	// ErrClosed: the storage was closed.
	ErrClosed = errors.New("entrylog: closed")
	// ErrFailed: an earlier write or sync failed; the storage stopped
	// accepting changes (fail-stop) and must be reopened.
	ErrFailed = errors.New("entrylog: storage failed")
	// ErrNoSpace: a flush (or compaction) found the disk full on a
	// preallocation, a new entry log or a write, before anything was
	// committed. Nothing is lost and the storage is not failed: the
	// entries stay in the write cache (readable) and the next flush writes
	// them again. Full disks are a state to wait out, not a fault.
	ErrNoSpace = errors.New("entrylog: out of space")
)

// SpaceFunc is asked before each entry-log preallocation in dir how many
// bytes to allocate: want is the configured step already capped to a
// share of the free space, need the least the next write requires. It
// returns at most want; fewer than need refuses (return an error wrapping
// ErrNoSpace to say why). The bookie checks its disk thresholds there.
type SpaceFunc func(dir string, need, want int64) (int64, error)

// Spacer is a Checkpointer that also decides preallocations (the
// bookie's): Open uses its Space when Options.Space is nil.
type Spacer interface {
	Space(dir string, need, want int64) (int64, error)
}

// Checkpoint is an opaque journal position handed from a Checkpointer back
// to it once a flush covering it is durable.
type Checkpoint any

// Checkpointer ties ledger storage to the write-ahead journal. The bookie
// adds every entry and state change to Storage before it adds it to the
// journal; so when StartCheckpoint returns a journal position P, everything
// the journal holds before P is already in Storage, and a flush that starts
// after StartCheckpoint returned makes all of it durable here. Only then
// CompleteCheckpoint(P) lets the journal drop what precedes P.
type Checkpointer interface {
	StartCheckpoint() Checkpoint
	CompleteCheckpoint(Checkpoint) error
}

// SummedAdder is a Storage that can take an entry's CRC32C from the
// caller instead of reading the entry again for its record checksum: a
// bookie that has the CRC (from the ledger client in the same process, or
// from its own check of an add) passes it on, so each byte is summed once
// on the write path. sum, if known, must be the data's; a wrong one stores a record
// every read rejects as corrupt. Wrappers that embed a Storage do not
// have it, so their AddEntry hooks still run.
type SummedAdder interface {
	AddEntrySummed(ledgerID, entryID int64, data []byte, sum crc32c.Known) error
}

// KeepingAdder is a SummedAdder that can also keep an entry's data itself
// until the entry is flushed, instead of copying it: for callers that
// never change data after the add. The bookie's adds are such: its server
// copies every request out of the connection's buffer, and the ledger
// client in the same process encodes each entry once and only ever sends
// those bytes again.
type KeepingAdder interface {
	SummedAdder
	AddEntryKept(ledgerID, entryID int64, data []byte, sum crc32c.Known) error
}

// KeepingStorage is a Storage that is a KeepingAdder (DB).
type KeepingStorage interface {
	Storage
	KeepingAdder
}

// Storage is a bookie's ledger storage: entries by (ledger id, entry id)
// plus a little state per ledger. It is not the write-ahead log: an entry
// added here becomes durable only at the next Flush, and the bookie
// acknowledges adds only once the journal has them. Safe for concurrent use.
//
// Entry data is opaque here; AddEntry copies it, and slices returned by
// ReadEntry are owned by the caller (they may be shared with a cache, so
// they must not be modified).
type Storage interface {
	// SetMasterKey creates the ledger's state with this master key if the
	// ledger is new, and sets the key of a ledger that has none yet (one
	// created by AddEntry); an existing key never changes (the bookie
	// compares keys itself, before calling). On a deleted ledger it does
	// nothing: LedgerExists stays false.
	SetMasterKey(ledgerID int64, key []byte) error
	// MasterKey returns the key the ledger was created with; ErrNoLedger.
	MasterKey(ledgerID int64) ([]byte, error)
	// SetFenced marks the ledger fenced and reports whether it already
	// was; ErrNoLedger if the ledger has no state.
	SetFenced(ledgerID int64) (alreadyFenced bool, err error)
	// IsFenced reports the fenced flag; ErrNoLedger.
	IsFenced(ledgerID int64) (bool, error)
	// SetExplicitLAC stores the last explicit LAC a writer sent (opaque
	// bytes in the client's entry format); ErrNoLedger.
	SetExplicitLAC(ledgerID int64, lac []byte) error
	// ExplicitLAC returns it, or nil if none was set; ErrNoLedger.
	ExplicitLAC(ledgerID int64) ([]byte, error)
	// LedgerExists reports whether the ledger has state here.
	LedgerExists(ledgerID int64) (bool, error)

	// AddEntry stores an entry, creating ledger state (with no master
	// key) if there is none. Adding an entry that exists again replaces it
	// (journal replay re-adds what a crash may have left unflushed). On a
	// deleted ledger it does nothing: ledger ids are never reused, so this
	// is a replayed or stale write, and it must not bring the ledger back.
	AddEntry(ledgerID, entryID int64, data []byte) error
	// ReadEntry returns an entry; ErrNoLedger, ErrNoEntry, or corruption.
	ReadEntry(ledgerID, entryID int64) ([]byte, error)
	// LastEntryID returns the highest entry id stored for the ledger;
	// ErrNoLedger, or ErrNoEntry when the ledger has no entries.
	LastEntryID(ledgerID int64) (int64, error)
	// DeleteLedger drops the ledger's state and entries; its space is
	// reclaimed by garbage collection. A deleted ledger never comes back:
	// reads of it fail with ErrNoLedger from the moment this returns,
	// even after a crash and restart. Deleting an unknown ledger is not an
	// error.
	DeleteLedger(ledgerID int64) error
	// Ledgers calls fn for every ledger with state here, in ascending id
	// order, until fn returns false.
	Ledgers(fn func(ledgerID int64) bool) error

	// Flush makes every entry and state change made before the call
	// durable, then completes a checkpoint (see Checkpointer).
	Flush() error
	// Close flushes and releases everything. Later calls fail with
	// ErrClosed.
	Close() error
}
