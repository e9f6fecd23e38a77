package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The local store's on-disk constants (see local.go for the layout). They
// are frozen: changing one needs a new localFormatVersion and a migration.
const (
	// localFormatKey holds the store's format version, one byte.
	localFormatKey = "format"
	// localFormatVersion is the layout this build reads and writes.
	localFormatVersion byte = 1
	// nodeKeyPrefix starts every node key: "n" + path.
	nodeKeyPrefix = "n"
	// recordFormat is the first byte of every node record.
	recordFormat byte = 1
)

// nodeKey is the Pebble key of a node path.
func nodeKey(path string) []byte { return []byte(nodeKeyPrefix + path) }

// encodeRecord lays out a persistent node:
// format byte, uvarint version, uvarint cversion, varint created unix-ms,
// varint modified unix-ms, then the value bytes.
func encodeRecord(n *memNode) []byte {
	b := make([]byte, 0, 1+4*binary.MaxVarintLen64+len(n.value))
	b = append(b, recordFormat)
	b = binary.AppendUvarint(b, uint64(n.version))
	b = binary.AppendUvarint(b, uint64(n.cversion))
	b = binary.AppendVarint(b, n.created.UnixMilli())
	b = binary.AppendVarint(b, n.modified.UnixMilli())
	return append(b, n.value...)
}

// decodeRecord parses a node record. Its errors describe the damage; the
// caller marks them as corruption and names the key.
func decodeRecord(b []byte) (*memNode, error) {
	if len(b) == 0 {
		return nil, errors.New("empty record")
	}
	if b[0] != recordFormat {
		return nil, fmt.Errorf("record format byte %d, want %d", b[0], recordFormat)
	}
	r := recordReader{b: b[1:]}
	n := &memNode{children: map[string]struct{}{}}
	n.version = r.count("version")
	n.cversion = r.count("cversion")
	n.created = r.millis("created")
	n.modified = r.millis("modified")
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) > MaxValueSize {
		return nil, fmt.Errorf("value of %d bytes, limit %d", len(r.b), MaxValueSize)
	}
	if len(r.b) > 0 {
		n.value = append([]byte(nil), r.b...) // b is Pebble's buffer, valid only until the iterator moves
	}
	return n, nil
}

// recordReader reads varints off a record, keeping the first error.
type recordReader struct {
	b   []byte
	err error
}

// count reads a uvarint that must fit an int64 (versions never go negative).
func (r *recordReader) count(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > math.MaxInt64 {
		r.err = fmt.Errorf("bad %s varint (record truncated or overlong)", field)
		return 0
	}
	r.b = r.b[n:]
	return int64(v)
}

// millis reads a varint of Unix milliseconds.
func (r *recordReader) millis(field string) time.Time {
	if r.err != nil {
		return time.Time{}
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("bad %s varint (record truncated or overlong)", field)
		return time.Time{}
	}
	r.b = r.b[n:]
	return time.UnixMilli(v)
}
