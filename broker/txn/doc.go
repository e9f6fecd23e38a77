// Package txn is the transaction coordinator of Pulsar's transactions: the
// state of each transaction (open, committing, committed, aborting,
// aborted), kept in a log so that a coordinator recovers on whichever
// broker owns it next, and the ending of a transaction on every topic
// partition it produced to and every subscription it acknowledged on.
//
// A coordinator is partition N of persistent://pulsar/system/
// transaction_coordinator_assign: its transactions' ids have most bits N
// and least bits a sequence number that only grows (recovered from the log
// and from the highest number recorded before the log was trimmed). The
// broker hosts the coordinators whose assign partitions it owns
// (broker/txncoord.go); this package does not know about topics, bundles
// or connections: it is a state machine over a Log and an Ender.
//
// # Behaviour
//
//   - AddPartitions, AddSubscriptions and End answer once the log holds
//     the change. New answers at once and writes nothing: its record
//     rides the coordinator's next append, as does the final record of an
//     ended transaction (both wait at most a second: the broker calls
//     Flush every second). So a transaction that is opened, given a
//     partition and committed costs the log two entries (the partition's
//     record, the COMMITTING one), where it would cost four alone. A
//     crash loses at most a second of either: an open transaction with
//     nothing in it, whose client is then told TransactionNotFound, and
//     final records, whose transactions recovery ends again (harmless).
//     One entry of a coordinator is in flight at a time: the changes made
//     while it is written share the next entry (group commit), each
//     answered when that entry lands. A change the log could not take fails the
//     coordinator: it refuses everything after (ErrClosed) and the broker
//     loads it again from the log, so the memory never runs ahead of it.
//   - End(commit) of an open transaction logs COMMITTING, ends it on every
//     partition and subscription (retrying each until it succeeds: a
//     transaction that is committing must commit everywhere), logs
//     COMMITTED and forgets it; End(abort) likewise with ABORTING and
//     ABORTED. A second End of the same kind while one runs waits for it;
//     of the other kind it is ErrInvalidStatus; once ended the
//     transaction is unknown (ErrNotFound), as Pulsar's coordinator.
//   - A transaction open past its timeout is aborted by Expire.
//   - Recover replays the log: open transactions stay open with their
//     original deadlines, committing and aborting ones are ended again.
//
// # Log records
//
// Each record is the whole state of one transaction after a change, so
// replay keeps the last record per transaction and drops those that ended.
// An entry is one record, or several as repeated field 15 of a Batch
// (Pulsar's transactionLogBatchedWriteEnabled, without its delay: what
// waits for a ride is what nobody waits for); versions before batching do
// not read Batch entries.
// Encoded with protowire (field numbers frozen):
//
//	Record       { 1: uint64 least_bits; 2: uint32 status; 3: uint64 start_ms;
//	               4: uint64 timeout_ms; 5: repeated string partitions;
//	               6: repeated SubRecord subscriptions; 7: uint64 last_modified_ms }
//	SubRecord    { 1: string topic; 2: string subscription }
//	Batch        { 15: repeated bytes record }
//
// The log is trimmed below the first record of the oldest live
// transaction; before trimming, the highest sequence number issued is
// recorded with the log (Log.SaveSequence), so ids are never reused.
//
// Lock rules: Coordinator.mu guards its maps and state; it is never held
// while waiting for the log or an Ender.
package txn
