package journal

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// A record header built from the payload's CRC (AddSummed) is the header
// built by reading the payload: same bytes, for sizes on both sides of
// crc32c.CombineWorthFrom.
func TestSummedRecordHeaderIsTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 11))
	for _, size := range []int{0, 1, 1000, crc32c.CombineWorthFrom - 1, crc32c.CombineWorthFrom, 20_000, 300_000} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		var read, summed [recordHeaderSize]byte
		putRecordHeader(read[:], 7, int64(size), payload, crc32c.Known{})
		putRecordHeader(summed[:], 7, int64(size), payload, crc32c.Of(crc32c.Checksum(payload)))
		if read != summed {
			t.Fatalf("%d bytes: header %x from the CRC, %x from the payload", size, summed, read)
		}
	}
}

// Entries added with their CRC replay whole: replay checks every record's
// checksum, so one built wrong would end the replay there.
func TestAddSummedReplays(t *testing.T) {
	fs := engine.NewMem()
	j, _ := openT(t, fs, Options{MaxFileSize: 256 << 10})
	const n = 60
	for e := int64(0); e < n; e++ {
		payload := payloadFor(3, e, summedSize(e))
		done := make(chan error, 1)
		if err := j.AddSummed(3, e, payload, crc32c.Of(crc32c.Checksum(payload)), func(_ Mark, err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("add never completed")
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, got := openT(t, fs, Options{MaxFileSize: 256 << 10})
	if len(got) != n {
		t.Fatalf("%d entries replayed, want %d", len(got), n)
	}
	for _, e := range got {
		if !bytes.Equal(e.Payload, payloadFor(3, e.EntryID, summedSize(e.EntryID))) {
			t.Fatalf("entry %d: bytes differ", e.EntryID)
		}
	}
}

func summedSize(e int64) int { return int(e%5) * 9000 }
