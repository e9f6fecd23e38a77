package broker

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// An uncompressed_size no codec could reach from the payload is refused
// before anything is allocated (a 64 KiB entry claiming 64 MiB made every
// admin read of it allocate 64 MiB).
func TestDecompressRefusesImpossibleSizes(t *testing.T) {
	ib := newInflateBudget()
	payload := make([]byte, 64<<10)
	for _, codec := range []pb.CompressionType{pb.CompressionType_LZ4, pb.CompressionType_ZLIB, pb.CompressionType_SNAPPY} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := ib.decompress(context.Background(), codec, payload, maxUncompressed); err == nil {
			t.Fatalf("%s: 64 KiB claiming 64 MiB accepted", codec)
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Fatalf("%s: refusing allocated %d bytes", codec, grew)
		}
	}
}

// Decompressions in flight share one budget: one that does not fit
// waits (here until its context ends) instead of allocating.
func TestDecompressWaitsForBudget(t *testing.T) {
	ib := newInflateBudget()
	if err := ib.sem.Acquire(context.Background(), maxUncompressed-10); err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 1000)
	block := make([]byte, lz4.CompressBlockBound(len(src)))
	n, err := lz4.CompressBlock(src, block, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := ib.decompress(ctx, pb.CompressionType_LZ4, block[:n], len(src)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("over budget: %v", err)
	}
	ib.sem.Release(maxUncompressed - 10)
	out, err := ib.decompress(context.Background(), pb.CompressionType_LZ4, block[:n], len(src))
	if err != nil || len(out) != len(src) {
		t.Fatalf("within budget: %d bytes, %v", len(out), err)
	}
}
