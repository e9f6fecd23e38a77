// Package bkproto is the bookie protocol: the requests a ledger client
// sends to a bookie and the responses it gets back, and their encoding.
// docs/protocols.md describes the protocol for people; this comment is the
// byte-level reference. The constants below are frozen: a bookie and a
// client of different builds must understand each other.
//
// # Frames
//
// Every message is one netio frame: a 4-byte big-endian size, then size
// bytes. Requests carry an id chosen by the client; a bookie may answer
// pipelined requests out of order, and the id pairs each response with its
// request.
//
//	request:
//	  0  size       uint32  bytes after this field
//	  4  version    uint8   1
//	  5  op         uint8   OpAdd, OpRead, ...
//	  6  flags      uint16  FlagRecoveryAdd, FlagFence, FlagLongPoll, FlagDeferredSync
//	  8  requestID  uint64
//	 16  ledgerID   int64
//	 24  entryID    int64
//	 32  body (by op, below)
//
//	response:
//	  0  size       uint32
//	  4  version    uint8   1
//	  5  op         uint8   the request's op
//	  6  status     uint16  StatusOK, ...
//	  8  requestID  uint64
//	 16  ledgerID   int64
//	 24  entryID    int64
//	 32  body (by op; empty unless the status is StatusOK)
//
// All integers are big-endian.
//
// # Bodies
//
//	OpAdd request:       keyLen uint16, masterKey [keyLen], entry data (rest)
//	OpAdd response:      -
//	OpRead request:      without flags: -
//	                     FlagFence:     keyLen uint16, masterKey [keyLen]
//	                     FlagLongPoll:  previousLAC int64, timeoutMillis uint32
//	                     (fence fields first when both are set)
//	OpRead response:     lac int64, entry data (rest; may be empty on a
//	                     long poll that timed out or whose entry is not there,
//	                     and for entry EntryLAC of a ledger without entries)
//	OpReadLAC request:   -
//	OpReadLAC response:  lac int64, explicitLen uint32, explicit LAC [explicitLen],
//	                     last entry data (rest, may be empty)
//	OpWriteLAC request:  keyLen uint16, masterKey, lac int64, LAC data (rest)
//	OpForceLedger:       request keyLen uint16, masterKey; response -
//	OpInfo request:      -  (ledgerID and entryID are 0)
//	OpInfo response:     freeBytes uint64, totalBytes uint64, flags uint32
//	                     (InfoReadOnly, InfoBatchRead, InfoOutOfSpace)
//	OpBatchRead request: maxCount uint32, maxBytes uint32 (entryID: the first
//	                     entry; no flags)
//	OpBatchRead response: lac int64, count uint32, then count times
//	                     len uint32, entry data [len]
//
// # Batch reads
//
// OpBatchRead returns the entries entryID, entryID+1, ... that the bookie
// holds, in order: it stops at the first one it cannot read, after
// maxCount entries, or before the answer's entries (each counted as 4 +
// len bytes) would pass maxBytes, but it always returns entryID itself
// when it has it, however large. A bookie may return fewer than asked
// (this one stops at 4096 entries and 4 MiB); a client asks again from
// where the answer stopped. When it cannot read entryID the status is the
// one OpRead would give (StatusNoLedger, StatusNoEntry, StatusCorrupt, ...)
// and the body is empty; an OK answer has at least one entry. The entries
// are the stored data, as OpRead returns them:
//
//	OpBatchRead response body (status OK; offsets after the 32-byte header):
//	  0   lac     int64
//	  8   count   uint32   >= 1 (0 decodes; a client takes it as an error)
//	  12  len     uint32   entry entryID
//	  16  data    [len]
//	  ..  len     uint32   entry entryID+1
//	  ..  data    [len]
//	  ... (count entries in all, nothing after the last)
//
// # Versions
//
// The ops, statuses and flags above are frozen; a later op is appended.
// A bookie (from the build that added OpBatchRead on) answers an op it
// does not know with StatusBadRequest (the op byte echoed, an empty body)
// and keeps the connection. Bookies built
// before OpBatchRead closed the connection on an unknown op instead, so a
// client sends OpBatchRead only to a bookie whose OpInfo answer carries
// InfoBatchRead.
//
// # Entry data
//
// The bookie stores entry data as the client sent it and never re-encodes
// it. It reads only the head the ledger client writes at the start of
// every entry (see EntryHead): the ledger and entry ids, which must match
// the request's, and the writer's last-add-confirmed, which the bookie
// tracks for OpReadLAC and long polls. What follows (the digest and the
// payload) is the client's business.
//
//	entry data:
//	  0  ledgerID  int64
//	  8  entryID   int64
//	 16  lac       int64   the writer's last add confirmed when it sent this entry
//	 24  client-defined (digest, length, payload)
package bkproto

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/wire"
)

