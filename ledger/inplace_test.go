package ledger

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Entries appended in place (encoded in the headroom in front of the
// payload) are the same entries as appended by copy, for both digests:
// read back by another client they verify and hold the payloads; a
// buffer shorter than the headroom is refused alone. Payloads run past
// crc32c.CombineWorthFrom, so digests and the bookies' record checksums
// built from the payload's CRC (not by reading it again) are checked too.
func TestAppendAsyncInPlace(t *testing.T) {
	for _, digest := range []DigestType{DigestCRC32C, DigestMAC} {
		t.Run(string(digest), func(t *testing.T) {
			c := newCluster(t, 3, 7)
			cl := c.client(t, Config{})
			ctx := ctxFor(t, 30*time.Second)
			w, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password,
				DigestType: digest})
			if err != nil {
				t.Fatal(err)
			}
			const n = 50
			done := make(chan error, n+1)
			var want [][]byte
			for i := range n {
				payload := []byte(fmt.Sprintf("entry-%03d-%s", i, bytes.Repeat([]byte{byte(i)}, i*i*4)))
				want = append(want, payload)
				if i%2 == 0 {
					buf := make([]byte, Headroom+len(payload))
					copy(buf[Headroom:], payload)
					w.AppendAsyncInPlace(buf, crc32c.Of(crc32c.Checksum(payload)), func(_ int64, err error) { done <- err })
				} else {
					w.AppendAsync(payload, func(_ int64, err error) { done <- err })
				}
			}
			w.AppendAsyncInPlace(make([]byte, Headroom-1), crc32c.Known{}, func(id int64, err error) {
				if err == nil || id != -1 {
					done <- fmt.Errorf("a short buffer was appended as %d (%v)", id, err)
					return
				}
				done <- nil
			})
			for range n + 1 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			r, err := c.client(t, Config{}).OpenNoRecovery(ctx, w.ID(), password)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Read(ctx, 0, n-1)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range got {
				if !bytes.Equal(e.Payload, want[i]) {
					t.Fatalf("entry %d: %q, want %q", i, e.Payload, want[i])
				}
			}
		})
	}
}
