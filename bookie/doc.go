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
// # TLS: a second port, not START_TLS
//
// BookKeeper encrypts on its one port: a client sends START_TLS and both
// sides switch the connection to TLS. Our plaintext port runs on gnet's
// event loops, which cannot hand a connection to a TLS stack halfway, so a
// bookie serves TLS on a port of its own (bookiePortTls, our extension;
// tlsserve.go): Go's crypto/tls (whatever tlsProvider says), a reader and a
// writer goroutine per connection, feeding the same handleFrame and worker
// queues through the peer interface, so there is one protocol handler. The
// port is published as Registration.TLSAddress, as BookKeeper publishes a
// BookieServiceInfo endpoint with the "tls" extension; a client configured
// for TLS dials only that endpoint and fails naming the bookie when there
// is none. The plaintext port stays for clients without TLS unless the
// operator turns it off (bookiePort empty). With tlsClientAuthentication a
// client must present a certificate from tlsTrustStore; a handshake that
// fails (that, plaintext, garbage) costs only its connection and is logged
// with the remote address.
//
// # Threads and lock rules
//
// netio event loops (and the TLS port's reader goroutines) decode frames
// and hand requests to bounded worker queues (adds by ledger id, so one ledger's adds stay in order; reads to
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
