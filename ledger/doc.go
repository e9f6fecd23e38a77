// Package ledger is the BookKeeper client: replicated, append-only ledgers
// written by one writer to an ensemble of bookies, with fencing and
// recovery so that every reader agrees on a ledger's content after any
// failure.
//
// # Model
//
// A ledger has an ensemble of E bookies, a write quorum Qw and an ack
// quorum Qa (E >= Qw >= Qa >= 1). Entry e goes to its write set: the Qw
// bookies at ensemble positions e mod E, e+1 mod E, ... (round robin).
// It is acknowledged once Qa of them stored it durably and every earlier
// entry was acknowledged; the last acknowledged entry is the LAC (last add
// confirmed), which the writer piggybacks on later entries. Readers of an
// open ledger never read past the LAC they know.
//
// # Metadata (format version 1, JSON, at Path(id))
//
//	{"formatVersion":1,"ensembleSize":3,"writeQuorumSize":2,"ackQuorumSize":2,
//	 "state":"OPEN|IN_RECOVERY|CLOSED","lastEntryId":-1,"length":0,
//	 "digestType":"CRC32C|MAC|DUMMY","password":"<base64>",
//	 "ensembles":[{"firstEntry":0,"bookies":["b1","b2","b3"]}, ...],
//	 "ctime":<unix ms>,"customMetadata":{...}}
//
// Every change is a compare-and-set on the node's version. Ids come from
// a counter at /ledgers/idgen (CAS) and are never reused; metadata is
// created before any entry is written, which is what lets bookies delete
// ledgers whose metadata is gone (bookie.Core.CollectGarbage).
//
// # Entries
//
//	0 ledgerID | 8 entryID | 16 LAC | 24 length | 32 digest | payload
//
// (big-endian int64s; the digest, CRC32C or HMAC-SHA256 keyed by the
// password, covers the 32-byte header and the payload). Bookies see a
// master key derived from the password, never the password.
//
// # Reads
//
// ReadHandle.Read reads a range one entry a request (other replicas on an
// error, a speculative read after SpeculativeReadTimeout), or, where every
// bookie holds every entry (Qw == E), in batch reads of consecutive
// entries from one bookie, whatever they do not bring read one at a time
// (batchread.go).
//
// # Failures
//
//   - A bookie that fails an add (error, broken connection, no answer in
//     AddTimeout) is replaced: a new fragment from LAC+1 (or the last one
//     rewritten if it starts there) is stored by CAS, and every pending
//     entry is re-sent where its write set changed. Completions wait while
//     the change runs, so the LAC cannot move under it.
//   - A "fenced" answer ends the writer: another client is recovering the
//     ledger. Pending entries fail with ErrFenced.
//   - Recovery (OpenRecover, recovery.go): IN_RECOVERY by CAS, fence the
//     last ensemble until every write set has Qw-Qa+1 fenced bookies, read
//     forward from the highest LAC with fencing reads, end at the first
//     entry Qw-Qa+1 replicas lack, write the found entries back with
//     recovery adds, close by CAS. Corrupt or unreachable replicas never
//     count as "missing": recovery stops instead (ErrRecoveryIncomplete).
//   - Ensemble changes made during recovery are stored only with the close:
//     a recovery that fails halfway leaves the fragments as they were.
//
// # Re-replication (auditor.go, replication.go, underreplication.go)
//
//	/ledgers/underreplication/ledgers/<id>   {"missingBookies":[...],"markedMillis":...}
//	/ledgers/underreplication/locks/<id>     ephemeral: the worker on <id>
//	/ledgers/auditor/election/candidate-<n>  ephemeral sequential
//
// Lost bookies' replicas are copied elsewhere in two roles:
//
//   - The Auditor candidate with the lowest election node leads. It
//     watches /bookies/available (re-listing whenever its watch is
//     re-established), and once a bookie has been unregistered for
//     LostBookieRecoveryDelay it scans every ledger's metadata and marks
//     those with a fragment naming it; a periodic full scan catches the
//     rest. Marks only grow, merged by CAS.
//   - A ReplicationWorker locks a marked ledger, re-reads mark and
//     metadata, and for each replica on a lost bookie (named in the mark
//     and unregistered now) in a closed fragment (any fragment of a
//     CLOSED ledger, any but the last of an OPEN one): reads each entry
//     of that replica from a surviving one (verified), writes the same
//     bytes to a registered bookie outside the fragment with a recovery
//     add, then CASes that one position of that one fragment. On a
//     version conflict it re-applies to the new metadata if the copy
//     still covers it, else decides again. It unmarks (CAS on the mark's
//     version) when no fragment names a lost bookie.
//   - The last fragment of an OPEN ledger, or any of one IN_RECOVERY
//     (whose close must not race another metadata change), is left alone
//     for OpenLedgerGracePeriod with the lock held: a writer that writes
//     replaces the bookie itself. If the metadata is unchanged after it,
//     the worker recovers the ledger (fencing an idle writer) and then
//     replicates it as closed.
//   - Placement check (a rack- or region-aware policy only): on a full
//     check and when a bookie joins, the auditor marks closed fragments
//     whose write sets span fewer domains than the writable bookies allow
//     (misplacedBookies in the mark); the worker copies the repeated
//     replica to a bookie of a missing domain the same way.
//
// # Placement (placement.go, topology.go)
//
// A bookie's region and rack come from the rack map at
// registry.RackMapPath (Pulsar's /bookies) or, if it does not name the
// bookie, from its registration; the client watches both. Rack- and
// region-aware policies spread write sets over domains with a minimum;
// enforced, a ledger below it is refused naming the missing domains, and
// an add is acknowledged only once its acks span min(minimum, Qa)
// domains. Ledgers created with bookie affinity groups record them in
// custom metadata (AffinityGroupsKey); ensemble changes and
// re-replication choose only from those groups' bookies.
//
// # Dependencies
//
// The client imports no bookie server code: it finds bookies through
// bookie/registry (the registrations the servers publish), talks to them
// over bookie/client, and reaches in-process ones as LocalBookie values.
//
// # Lock rules
//
// WriteHandle.mu guards the handle's state; nothing is sent and no
// callback runs under it. Completions are queued under mu and run in entry
// order on the handle's delivery goroutine, so callbacks may append again.
// ReadHandle.mu guards its metadata and LAC. The registry's mu guards the
// bookie list.
package ledger
