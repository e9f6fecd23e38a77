package entrylog

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// A record header built from the payload's CRC (AddEntrySummed) is the
// header built by reading the payload: same bytes, on both sides of
// crc32c.CombineWorthFrom.
func TestSummedRecordHeaderIsTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 12))
	for _, size := range []int{0, 1, 1000, crc32c.CombineWorthFrom - 1, crc32c.CombineWorthFrom, 20_000, 300_000} {
		payload := randomBytes(rng, size)
		var read, summed [RecordHeaderSize]byte
		putRecordHeader(read[:], 7, int64(size), payload, crc32c.Known{})
		putRecordHeader(summed[:], 7, int64(size), payload, crc32c.Of(crc32c.Checksum(payload)))
		if read != summed {
			t.Fatalf("%d bytes: header %x from the CRC, %x from the payload", size, summed, read)
		}
	}
}

// Entries added with their CRC read back from the entry log after a flush
// and a reopen: reads check each record's checksum.
func TestAddEntrySummedReadsBack(t *testing.T) {
	efs, ifs := engine.NewMem(), vfs.NewMem()
	opts := Options{LogSizeLimit: 256 << 10, FlushInterval: -1, GCWaitTime: -1}
	db := openTest(t, efs, ifs, []string{"/d0"}, opts)
	rng := rand.New(rand.NewPCG(29, 13))
	var want [][]byte
	for e := int64(0); e < 40; e++ {
		data := randomBytes(rng, int(e%4)*7000)
		want = append(want, data)
		mustDo(t, db.AddEntrySummed(5, e, data, crc32c.Of(crc32c.Checksum(data))))
	}
	mustDo(t, db.Close())
	db = openTest(t, efs, ifs, []string{"/d0"}, opts)
	defer db.Close()
	for e, data := range want {
		got, err := db.ReadEntry(5, int64(e))
		if err != nil {
			t.Fatalf("entry %d: %v", e, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("entry %d: bytes differ", e)
		}
	}
}
