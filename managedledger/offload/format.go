package offload

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// The file format's constants (see the package doc). Frozen: a change is a
// new format version, and readers keep reading version 1.
const (
	formatVersion = 1

	headerMagic = "MGOFLHDR"
	footerMagic = "MGOFLEND"

	headerFixedSize  = 28 // header bytes before meta
	recordHeaderSize = 16
	indexEntrySize   = 8
	footerSize       = 48

	// footerCRCEnd is where the footer's CRC starts: the CRC covers the
	// index and the footer bytes before it.
	footerCRCEnd = 32
)

// Limits a copy must respect, checked when writing and when reading.
const (
	// MaxEntrySize is the largest payload of one entry. BookKeeper's
	// frames stop far below it (5 MiB by default); the limit is what a
	// reader may allocate for one entry on the word of a file.
	MaxEntrySize = 64 << 20
	// MaxMetaSize is the largest encoded meta map.
	MaxMetaSize = 1 << 20
)

var le = binary.LittleEndian

// header is a decoded header.
type header struct {
	ledgerID int64
	meta     map[string]string
	size     int64 // header bytes, meta included: the first record's offset
}

// footer is a decoded footer.
type footer struct {
	indexOffset uint64
	entryCount  uint64
	totalLength uint64
	ledgerID    int64
	crc         uint32
}

// encodeMeta turns meta into the header's JSON. encoding/json sorts map
// keys, so the same map always gives the same bytes.
func encodeMeta(meta map[string]string) ([]byte, error) {
	if meta == nil {
		meta = map[string]string{}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("offload: encode meta: %w", err)
	}
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("offload: meta is %d bytes encoded, over the limit of %d", len(b), MaxMetaSize)
	}
	return b, nil
}

// decodeMeta parses the header's JSON, accepting only what encodeMeta
// writes: so an accepted file is byte for byte what a writer made.
func decodeMeta(b []byte) (map[string]string, string) {
	var meta map[string]string
	if err := json.Unmarshal(b, &meta); err != nil || meta == nil {
		return nil, "meta is not a JSON object of strings"
	}
	again, err := json.Marshal(meta)
	if err != nil || !bytes.Equal(again, b) {
		return nil, "meta is not in canonical form"
	}
	return meta, ""
}

// encodeHeader returns the header for a ledger and its encoded meta.
func encodeHeader(ledgerID int64, metaJSON []byte) []byte {
	b := make([]byte, headerFixedSize+len(metaJSON))
	copy(b, headerMagic)
	le.PutUint32(b[8:], formatVersion)
	le.PutUint32(b[12:], uint32(len(metaJSON)))
	le.PutUint64(b[16:], uint64(ledgerID))
	copy(b[headerFixedSize:], metaJSON)
	le.PutUint32(b[24:], headerCRC(b[:24], metaJSON))
	return b
}

func headerCRC(fixed, meta []byte) uint32 {
	return crc32c.Update(crc32c.Checksum(fixed[:24]), meta)
}

// decodeHeaderPrefix checks the header's fixed part and returns the meta
// length it announces, which the caller bounds before reading the meta.
func decodeHeaderPrefix(b []byte) (metaLen int64, reason string) {
	if len(b) < headerFixedSize {
		return 0, "header too short"
	}
	if string(b[:8]) != headerMagic {
		return 0, "bad header magic"
	}
	if v := le.Uint32(b[8:]); v != formatVersion {
		return 0, fmt.Sprintf("header version %d, want %d", v, formatVersion)
	}
	metaLen = int64(le.Uint32(b[12:]))
	if metaLen > MaxMetaSize {
		return 0, fmt.Sprintf("meta length %d over the limit of %d", metaLen, MaxMetaSize)
	}
	return metaLen, ""
}

// decodeHeader decodes a whole header: b is exactly the fixed part and the
// meta.
func decodeHeader(b []byte) (header, string) {
	metaLen, reason := decodeHeaderPrefix(b)
	if reason != "" {
		return header{}, reason
	}
	if int64(len(b)) != headerFixedSize+metaLen {
		return header{}, "header length does not match its meta length"
	}
	meta := b[headerFixedSize:]
	if le.Uint32(b[24:]) != headerCRC(b, meta) {
		return header{}, "header checksum mismatch"
	}
	m, reason := decodeMeta(meta)
	if reason != "" {
		return header{}, reason
	}
	return header{ledgerID: int64(le.Uint64(b[16:])), meta: m, size: int64(len(b))}, ""
}

