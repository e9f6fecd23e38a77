package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Frozen format constants (see the package doc).
const (
	FormatVersion    = 1
	BlockSize        = 4096
	fileMagic        = "MGJOURNL"
	groupMagic       = 0x4d4a4752
	groupHeaderSize  = 40
	recordHeaderSize = 24
	// MaxEntrySize bounds one payload; Pulsar's largest message is 5 MiB
	// by default, so this leaves room for metadata and raised limits.
	MaxEntrySize = 64 << 20
	// maxGroupRecordsLen bounds a group's records so a corrupt length can
	// never make replay allocate gigabytes.
	maxGroupRecordsLen = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// staleGroupReason starts the reason given for a group of another file.
const staleGroupReason = "group of file"

// fileHeader is the first block of a journal file.
type fileHeader struct {
	fileID  uint64
	created int64
}

func (h fileHeader) encode() []byte {
	b := make([]byte, BlockSize)
	copy(b, fileMagic)
	binary.LittleEndian.PutUint32(b[8:], FormatVersion)
	binary.LittleEndian.PutUint64(b[16:], h.fileID)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.created))
	binary.LittleEndian.PutUint32(b[32:], BlockSize)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[16:40], castagnoli))
	return b
}

// decodeFileHeader checks a header block; name is for error messages.
func decodeFileHeader(b []byte, name string) (fileHeader, error) {
	if len(b) < 40 {
		return fileHeader{}, engine.CorruptionErrorf("journal %s: header is %d bytes", name, len(b))
	}
	if string(b[:8]) != fileMagic {
		return fileHeader{}, engine.CorruptionErrorf("journal %s: not a journal file (magic %q)", name, b[:8])
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != FormatVersion {
		return fileHeader{}, fmt.Errorf("journal %s: format version %d, this build reads %d", name, v, FormatVersion)
	}
	if want, got := binary.LittleEndian.Uint32(b[12:]), crc32.Checksum(b[16:40], castagnoli); want != got {
		return fileHeader{}, engine.CorruptionErrorf("journal %s: header checksum %08x, computed %08x", name, want, got)
	}
	if bs := binary.LittleEndian.Uint32(b[32:]); bs != BlockSize {
		return fileHeader{}, engine.CorruptionErrorf("journal %s: block size %d, want %d", name, bs, BlockSize)
	}
	return fileHeader{fileID: binary.LittleEndian.Uint64(b[16:]), created: int64(binary.LittleEndian.Uint64(b[24:]))}, nil
}

// groupHeader precedes a group's records.
type groupHeader struct {
	fileID        uint64
	durableBefore uint64
	recordsLen    uint32
	count         uint32
	seq           uint64
}

func (h groupHeader) put(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], groupMagic)
	binary.LittleEndian.PutUint64(b[8:], h.fileID)
	binary.LittleEndian.PutUint64(b[16:], h.durableBefore)
	binary.LittleEndian.PutUint32(b[24:], h.recordsLen)
	binary.LittleEndian.PutUint32(b[28:], h.count)
	binary.LittleEndian.PutUint64(b[32:], h.seq)
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:groupHeaderSize], castagnoli))
}

// parseGroupHeader returns the header at the start of b and whether it is
// intact and belongs to fileID. Invalid headers are normal at the end of
// the log, so this reports a reason rather than an error.
func parseGroupHeader(b []byte, fileID uint64) (groupHeader, string) {
	if len(b) < groupHeaderSize {
		return groupHeader{}, "short group header"
	}
	if binary.LittleEndian.Uint32(b) != groupMagic {
		return groupHeader{}, "no group magic"
	}
	if binary.LittleEndian.Uint32(b[4:]) != crc32.Checksum(b[8:groupHeaderSize], castagnoli) {
		return groupHeader{}, "group header checksum mismatch"
	}
	h := groupHeader{fileID: binary.LittleEndian.Uint64(b[8:]), durableBefore: binary.LittleEndian.Uint64(b[16:]),
		recordsLen: binary.LittleEndian.Uint32(b[24:]), count: binary.LittleEndian.Uint32(b[28:]),
		seq: binary.LittleEndian.Uint64(b[32:])}
	switch {
	case h.fileID != fileID:
		return h, fmt.Sprintf("%s %016x (a recycled file's old contents)", staleGroupReason, h.fileID)
	case h.recordsLen > maxGroupRecordsLen:
		return h, fmt.Sprintf("group records length %d", h.recordsLen)
	case uint64(h.count)*recordHeaderSize > uint64(h.recordsLen):
		return h, fmt.Sprintf("%d records cannot fit in %d bytes", h.count, h.recordsLen)
	}
	return h, ""
}

