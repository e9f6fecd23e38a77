package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/magnetar-io/magnetar/engine"
)

// Mark is a position in the journal: the end of a group. Everything before
// a mark that Add acknowledged is durable.
type Mark struct {
	FileID uint64
	Offset int64
}

// Before reports whether m is strictly before o.
func (m Mark) Before(o Mark) bool {
	return m.FileID < o.FileID || (m.FileID == o.FileID && m.Offset < o.Offset)
}

func (m Mark) String() string { return fmt.Sprintf("%016x@%d", m.FileID, m.Offset) }

// checkpointFile holds the last checkpointed mark:
//
//	0 fileID uint64 | 8 offset uint64 | 16 crc uint32 (CRC32C of bytes 0..16)
const (
	checkpointFile    = "checkpoint"
	checkpointRecSize = 20
)

func encodeMark(m Mark) []byte {
	b := make([]byte, checkpointRecSize)
	binary.LittleEndian.PutUint64(b, m.FileID)
	binary.LittleEndian.PutUint64(b[8:], uint64(m.Offset))
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	return b
}

func decodeMark(b []byte, name string) (Mark, error) {
	if len(b) != checkpointRecSize {
		return Mark{}, engine.CorruptionErrorf("journal checkpoint %s: %d bytes, want %d", name, len(b), checkpointRecSize)
	}
	if crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:]) {
		return Mark{}, engine.CorruptionErrorf("journal checkpoint %s: checksum mismatch", name)
	}
	m := Mark{FileID: binary.LittleEndian.Uint64(b), Offset: int64(binary.LittleEndian.Uint64(b[8:]))}
	if m.Offset < BlockSize || m.Offset%BlockSize != 0 {
		return Mark{}, engine.CorruptionErrorf("journal checkpoint %s: offset %d is not a group boundary", name, m.Offset)
	}
	return m, nil
}
