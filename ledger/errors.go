package ledger

import "errors"

// Errors of ledger operations.
var (
	// ErrNoSuchLedger: no metadata for the ledger (never created, or deleted).
	ErrNoSuchLedger = errors.New("ledger: no such ledger")
	// ErrFenced: the ledger was fenced by a recovering reader; this writer
	// can add nothing more.
	ErrFenced = errors.New("ledger: fenced, another client recovered or is recovering it")
	// ErrClosed: the handle or the ledger is closed.
	ErrClosed = errors.New("ledger: closed")
	// ErrNotEnoughBookies: placement found fewer writable bookies than the
	// ensemble needs.
	ErrNotEnoughBookies = errors.New("ledger: not enough writable bookies")
	// ErrDigestMismatch: an entry failed verification (a damaged replica or
	// the wrong password).
	ErrDigestMismatch = errors.New("ledger: entry digest mismatch")
	// ErrReadBeyondLAC: a read of an open ledger past its last add
	// confirmed, which readers must never do.
	ErrReadBeyondLAC = errors.New("ledger: read beyond the last add confirmed")
	// ErrNoEntry: no replica has the entry.
	ErrNoEntry = errors.New("ledger: no such entry")
	// ErrRecoveryIncomplete: recovery could not decide the ledger's end
	// (too many bookies unreachable); retry later.
	ErrRecoveryIncomplete = errors.New("ledger: recovery could not reach enough bookies")
	// ErrAddTimeout is why a bookie that did not answer an add in time is
	// replaced.
	ErrAddTimeout = errors.New("ledger: add timed out")
	// ErrUnauthorized: wrong password for the ledger.
	ErrUnauthorized = errors.New("ledger: wrong password")
	// ErrEntryTooLarge: an append whose add request would be over the
	// bookies' frame limit (Config.MaxFrameSize). It is refused before it
	// is sent, takes no entry id and leaves the handle writable: no
	// bookie would ever store it, in this ledger or another.
	ErrEntryTooLarge = errors.New("ledger: entry too large for the bookies")
)
