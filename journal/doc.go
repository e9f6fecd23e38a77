// Package journal is the bookie's write-ahead log: an add is acknowledged
// only once it is durable here. One writer groups concurrent adds into one
// vectored write and one datasync (group commit); when adds queue behind a
// full group, several groups go in that one write and datasync (at most
// maxGroupsPerCommit; every one of them says in durableBefore where the
// write started, since none is durable before its datasync); ledger storage later
// checkpoints what it has made durable elsewhere, and older journal files
// are deleted or recycled.
//
// # On-disk format (version 1; the constants below are frozen)
//
// A journal directory holds files named by a 16-digit hex id,
// "%016x.journal", written in id order, plus "checkpoint" (the last
// checkpointed Mark) and recycled files "recycle-%016x.journal" waiting
// for reuse. With Options.ZeroFill, a spare being filled with zeros is
// "spare-%016x.journal" until it is synced and renamed into the recycled
// pool (its id is taken from the journal's file ids, so it is unique);
// replay never reads a spare, and Open removes one left by a crash. Every
// file starts with a header block, followed by groups (a spare's first
// block is zeros until the writer reuses it).
// Groups start at multiples of BlockSize; the bytes between a group's last
// record and the next block boundary are padding.
//
//	file:   | header block (BlockSize) | group | group | ... | (preallocated or stale bytes)
//
//	header block:
//	  0  magic       [8]byte  "MGJOURNL"
//	  8  version     uint32   1
//	 12  crc         uint32   CRC32C of bytes 16..40
//	 16  fileID      uint64   equals the id in the file's name
//	 24  created     int64    unix nanoseconds
//	 32  blockSize   uint32   4096
//	 36  reserved    uint32   0
//	 40  zero padding to BlockSize
//
//	group (at a block boundary):
//	  0  magic         uint32  0x4d4a4752 ("MJGR")
//	  4  crc           uint32  CRC32C of bytes 8..40 of this header
//	  8  fileID        uint64  the file's id: groups left in a recycled file fail this check
//	 16  durableBefore uint64  every byte of this file below this offset was durable
//	                           (datasync completed) before this group was written
//	 24  recordsLen    uint32  bytes of records after this header
//	 28  count         uint32  number of records
//	 32  seq           uint64  group sequence number, increasing across files
//	 40  records, then zero padding to the next block boundary
//
//	record:
//	  0  length    uint32  payload bytes
//	  4  crc       uint32  CRC32C of bytes 8..24 and the payload
//	  8  ledgerID  int64
//	 16  entryID   int64
//	 24  payload
//
// All integers are little-endian.
//
// Files are written with direct I/O unless Options.BufferedWrites: every
// write (header block, groups) is whole blocks at a block boundary already.
// Replay reads through the page cache.
//
// # Why it is safe to replay
//
// A group is valid only if its header and every record in it check out.
// Replay reads groups in order and stops at the first invalid one. Because
// every synced group ends on a block boundary, a later write never touches
// a block holding acknowledged data, so a torn write can only damage
// blocks that were never acknowledged. A torn tail (the last groups were
// being written or were not yet synced) is truncated. An invalid group
// followed, anywhere later in the same file, by a valid group whose
// durableBefore lies beyond it means bytes that had been made durable are
// now damaged: that is corruption (engine.ErrCorruption) and replay fails
// instead of skipping it. Recycled files are rewritten with a new id in
// their header before they are renamed into place, so stale groups from
// their previous life never pass the fileID check.
package journal