// Version is the protocol version every frame carries.
const Version = 1

// HeaderLen is the size of a request or response header, size prefix
// included.
const HeaderLen = 32

// EntryHeadLen is the size of the head of entry data the bookie reads.
const EntryHeadLen = 24

// EntryLAC as a read's entry id asks for the ledger's LAC and its last
// entry instead of a given entry: the answer is OK with an empty Data when
// the ledger has no entries. A recovering client fences with it.
const EntryLAC int64 = -1

// MaxMasterKeyLen bounds a master key (BookKeeper's are 20-byte digests of
// the password).
const MaxMasterKeyLen = 1024

// Frame limits. One chain derives them, so each layer's limit sits above
// the one before it: the broker stores entries of at most
// wire.MaxEntrySize(maxMessageSize) bytes; a ledger client wraps each in
// at most MaxEntryOverhead bytes; an add request or a read answer adds at
// most maxRequestOverhead. Bookies (nettyMaxFrameSizeBytes) and ledger
// clients default to DefaultMaxFrameSize; a broker with a larger
// maxMessageSize needs MaxFrameSize(wire.MaxEntrySize(maxMessageSize)) on
// both.
const (
	// MaxEntryOverhead is the room a ledger client may take around a
	// payload in the entry data: the EntryHead, and its own fields and
	// digest (ours: 8 bytes of length and at most 20 of digest), with
	// room to spare.
	MaxEntryOverhead = 256
	// maxRequestOverhead is what a frame adds around entry data at most:
	// an add's header (without the size field), key length and longest
	// master key; read answers (lac, count, length) add less.
	maxRequestOverhead = HeaderLen - 4 + 2 + MaxMasterKeyLen
	// DefaultMaxFrameSize is MaxFrameSize for entries a broker with Pulsar's
	// default maxMessageSize stores (5 MiB + 10 KiB): 5 MiB + 11,550 bytes.
	DefaultMaxFrameSize = wire.DefaultMaxMessageSize + wire.FramePadding + MaxEntryOverhead + maxRequestOverhead
)

// MaxFrameSize is the frame limit (the size field, which does not count
// itself) under which every add of a payload of up to maxPayload bytes,
// and every answer carrying one, fits.
func MaxFrameSize(maxPayload int) int { return maxPayload + MaxEntryOverhead + maxRequestOverhead }

// Op is a request type.
type Op uint8

// Ops.
const (
	OpAdd         Op = 1
	OpRead        Op = 2
	OpReadLAC     Op = 3
	OpWriteLAC    Op = 4
	OpForceLedger Op = 5
	OpInfo        Op = 6
	OpBatchRead   Op = 7 // appended; see Versions
)

// known reports whether this build speaks op.
func (o Op) known() bool { return o >= OpAdd && o <= OpBatchRead }

