// Package bookie is a BookKeeper-style storage node: it stores the entries
// of ledgers that ledger clients write to it, answers reads, and takes part
// in fencing so that a recovering client can close a ledger its old writer
// may still be writing to. The protocol is wire/bkproto (docs/protocols.md
// describes it); storage is an entrylog.Storage behind a journal.Set.
//
// # Write path
//
// An add is checked (master key, fenced flag, entry head) and, under the
// ledger's stripe lock, stored in ledger storage and queued on the ledger's
// journal. It is answered when the journal has made it durable (or at once
// with FlagDeferredSync). Storing before journaling is what makes the
// journal's checkpoint safe: whatever precedes a journal mark is already in
// ledger storage when the mark is taken, so a storage flush that starts
// after it covers it (entrylog.Checkpointer).
//
// # Fencing
//
// A fencing read marks the ledger fenced and journals a fence record under
// the same stripe lock that adds hold while they check the flag, store and
// queue. So every add that passed the check is in storage before the fence
// is set, and its journal record precedes the fence record in the ledger's
// journal: the fence is answered only after those adds are durable, and the
// recovery reads that follow see them (BookKeeper #4701 acknowledged an add
// that recovery did not see). An add that finds the flag set fails with
// StatusFenced unless it is a recovery add. The fence record makes the
// fence survive a restart (the journal is replayed into storage).
//
// A fencing read of a ledger this bookie has never seen creates its state
// with the reader's master key and fences it: otherwise the old writer
// could still add to it here after recovery decided the ledger's end.
//
// # Journal meta records
//
// State changes travel through the journal as records with negative entry
// ids, as in BookKeeper: metaMasterKey (the key, journaled when a ledger is
// first seen), metaFence, metaExplicitLAC (8-byte LAC then the client's
// bytes) and metaForce (a barrier for OpForceLedger). Replay applies them
// to storage in journal order.
//
// # Full disks
//
// Read-only is a state, not only a failure. The disk check (disk.go) runs
// every DiskCheckInterval and before each journal and entry-log
// preallocation, over every journal and ledger directory: one past
// DiskUsageThreshold makes the bookie read-only for lack of space, and it
// turns writable by itself once all are below DiskUsageLwmThreshold. An
// ENOSPC met on a preallocation, a new file or a write before its sync
// (journal.ErrNoSpace, entrylog.ErrNoSpace) does the same: nothing
// acknowledged was lost, the journal and storage go on once space is
// freed. A failed sync (and any other error) fails writes for good, until
// restarted. Adds refused either way are answered StatusReadOnly
// (BookKeeper's EREADONLY); ReadOnly's reason starts with OutOfSpaceReason,
// OpInfo sets InfoOutOfSpace. Journal growth never takes the last 2% of a
// disk (at most 64 MiB): a reserve for checkpoints and storage flushes.
//
// # Threads and lock rules
//
// netio event loops decode frames and hand requests to bounded worker
// queues (adds by ledger id, so one ledger's adds stay in order; reads to
// any reader); handlers never block a loop. When a queue is full the
// connection stops reading until the request is queued: back-pressure,
// not rejection. Journal callbacks answer adds on the journal's goroutine.
//
// Lock order: stripe lock (one of a fixed set, by ledger id) -> lacs.mu.
// A stripe lock is held across storage calls and journal.Add (both may
// wait for space: that wait is the back-pressure), never across a network
// write. lacs.mu is never held while calling out, except to hand finished
// long polls their answer after it is released.
package bookie
