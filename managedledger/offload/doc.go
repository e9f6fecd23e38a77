// Package offload is tiered storage for closed ledgers: it copies a ledger's
// entries out of BookKeeper to cheaper storage and reads them back, as
// Pulsar's LedgerOffloader does. Offloader is the contract; the drivers are
// "filesystem" (Pulsar's filesystem offloader, over an engine.FS) and
// "memory" (for tests). NewFaulty wraps any Offloader to fail chosen
// operations, for the tests of the layers above.
//
// Pulsar's other drivers (aws-s3, S3, google-cloud-storage, azureblob,
// aliyun-oss) are known names but not offered by this build: New says so
// with ErrUnsupportedDriver, so a broker.conf written for Pulsar fails with
// a clear reason instead of "unknown driver".
//
// # Naming
//
// A copy is named by its Key: the managed ledger's name, the ledger id and a
// UID that the caller makes unique per offload attempt (as Pulsar's
// ManagedLedgerImpl does with a random UUID), so that a retried offload never
// meets the half-written remains of an earlier attempt under its own name.
// The filesystem driver stores a copy at
//
//	<root>/<managed ledger>/<ledger id>-<uid>.ledger       a complete copy
//	<root>/<managed ledger>/<ledger id>-<uid>.ledger.tmp   a copy being written
//
// where the managed ledger's '/' separate directories. Open looks only at
// ".ledger" names; a ".tmp" left by a crash is removed by the next Offload
// or Delete of the same key.
//
// # Atomicity
//
// Offload writes the ".tmp" file, syncs its data, renames it to its final
// name and syncs the directory (the directories it created are synced
// first). A crash at any point leaves either no ".ledger" file or a complete,
// durable one; a failed Offload removes what it wrote. A copy that already
// exists under the key is never replaced (ErrExists).
//
// # File format (version 1; the constants in format.go are frozen)
//
// Integers are little-endian.
//
//	file: | header | record 0 | record 1 | ... | record n-1 | index | footer |
//
//	header (28 + metaLen bytes):
//	  0  magic     [8]byte  "MGOFLHDR"
//	  8  version   uint32   1
//	 12  metaLen   uint32   bytes of meta (at most MaxMetaSize)
//	 16  ledgerID  int64
//	 24  crc       uint32   CRC32C of bytes 0..24 and meta
//	 28  meta      the caller's map as a JSON object of strings, exactly as
//	               encoding/json writes it (keys sorted)
//
//	record (16 + length bytes), for entry ids 0..n-1 in order, back to back:
//	  0  entryID   int64
//	  8  length    uint32   payload bytes (at most MaxEntrySize)
//	 12  crc       uint32   CRC32C of bytes 0..12 and the payload
//	 16  payload
//
//	index (8n bytes):
//	  8i offset    uint64   file offset of record i
//
//	footer (48 bytes, the last of the file):
//	  0  indexOffset  uint64   end of the last record, start of the index
//	  8  entryCount   uint64   n (the ledger's LAC + 1)
//	 16  totalLength  uint64   sum of the payload lengths
//	 24  ledgerID     int64    the header's
//	 32  crc          uint32   CRC32C of the index and footer bytes 0..32
//	 36  version      uint32   1
//	 40  magic        [8]byte  "MGOFLEND"
//
// Open reads the footer, the index and the header (three positioned reads,
// never the records) and checks that they agree: the footer's magic,
// version and CRC; the index spans exactly from indexOffset to the footer;
// records are back to back from the header's end to indexOffset, each at
// least 16 bytes and at most 16+MaxEntrySize; their payloads add up to
// totalLength; the header's magic, version, CRC and ledger id, and that the
// ledger id is the key's. Every length is checked against the file's size
// before anything is allocated for it, so a hostile file costs at most its
// own size in memory. Any failed check is ErrCorrupt, never ErrNotFound.
//
// Read reads a run of consecutive records with one positioned read (runs are
// cut at maxRunBytes, so one read never allocates more than that or one
// entry) and checks each record's id, its length against the index and its
// CRC; a mismatch is ErrCorrupt naming the key and the entry. The record
// repeats what the index implies (id, length) so that a wrong offset can
// never return another entry's payload under a valid CRC.
//
// Readers hold no mutable state after Open, so concurrent Reads are safe.
package offload