func (o Op) String() string {
	switch o {
	case OpAdd:
		return "add"
	case OpRead:
		return "read"
	case OpReadLAC:
		return "read-lac"
	case OpWriteLAC:
		return "write-lac"
	case OpForceLedger:
		return "force-ledger"
	case OpInfo:
		return "info"
	case OpBatchRead:
		return "batch-read"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Request flags.
const (
	// FlagRecoveryAdd: an add by a recovering client, accepted on a fenced
	// ledger and in read-only mode.
	FlagRecoveryAdd uint16 = 1 << 0
	// FlagFence: a read that fences the ledger first (recovery).
	FlagFence uint16 = 1 << 1
	// FlagLongPoll: a read that waits until the ledger's LAC passes
	// previousLAC or the timeout ends.
	FlagLongPoll uint16 = 1 << 2
	// FlagDeferredSync: an add answered once queued for the journal, not
	// once durable; OpForceLedger makes it durable.
	FlagDeferredSync uint16 = 1 << 3

	knownFlags = FlagRecoveryAdd | FlagFence | FlagLongPoll | FlagDeferredSync
)

// OpInfo response flags.
const (
	// InfoReadOnly is set by a read-only bookie.
	InfoReadOnly uint32 = 1 << 0
	// InfoBatchRead is set by a bookie that serves OpBatchRead.
	InfoBatchRead uint32 = 1 << 1
	// InfoOutOfSpace is set, with InfoReadOnly, by a bookie that is
	// read-only because a disk is full (it turns writable by itself once
	// space is freed), not because its storage failed.
	InfoOutOfSpace uint32 = 1 << 2
)

// Status is a response code.
type Status uint16

// Statuses. A client maps each to its own error.
const (
	StatusOK Status = 0
	// StatusNoLedger: the bookie has no such ledger.
	StatusNoLedger Status = 1
	// StatusNoEntry: the ledger is here, the entry is not.
	StatusNoEntry Status = 2
	// StatusFenced: the ledger is fenced; adds from its old writer fail.
	StatusFenced Status = 3
	// StatusUnauthorized: the master key does not match the ledger's.
	StatusUnauthorized Status = 4
	// StatusReadOnly: the bookie is read-only and refuses adds.
	StatusReadOnly Status = 5
	// StatusBadRequest: the request was malformed or inconsistent.
	StatusBadRequest Status = 6
	// StatusIOError: the bookie failed to store or read.
	StatusIOError Status = 7
	// StatusTooManyRequests: the bookie is overloaded.
	StatusTooManyRequests Status = 8
	// StatusCorrupt: stored data failed its checksum. Never "no entry":
	// a client must not treat damaged data as missing data.
	StatusCorrupt Status = 9
	// StatusShuttingDown: the bookie is closing.
	StatusShuttingDown Status = 10
	// StatusTooLarge: the request's frame is over the bookie's limit, or
	// its entry over what its storage takes. Only that request is refused:
	// the connection stays, and the bookie is as healthy as before.
	// Appended: a client built before it sees an unknown status (an I/O
	// error), as it did the closed connection it replaces.
	StatusTooLarge Status = 11
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusNoLedger:
		return "no such ledger"
	case StatusNoEntry:
		return "no such entry"
	case StatusFenced:
		return "ledger fenced"
	case StatusUnauthorized:
		return "master key mismatch"
	case StatusReadOnly:
		return "bookie read-only"
	case StatusBadRequest:
		return "bad request"
	case StatusIOError:
		return "bookie I/O error"
	case StatusTooManyRequests:
		return "too many requests"
	case StatusCorrupt:
		return "corrupt entry on bookie"
	case StatusShuttingDown:
		return "bookie shutting down"
	case StatusTooLarge:
		return "request too large"
	}
	return fmt.Sprintf("status(%d)", uint16(s))
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("bkproto: malformed frame")

// ErrUnknownOp is the decoding error of a well-framed request whose op
// this build does not know (it wraps ErrMalformed); the request's header
// fields are decoded, so the bookie can answer it.
var ErrUnknownOp = fmt.Errorf("%w: unknown op", ErrMalformed)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Request is a decoded request. Slices alias the frame it was decoded from.
type Request struct {
	Op        Op
	Flags     uint16
	RequestID uint64
	LedgerID  int64
	EntryID   int64

	MasterKey     []byte // OpAdd, OpWriteLAC, OpForceLedger, fencing OpRead
	Data          []byte // OpAdd: entry data; OpWriteLAC: LAC data
	LAC           int64  // OpWriteLAC
	PreviousLAC   int64  // long-poll OpRead
	TimeoutMillis uint32 // long-poll OpRead
	MaxCount      uint32 // OpBatchRead
	MaxBytes      uint32 // OpBatchRead

	// DataSum is the CRC32C of Data, if known: set only by a ledger
	// client handing a request to a bookie in its own process
	// (ledger.LocalTransport), never encoded or decoded, so a bookie
	// trusts it only where no wire lies between the sum and the bytes. A
	// bookie computes it for requests from the network.
	DataSum crc32c.Known
}

// Response is a decoded response. Slices alias the frame.
type Response struct {
	Op        Op
	Status    Status
	RequestID uint64
	LedgerID  int64
	EntryID   int64

	LAC         int64    // OpRead, OpReadLAC, OpBatchRead
	Data        []byte   // OpRead: entry data; OpReadLAC: last entry data
	ExplicitLAC []byte   // OpReadLAC
	Entries     [][]byte // OpBatchRead: entry data of EntryID, EntryID+1, ...

	FreeBytes  uint64 // OpInfo
	TotalBytes uint64 // OpInfo
	InfoFlags  uint32 // OpInfo
}

var be = binary.BigEndian

// EntryHead is the head of entry data that the bookie reads.
type EntryHead struct {
	LedgerID int64
	EntryID  int64
	LAC      int64
}

// ParseEntryHead reads the head of entry data.
func ParseEntryHead(data []byte) (EntryHead, error) {
	if len(data) < EntryHeadLen {
		return EntryHead{}, malformed("entry data of %d bytes is shorter than its %d-byte head", len(data), EntryHeadLen)
	}
	return EntryHead{
		LedgerID: int64(be.Uint64(data[0:])),
		EntryID:  int64(be.Uint64(data[8:])),
		LAC:      int64(be.Uint64(data[16:])),
	}, nil
}

// PutEntryHead writes h into the first EntryHeadLen bytes of dst.
func PutEntryHead(dst []byte, h EntryHead) {
	be.PutUint64(dst[0:], uint64(h.LedgerID))
	be.PutUint64(dst[8:], uint64(h.EntryID))
	be.PutUint64(dst[16:], uint64(h.LAC))
}
