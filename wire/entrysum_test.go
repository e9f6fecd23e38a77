package wire

import (
	"bytes"
	"testing"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// An entry's sum is built from the producer's checksum where storage can
// use it (an entry of crc32c.CombineWorthFrom and more) and not computed at
// all below that, where every format hashes the bytes itself anyway: the
// broker must not read an unbatched message once more for nothing.
func TestEntrySumOnlyWhereStorageCombines(t *testing.T) {
	name, seq := "p", uint64(1)
	md := &pb.MessageMetadata{ProducerName: &name, SequenceId: &seq, PublishTime: &seq}
	for _, size := range []int{10, 1024, crc32c.CombineWorthFrom, 80 << 10} {
		raw, err := AppendEntry(nil, md, bytes.Repeat([]byte{7}, size))
		if err != nil {
			t.Fatal(err)
		}
		e, err := ParseEntry(raw)
		if err != nil {
			t.Fatal(err)
		}
		sum := e.Sum()
		large := len(raw)-magicLen-crcLen >= crc32c.CombineWorthFrom
		switch {
		case sum.OK != large:
			t.Fatalf("%d-byte payload: sum known %v, want %v", size, sum.OK, large)
		case sum.OK && sum.CRC != crc32c.Checksum(raw):
			t.Fatalf("%d-byte payload: sum %08x, the entry's CRC is %08x", size, sum.CRC, crc32c.Checksum(raw))
		}
	}
}