// putRecordHeader fills dst[:16] with the header of a record.
func putRecordHeader(dst []byte, entryID int64, payload []byte) {
	le.PutUint64(dst, uint64(entryID))
	le.PutUint32(dst[8:], uint32(len(payload)))
	le.PutUint32(dst[12:], crc32c.Update(crc32c.Checksum(dst[:12]), payload))
}

// checkRecord verifies that rec is entry entryID's whole record, as the
// index says it is: its id, its length and its checksum.
func checkRecord(rec []byte, entryID int64) string {
	if len(rec) < recordHeaderSize {
		return "record shorter than its header"
	}
	if id := int64(le.Uint64(rec)); id != entryID {
		return fmt.Sprintf("record holds entry %d", id)
	}
	if n := int64(le.Uint32(rec[8:])); n != int64(len(rec)-recordHeaderSize) {
		return fmt.Sprintf("record length %d, the index says %d", n, len(rec)-recordHeaderSize)
	}
	payload := rec[recordHeaderSize:]
	if le.Uint32(rec[12:]) != crc32c.Update(crc32c.Checksum(rec[:12]), payload) {
		return "entry checksum mismatch"
	}
	return ""
}

// encodeTrailer returns the index and the footer for records at offsets.
func encodeTrailer(ledgerID int64, offsets []uint64, indexOffset, total uint64) []byte {
	b := make([]byte, len(offsets)*indexEntrySize+footerSize)
	for i, off := range offsets {
		le.PutUint64(b[i*indexEntrySize:], off)
	}
	f := b[len(offsets)*indexEntrySize:]
	le.PutUint64(f, indexOffset)
	le.PutUint64(f[8:], uint64(len(offsets)))
	le.PutUint64(f[16:], total)
	le.PutUint64(f[24:], uint64(ledgerID))
	le.PutUint32(f[footerCRCEnd:], crc32c.Checksum(b[:len(b)-footerSize+footerCRCEnd]))
	le.PutUint32(f[36:], formatVersion)
	copy(f[40:], footerMagic)
	return b
}

// decodeFooter decodes the footer of a file of fileSize bytes and checks
// that the index it announces fits exactly between indexOffset and the
// footer. Its CRC is checked with the index (checkIndex).
func decodeFooter(b []byte, fileSize int64) (footer, string) {
	if len(b) != footerSize {
		return footer{}, "footer too short"
	}
	if string(b[40:]) != footerMagic {
		return footer{}, "bad footer magic"
	}
	if v := le.Uint32(b[36:]); v != formatVersion {
		return footer{}, fmt.Sprintf("footer version %d, want %d", v, formatVersion)
	}
	f := footer{
		indexOffset: le.Uint64(b), entryCount: le.Uint64(b[8:]), totalLength: le.Uint64(b[16:]),
		ledgerID: int64(le.Uint64(b[24:])), crc: le.Uint32(b[footerCRCEnd:]),
	}
	room := uint64(fileSize - footerSize) // caller ensures fileSize >= footerSize
	if f.indexOffset > room {
		return footer{}, "index offset past the end of the file"
	}
	// Divide, never multiply: a hostile count must not overflow.
	if span := room - f.indexOffset; span%indexEntrySize != 0 || span/indexEntrySize != f.entryCount {
		return footer{}, fmt.Sprintf("index of %d entries does not fit the %d bytes before the footer", f.entryCount, span)
	}
	return f, ""
}

// checkIndex verifies the footer's CRC over the index and the footer, and
// that the index describes records back to back from firstOffset (the
// header's end) to the index, each within MaxEntrySize, with payloads
// adding up to the footer's total.
func checkIndex(f footer, index, footerBytes []byte, firstOffset uint64) string {
	crc := crc32c.Update(crc32c.Checksum(index), footerBytes[:footerCRCEnd])
	if crc != f.crc {
		return "index checksum mismatch"
	}
	next, total := firstOffset, uint64(0)
	for i := uint64(0); i < f.entryCount; i++ {
		off := le.Uint64(index[i*indexEntrySize:])
		if off != next {
			return fmt.Sprintf("record %d at offset %d, expected %d", i, off, next)
		}
		end := f.indexOffset
		if i+1 < f.entryCount {
			end = le.Uint64(index[(i+1)*indexEntrySize:])
		}
		if end < off || end-off < recordHeaderSize || end-off-recordHeaderSize > MaxEntrySize {
			return fmt.Sprintf("record %d spans offsets %d..%d", i, off, end)
		}
		total += end - off - recordHeaderSize
		next = end
	}
	if next != f.indexOffset {
		return fmt.Sprintf("records end at %d, the index starts at %d", next, f.indexOffset)
	}
	if total != f.totalLength {
		return fmt.Sprintf("payloads add up to %d bytes, the footer says %d", total, f.totalLength)
	}
	return ""
}