// groupSpan is the bytes a group with recordsLen bytes of records takes,
// padding included.
func groupSpan(recordsLen int) int64 {
	return alignUp(int64(groupHeaderSize + recordsLen))
}

func alignUp(n int64) int64 { return (n + BlockSize - 1) &^ (BlockSize - 1) }

// putRecordHeader writes a record header for payload into b. sum is the
// payload's CRC32C when the caller has it (see Journal.AddSummed): the
// record's checksum is then combined from it instead of read off the
// payload again, for payloads large enough that this is cheaper.
func putRecordHeader(b []byte, ledgerID, entryID int64, payload []byte, sum crc32c.Known) {
	binary.LittleEndian.PutUint32(b[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(b[8:], uint64(ledgerID))
	binary.LittleEndian.PutUint64(b[16:], uint64(entryID))
	crc := sum.Continue(crc32.Checksum(b[8:recordHeaderSize], castagnoli), payload)
	binary.LittleEndian.PutUint32(b[4:], crc)
}

// Entry is one replayed record. Payload aliases replay's read buffer and is
// valid only during the callback.
type Entry struct {
	LedgerID, EntryID int64
	Payload           []byte
}

// parseRecords decodes a group's records, calling fn for each, and reports
// why they are invalid ("" when all check out). fn runs only after the
// whole group checked out: a torn group yields nothing.
func parseRecords(b []byte, count uint32, fn func(Entry) error) (string, error) {
	entries := make([]Entry, 0, count)
	for i := uint32(0); i < count; i++ {
		if len(b) < recordHeaderSize {
			return fmt.Sprintf("record %d: short header", i), nil
		}
		n := binary.LittleEndian.Uint32(b)
		if n > MaxEntrySize || int(n) > len(b)-recordHeaderSize {
			return fmt.Sprintf("record %d: length %d past the group", i, n), nil
		}
		payload := b[recordHeaderSize : recordHeaderSize+int(n)]
		crc := crc32.Update(crc32.Checksum(b[8:recordHeaderSize], castagnoli), castagnoli, payload)
		if crc != binary.LittleEndian.Uint32(b[4:]) {
			return fmt.Sprintf("record %d: checksum mismatch", i), nil
		}
		entries = append(entries, Entry{LedgerID: int64(binary.LittleEndian.Uint64(b[8:])),
			EntryID: int64(binary.LittleEndian.Uint64(b[16:])), Payload: payload})
		b = b[recordHeaderSize+int(n):]
	}
	if len(b) != 0 {
		return fmt.Sprintf("%d bytes after the last record", len(b)), nil
	}
	for _, e := range entries {
		if err := fn(e); err != nil {
			return "", err
		}
	}
	return "", nil
}

// fileName is the name of journal file id.
func fileName(id uint64) string { return fmt.Sprintf("%016x.journal", id) }

// recycledName is the name of a recycled file waiting for reuse.
func recycledName(id uint64) string { return fmt.Sprintf("recycle-%016x.journal", id) }

// parseFileName returns the id of a journal file name.
func parseFileName(name string) (uint64, bool) {
	var id uint64
	if len(name) != 16+len(".journal") {
		return 0, false
	}
	if _, err := fmt.Sscanf(name, "%016x.journal", &id); err != nil || fileName(id) != name {
		return 0, false
	}
	return id, true
}

// parseRecycledName returns the id of a recycled file name.
func parseRecycledName(name string) (uint64, bool) {
	var id uint64
	if _, err := fmt.Sscanf(name, "recycle-%016x.journal", &id); err != nil || recycledName(id) != name {
		return 0, false
	}
	return id, true
}
