package broker

// Payload decompression, for the admin endpoints that answer a message's
// payload (dispatch never decompresses: clients do). The codecs and their
// framing are the clients': LZ4 and SNAPPY raw blocks, ZLIB streams, ZSTD
// frames.

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"io"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"golang.org/x/sync/semaphore"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// maxUncompressed bounds a decompressed payload: uncompressed_size is
// the client's word, and a crafted entry must not make the broker
// allocate without limit.
const maxUncompressed = 64 << 20

// maxRatio is the most each codec can expand its input (a block of LZ4
// literals-free matches, deflate's 1032:1, Snappy's copies); an
// uncompressed_size beyond it is a lie, refused before allocating it.
// ZSTD's run-length blocks have no useful bound: the budget covers it.
var maxRatio = map[pb.CompressionType]int{
	pb.CompressionType_LZ4: 255, pb.CompressionType_ZLIB: 1032, pb.CompressionType_SNAPPY: 22,
}

// inflateBudget bounds the memory all decompressions in flight may take
// together (parallel admin reads of crafted entries reached 440 MiB
// before): each waits for its uncompressed size out of maxUncompressed.
type inflateBudget struct{ sem *semaphore.Weighted }

func newInflateBudget() inflateBudget {
	return inflateBudget{sem: semaphore.NewWeighted(maxUncompressed)}
}

// decompress returns the payload as the producer wrote it before
// compression; size is the metadata's uncompressed_size. The memory it
// takes comes out of the budget, waited for under ctx.
func (ib inflateBudget) decompress(ctx context.Context, codec pb.CompressionType, data []byte, size int) ([]byte, error) {
	if codec == pb.CompressionType_NONE {
		return data, nil
	}
	if size < 0 || size > maxUncompressed {
		return nil, fmt.Errorf("%s payload: uncompressed size %d is outside [0, %d]", codec, size, maxUncompressed)
	}
	if r, ok := maxRatio[codec]; ok && size > r*len(data)+64 {
		return nil, fmt.Errorf("%s payload: uncompressed size %d is more than %d bytes can expand to", codec, size, len(data))
	}
	if err := ib.sem.Acquire(ctx, int64(size)); err != nil {
		return nil, fmt.Errorf("%s payload: waiting for memory to decompress %d bytes: %w", codec, size, err)
	}
	defer ib.sem.Release(int64(size))
	out, err := decode(codec, data, size)
	if err != nil {
		return nil, fmt.Errorf("%s payload: %w", codec, err)
	}
	if len(out) != size {
		return nil, fmt.Errorf("%s payload: %d bytes decompressed, metadata says %d", codec, len(out), size)
	}
	return out, nil
}

func decode(codec pb.CompressionType, data []byte, size int) ([]byte, error) {
	switch codec {
	case pb.CompressionType_LZ4:
		out := make([]byte, size)
		n, err := lz4.UncompressBlock(data, out)
		return out[:n], err
	case pb.CompressionType_ZLIB:
		r, err := zlib.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(io.LimitReader(r, int64(size)+1))
	case pb.CompressionType_ZSTD:
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxUncompressed))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DecodeAll(data, make([]byte, 0, size))
	case pb.CompressionType_SNAPPY:
		if n, err := snappy.DecodedLen(data); err != nil || n != size {
			return nil, fmt.Errorf("decoded length %d (%v), metadata says %d", n, err, size)
		}
		return snappy.Decode(nil, data)
	}
	return nil, fmt.Errorf("unknown compression %d", codec)
}
