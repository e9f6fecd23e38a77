package entrylog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Frozen format constants (see the package doc). Changing any of them
// changes the on-disk format: bump FormatVersion and keep a reader for the
// old one.
const (
	// FormatVersion is the version of the entry-log files and of the index
	// key layout.
	FormatVersion = 1
	// LogHeaderSize is the header block every entry log starts with; the
	// first record follows it.
	LogHeaderSize = 4096
	// RecordHeaderSize precedes every payload in an entry log.
	RecordHeaderSize = 24
	// MaxEntrySize bounds one payload: a length field above it is
	// corruption, never an allocation. Pulsar's largest message is 5 MiB by
	// default; this leaves room for raised limits.
	MaxEntrySize = 64 << 20

	logMagic       = "MGENTLOG"
	logHeaderUsed  = 40 // bytes of the header block that carry fields
	logFileSuffix  = ".elog"
	logNameDigits  = 16
	indexDirName   = "index"
	locValueSize   = 20
	stateVersion   = 1
	formatValueLen = 1
)

// Index key prefixes (one byte each, frozen).
const (
	prefixEntry     = 'e' // 'e' ledger entry   -> location
	prefixLedger    = 'l' // 'l' ledger         -> ledger state
	prefixTombstone = 'd' // 'd' ledger         -> empty (deleted forever)
	prefixLogMeta   = 'm' // 'm' logID ledger   -> bytes of the ledger's records in the log
)

// formatKey holds the index's format version; it sorts before every
// prefixed key ('#' < 'd').
const formatKey = "#format"

// castagnoli is the CRC32C table; it is only read.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logFileName is the name of entry log id inside its directory.
func logFileName(id uint64) string { return fmt.Sprintf("%016x%s", id, logFileSuffix) }

// parseLogFileName returns the id of an entry-log file name.
func parseLogFileName(name string) (uint64, bool) {
	if len(name) != logNameDigits+len(logFileSuffix) || name[logNameDigits:] != logFileSuffix {
		return 0, false
	}
	var id uint64
	for _, c := range name[:logNameDigits] {
		switch {
		case c >= '0' && c <= '9':
			id = id<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			id = id<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return id, true
}

// logHeader is the first block of an entry log.
type logHeader struct {
	logID   uint64
	created int64
}

func (h logHeader) encode() []byte {
	b := make([]byte, LogHeaderSize)
	copy(b, logMagic)
	binary.LittleEndian.PutUint32(b[8:], FormatVersion)
	binary.LittleEndian.PutUint64(b[16:], h.logID)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.created))
	binary.LittleEndian.PutUint32(b[32:], RecordHeaderSize)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[16:logHeaderUsed], castagnoli))
	return b
}

