// Package entrylog is a bookie's ledger storage: where entries live once
// the journal has them, modelled on BookKeeper's DbLedgerStorage. Storage
// is the contract, Memory an in-memory implementation, and DB the real one:
// entry logs written through an engine.FS, an index in Pebble, a
// double-buffered write cache and a read cache with read-ahead.
//
// # Layout (format version 1; the constants in format.go are frozen)
//
// DB opens one independent storage per ledger directory (one per disk) and
// sends ledger L to directory L mod len(dirs). Each directory holds:
//
//	<dir>/0000000000000001.elog    entry logs, named by a 16-digit hex id
//	<dir>/0000000000000002.elog    (ids are never reused while referenced)
//	<dir>/index/                   Pebble: the entry index and ledger state
//
// An entry log is preallocated to LogSizeLimit and written sequentially;
// a new one starts when the next record would pass the limit. Records are
// never rewritten: after a restart a new log is started.
//
//	entry log: | header block (4096) | record | record | ... | padding | record | ... | (preallocated)
//
// Written with direct I/O (the default; Options.BufferedWrites), every
// flush or compaction write ends with zeros up to the next 4096-byte
// boundary, and the next one starts there: a direct write covers whole
// blocks, and no block holding a record that may be committed is ever
// written again (a torn rewrite could damage it). Readers find records only
// through the index, so padding is never parsed; a log written buffered has
// none, and both kinds read the same. Logs written direct are read direct
// too (the whole blocks around a run of records; their pages are never in
// the page cache, and a buffered read would fill new ones), compaction's
// reads included; buffered logs are read through the page cache.
//
//	header block:
//	  0  magic        [8]byte  "MGENTLOG"
//	  8  version      uint32   1
//	 12  crc          uint32   CRC32C of bytes 16..40
//	 16  logID        uint64   equals the id in the file's name
//	 24  created      int64    unix nanoseconds
//	 32  recordHeader uint32   24
//	 36  reserved     uint32   0
//	 40  zero padding to 4096
//
//	record:
//	  0  length    uint32  payload bytes (at most MaxEntrySize)
//	  4  crc       uint32  CRC32C of bytes 0..4, 8..24 and the payload
//	  8  ledgerID  int64
//	 16  entryID   int64
//	 24  payload
//
// Integers in the files are little-endian. Index keys are big-endian with
// the sign bit flipped (ids sort as int64s), so a ledger's entries are
// contiguous and its last entry is a reverse seek:
//
//	key                          value
//	"#format"                    1 byte: 1
//	'e' ledger(8) entry(8)       location: logID uint64, offset uint64 (of the
//	                             record header), length uint32 (payload);
//	                             20 bytes, little-endian
//	'l' ledger(8)                ledger state: version 1, flags (1 fenced,
//	                             2 has master key, 4 has explicit LAC), then
//	                             uvarint-length-prefixed key and LAC if present
//	'd' ledger(8)                tombstone (empty): the ledger was deleted
//	'm' logID(8) ledger(8)       uint64: bytes of the ledger's committed records
//	                             in that log (log usage, for GC)
//
// A read decodes the record at the index's location and checks its
// checksum, its length and that it holds the entry asked for; any mismatch
// is an error matching engine.ErrCorruption that names the file and offset,
// never ErrNoEntry. Open checks every used log's header and that it is at
// least as long as the index says; a log the index uses that is missing,
// or an index without its format key, is corruption too.
//
// # Flush order, and why the index never points at lost bytes
//
// AddEntry copies the entry into the active half of the write cache
// (AddEntryKept, the bookie's, copies only the record header and keeps the
// caller's bytes, which never change, until the half is flushed). A
// flush (Flush, every FlushInterval, or as soon as a half fills):
//
//  1. cp := Checkpointer.StartCheckpoint(), before any half is swapped, so
//     everything the journal holds before cp is already in the cache;
//  2. swaps the halves and writes the full one's records, sorted by
//     (ledger, entry), with large vectored writes into the current log;
//  3. datasyncs the log (sealing a full log syncs it too);
//  4. commits the index (locations and log usage) in batches of up to
//     commitChunk entries, each whole on its own, the last synced;
//  5. releases the half (reads found the entries there until now);
//  6. once every directory has done 1-5: CompleteCheckpoint(cp).
//
// So an index entry is durable only after its bytes are, and the journal
// is trimmed only past what is durable here. Records written but not
// committed when the process dies are never referenced: the journal still
// has those entries and replays them. On the next Open, logs with no
// committed record at all are removed; other unreferenced bytes are
// garbage that compaction reclaims.
//
// Ledger state changes (creation, master key, fencing, explicit LAC) are
// written to Pebble unsynced as they happen; Pebble's log is written in
// order, so the next synced commit (a flush's, or a WAL sync that Flush
// issues when it had nothing else to commit) makes them durable: no later
// than the Flush that follows them.
//
// # Deleted ledgers
//
// DeleteLedger removes the ledger's state, range-deletes its index entries
// and writes a tombstone, in one batch synced before it returns. Ledger ids
// are never reused in a cluster, so a tombstoned ledger stays deleted
// forever: AddEntry and SetMasterKey on it are silently ignored. That is
// what keeps journal replay after a restart (which re-adds entries
// journaled before the delete) from bringing the ledger back. Tombstones
// are 9-byte keys that are never removed. Flushes and compaction check
// ledger state under the same lock (indexMu) as DeleteLedger's commit, so
// no entry of a deleted ledger is committed after its range deletion.
//
// # Garbage collection and the stale-location rule
//
// Log usage ('m' keys, kept in memory too) counts, per log and ledger, the
// bytes of committed records; a log's live bytes are those of ledgers that
// still exist (an upper bound: replaced entries still count). GC considers
// sealed logs only, chosen while holding writeMu, which every flush holds
// from its first write to its index commit: so no commit into a sealed log
// is still to come, and a log's live bytes can only shrink. A log with no
// live bytes is dropped: its usage keys are deleted (synced), then the
// file. A log under the compaction threshold is compacted: its live
// records (found through the index) are read and checked, appended to the
// current log, synced, and their index entries moved by compare-and-set,
// only where the index still holds the old location, so a newer add or a
// deletion wins; then the log is dropped as above.
//
// The rule that keeps readers safe: a log leaves the set of open logs only
// after a synced index commit removed every entry pointing into it, and
// its file is closed and removed only after every reader that pinned it
// has finished. A reader pins the log named by the location it read from
// the index before reading it; if the log is gone it looks the entry up
// again, and the new lookup sees the commit that moved or deleted it. If
// the index still gives the same location for a log that is not open, that
// is corruption. Cached entries are never stale: the read cache is cleared
// of every entry a flush commits, and a read that looked the index up
// before a flush does not insert what it read.
//
// # Failures
//
// A failed write, sync, create, preallocation or index commit stops the
// storage: every later change (and Flush, GC) fails with ErrFailed wrapping
// the first cause, in every directory, until it is reopened; reads go on.
// Except a full disk: ENOSPC on a preallocation, a new log or a write
// (never a sync) fails that flush or compaction with ErrNoSpace and
// nothing else; the half stays in the write cache (readable), the next
// flush writes it again over the same bytes, and an AddEntry that would
// wait for it fails at once with ErrNoSpace. Logs grow in PreallocSize
// steps, each at most an eighth of the free space, asked of Options.Space.
// AddEntry waits at most MaxThrottleTime for a full write cache and then
// fails with ErrWriteCacheFull, which does not fail the storage. Pebble
// treats a failed write of its own log as fatal: on a commit that becomes
// ErrFailed; in Pebble's background work it ends the process.
//
// # Limits
//
// Every entry log stays open (one file descriptor each) until GC removes
// it. Tombstones are never removed. Log usage overcounts replaced entries
// (the old copy still counts until its log is compacted for other reasons
// or its ledger is deleted). The log that was current when the process
// stopped keeps its preallocated blocks until the next open, which gives
// them back (releaseTail).
//
// # Lock rules
//
// DB.life is held shared by every public call and exclusively by Close.
// DB.flushMu makes DB-wide flushes (and checkpoints) one at a time. Per
// directory (see shard): gcMu > writeMu > indexMu > mu, taken in that
// order only; writeCache.mu, readCache.mu and logSet.mu are leaves. The
// ledger-state mutex mu is held for map work and unsynced Pebble writes
// (and a Pebble read of the tombstone when a ledger is first seen), never
// for a sync.
package entrylog