// decodeLogHeader checks a header block; name is for error messages.
func decodeLogHeader(b []byte, name string) (logHeader, error) {
	if len(b) < logHeaderUsed {
		return logHeader{}, engine.CorruptionErrorf("entry log %s: header is %d bytes", name, len(b))
	}
	if string(b[:8]) != logMagic {
		return logHeader{}, engine.CorruptionErrorf("entry log %s: not an entry log (magic %q)", name, b[:8])
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != FormatVersion {
		return logHeader{}, fmt.Errorf("entry log %s: format version %d, this build reads %d", name, v, FormatVersion)
	}
	if want, got := binary.LittleEndian.Uint32(b[12:]), crc32.Checksum(b[16:logHeaderUsed], castagnoli); want != got {
		return logHeader{}, engine.CorruptionErrorf("entry log %s: header checksum %08x, computed %08x", name, want, got)
	}
	if rh := binary.LittleEndian.Uint32(b[32:]); rh != RecordHeaderSize {
		return logHeader{}, engine.CorruptionErrorf("entry log %s: record header size %d, want %d", name, rh, RecordHeaderSize)
	}
	return logHeader{logID: binary.LittleEndian.Uint64(b[16:]), created: int64(binary.LittleEndian.Uint64(b[24:]))}, nil
}

// putRecordHeader fills b[:RecordHeaderSize] for payload; the checksum
// covers the length, both ids and the payload, so a record read at a wrong
// offset, or one whose length was damaged, fails it.
//
// sum is the payload's CRC32C when the caller has it (AddEntrySummed):
// the checksum is then combined from it rather than read off the payload
// again, for payloads large enough that this is cheaper.
func putRecordHeader(b []byte, ledgerID, entryID int64, payload []byte, sum crc32c.Known) {
	binary.LittleEndian.PutUint32(b[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(b[8:], uint64(ledgerID))
	binary.LittleEndian.PutUint64(b[16:], uint64(entryID))
	binary.LittleEndian.PutUint32(b[4:], sum.Continue(headerCRC(b), payload))
}

// headerCRC is the CRC32C of the header's checked fields (all but the
// checksum itself), which the record's checksum continues over the payload.
func headerCRC(hdr []byte) uint32 {
	c := crc32.Update(0, castagnoli, hdr[0:4])
	return crc32.Update(c, castagnoli, hdr[8:RecordHeaderSize])
}

func recordCRC(hdr, payload []byte) uint32 {
	return crc32.Update(headerCRC(hdr), castagnoli, payload)
}

// encodeRecord returns a whole record (tests and compaction use it).
func encodeRecord(ledgerID, entryID int64, payload []byte) []byte {
	b := make([]byte, RecordHeaderSize+len(payload))
	copy(b[RecordHeaderSize:], payload)
	putRecordHeader(b, ledgerID, entryID, b[RecordHeaderSize:], crc32c.Known{})
	return b
}

// record is a decoded record; payload aliases the input.
type record struct {
	ledgerID, entryID int64
	payload           []byte
}

// decodeRecord decodes the record at the start of b. It returns the record,
// the bytes it takes, or a reason it is not a valid record. It never reads
// past b and never allocates.
func decodeRecord(b []byte) (record, int, string) {
	if len(b) < RecordHeaderSize {
		return record{}, 0, fmt.Sprintf("record header needs %d bytes, have %d", RecordHeaderSize, len(b))
	}
	n := binary.LittleEndian.Uint32(b[0:])
	if n > MaxEntrySize {
		return record{}, 0, fmt.Sprintf("record length %d exceeds %d", n, MaxEntrySize)
	}
	end := RecordHeaderSize + int(n)
	if end > len(b) {
		return record{}, 0, fmt.Sprintf("record of %d bytes, only %d available", end, len(b))
	}
	payload := b[RecordHeaderSize:end:end]
	if want, got := binary.LittleEndian.Uint32(b[4:]), recordCRC(b, payload); want != got {
		return record{}, 0, fmt.Sprintf("record checksum %08x, computed %08x", want, got)
	}
	return record{
		ledgerID: int64(binary.LittleEndian.Uint64(b[8:])),
		entryID:  int64(binary.LittleEndian.Uint64(b[16:])),
		payload:  payload,
	}, end, ""
}

// location is where an entry's record lies: an index value.
type location struct {
	logID  uint64
	offset int64  // of the record header
	length uint32 // payload bytes
}

// recordSize is the bytes the record takes in the log.
func (l location) recordSize() int64 { return RecordHeaderSize + int64(l.length) }

func (l location) String() string {
	return fmt.Sprintf("log %s offset %d length %d", logFileName(l.logID), l.offset, l.length)
}

func encodeLocation(l location) []byte {
	b := make([]byte, locValueSize)
	binary.LittleEndian.PutUint64(b[0:], l.logID)
	binary.LittleEndian.PutUint64(b[8:], uint64(l.offset))
	binary.LittleEndian.PutUint32(b[16:], l.length)
	return b
}

func decodeLocation(b []byte) (location, bool) {
	if len(b) != locValueSize {
		return location{}, false
	}
	l := location{
		logID:  binary.LittleEndian.Uint64(b[0:]),
		offset: int64(binary.LittleEndian.Uint64(b[8:])),
		length: binary.LittleEndian.Uint32(b[16:]),
	}
	if l.offset < LogHeaderSize || l.length > MaxEntrySize {
		return location{}, false
	}
	return l, true
}

// orderedID maps an int64 to a uint64 whose big-endian bytes sort as the
// int64 does (the sign bit flipped), so negative ids sort first.
func orderedID(id int64) uint64 { return uint64(id) ^ (1 << 63) }

func idFromOrdered(u uint64) int64 { return int64(u ^ (1 << 63)) }

func entryKey(ledgerID, entryID int64) []byte {
	b := make([]byte, 17)
	b[0] = prefixEntry
	binary.BigEndian.PutUint64(b[1:], orderedID(ledgerID))
	binary.BigEndian.PutUint64(b[9:], orderedID(entryID))
	return b
}

// ledgerEntriesBounds are the [lower, upper) keys of a ledger's entries.
func ledgerEntriesBounds(ledgerID int64) (lower, upper []byte) {
	lower = entryKey(ledgerID, math.MinInt64)
	upper = append(entryKey(ledgerID, math.MaxInt64), 0)
	return lower, upper
}

// decodeEntryKey returns the ids of an entry key.
func decodeEntryKey(k []byte) (ledgerID, entryID int64, ok bool) {
	if len(k) != 17 || k[0] != prefixEntry {
		return 0, 0, false
	}
	return idFromOrdered(binary.BigEndian.Uint64(k[1:])), idFromOrdered(binary.BigEndian.Uint64(k[9:])), true
}

func ledgerKey(prefix byte, ledgerID int64) []byte {
	b := make([]byte, 9)
	b[0] = prefix
	binary.BigEndian.PutUint64(b[1:], orderedID(ledgerID))
	return b
}

func decodeLedgerKey(prefix byte, k []byte) (int64, bool) {
	if len(k) != 9 || k[0] != prefix {
		return 0, false
	}
	return idFromOrdered(binary.BigEndian.Uint64(k[1:])), true
}

func logMetaKey(logID uint64, ledgerID int64) []byte {
	b := make([]byte, 17)
	b[0] = prefixLogMeta
	binary.BigEndian.PutUint64(b[1:], logID)
	binary.BigEndian.PutUint64(b[9:], orderedID(ledgerID))
	return b
}

// logMetaBounds are the [lower, upper) keys of one log's metadata.
func logMetaBounds(logID uint64) (lower, upper []byte) {
	lower = logMetaKey(logID, math.MinInt64)
	upper = append(logMetaKey(logID, math.MaxInt64), 0)
	return lower, upper
}

func decodeLogMetaKey(k []byte) (logID uint64, ledgerID int64, ok bool) {
	if len(k) != 17 || k[0] != prefixLogMeta {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), idFromOrdered(binary.BigEndian.Uint64(k[9:])), true
}

func encodeUint64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// ledgerState is what the storage keeps per ledger besides entries.
type ledgerState struct {
	masterKey   []byte // nil: none set
	fenced      bool
	explicitLAC []byte // nil: none set
}

const (
	stateFenced = 1 << iota
	stateHasKey
	stateHasLAC
	stateKnownFlags = stateFenced | stateHasKey | stateHasLAC
)

func encodeState(s *ledgerState) []byte {
	flags := byte(0)
	if s.fenced {
		flags |= stateFenced
	}
	b := []byte{stateVersion, 0}
	if s.masterKey != nil {
		flags |= stateHasKey
		b = binary.AppendUvarint(b, uint64(len(s.masterKey)))
		b = append(b, s.masterKey...)
	}
	if s.explicitLAC != nil {
		flags |= stateHasLAC
		b = binary.AppendUvarint(b, uint64(len(s.explicitLAC)))
		b = append(b, s.explicitLAC...)
	}
	b[1] = flags
	return b
}

// decodeState decodes a ledger-state value; the returned slices are copies.
func decodeState(b []byte) (*ledgerState, string) {
	if len(b) < 2 {
		return nil, fmt.Sprintf("ledger state of %d bytes", len(b))
	}
	if b[0] != stateVersion {
		return nil, fmt.Sprintf("ledger state version %d", b[0])
	}
	flags := b[1]
	if flags&^stateKnownFlags != 0 {
		return nil, fmt.Sprintf("ledger state flags %#x", flags)
	}
	s := &ledgerState{fenced: flags&stateFenced != 0}
	rest := b[2:]
	var reason string
	if flags&stateHasKey != 0 {
		if s.masterKey, rest, reason = readBytes(rest, "master key"); reason != "" {
			return nil, reason
		}
	}
	if flags&stateHasLAC != 0 {
		if s.explicitLAC, rest, reason = readBytes(rest, "explicit LAC"); reason != "" {
			return nil, reason
		}
	}
	if len(rest) != 0 {
		return nil, fmt.Sprintf("%d trailing bytes in ledger state", len(rest))
	}
	return s, ""
}

func readBytes(b []byte, what string) (val, rest []byte, reason string) {
	n, k := binary.Uvarint(b)
	// Only the shortest encoding is valid, so one state has one encoding.
	if k <= 0 || k != len(binary.AppendUvarint(nil, n)) || n > uint64(len(b)-k) {
		return nil, nil, fmt.Sprintf("bad %s length", what)
	}
	return append([]byte{}, b[k:k+int(n)]...), b[k+int(n):], ""
}

func decodeUint64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
