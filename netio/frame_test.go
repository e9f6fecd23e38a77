package netio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// fakeInbound mimics gnet's inbound buffer: Peek fails when too little is
// buffered, and Discard poisons what it consumes, so a sink that kept a
// frame past its call would see garbage.
type fakeInbound struct{ buf []byte }

func (f *fakeInbound) InboundBuffered() int { return len(f.buf) }

func (f *fakeInbound) Peek(n int) ([]byte, error) {
	if n > len(f.buf) {
		return nil, io.ErrShortBuffer
	}
	return f.buf[:n:n], nil
}

func (f *fakeInbound) Discard(n int) (int, error) {
	n = min(n, len(f.buf))
	for i := range f.buf[:n] {
		f.buf[i] = 0xee
	}
	f.buf = f.buf[n:]
	return n, nil
}

// sliceSink collects copies of the frames it gets.
type sliceSink struct {
	frames  [][]byte
	stopAt  int // stop after this many frames (0: never)
	failOn  int // fail on this frame number, counting from 1 (0: never)
	failErr error
}

func (s *sliceSink) stopped() bool { return s.stopAt > 0 && len(s.frames) >= s.stopAt }

func (s *sliceSink) frame(f []byte) error {
	s.frames = append(s.frames, bytes.Clone(f))
	if len(s.frames) == s.failOn {
		return s.failErr
	}
	return nil
}

// wholeFrames applies nextFrame to one contiguous buffer: the frames, and
// the error that ends the stream, if any.
func wholeFrames(buf []byte, maxSize int) ([][]byte, error) {
	var frames [][]byte
	for {
		f, need, err := nextFrame(buf, maxSize)
		if err != nil {
			return frames, err
		}
		if f == nil {
			if need <= len(buf) {
				panic("nextFrame asked for bytes it already has")
			}
			return frames, nil
		}
		frames = append(frames, bytes.Clone(f))
		buf = buf[len(f):]
	}
}

// feed delivers buf to drainFrames in the given chunk sizes.
func feed(buf []byte, chunks []int, maxSize int) ([][]byte, error) {
	in := &fakeInbound{}
	sink := &sliceSink{}
	for _, n := range chunks {
		in.buf = append(in.buf, buf[:n]...)
		buf = buf[n:]
		if err := drainFrames(in, maxSize, sink); err != nil {
			return sink.frames, err
		}
	}
	return sink.frames, nil
}

func stream(payloads ...[]byte) []byte {
	var b []byte
	for _, p := range payloads {
		b = append(b, mkFrame(p)...)
	}
	return b
}

func TestNextFrame(t *testing.T) {
	f := mkFrame([]byte("hello"))
	cases := []struct {
		name      string
		buf       []byte
		wantFrame []byte
		wantNeed  int
		wantErr   error
	}{
		{"empty", nil, nil, 4, nil},
		{"partial prefix", f[:3], nil, 4, nil},
		{"prefix only", f[:4], nil, 9, nil},
		{"partial body", f[:8], nil, 9, nil},
		{"whole", f, f, 9, nil},
		{"whole and more", append(bytes.Clone(f), 0, 0), f, 9, nil},
		{"zero size", []byte{0, 0, 0, 0, 1}, nil, 0, ErrEmptyFrame},
		{"at limit", mkFrame(make([]byte, 16)), mkFrame(make([]byte, 16)), 20, nil},
		{"over limit", []byte{0, 0, 0, 17}, nil, 0, ErrFrameTooLarge},
		{"huge", []byte{0xff, 0xff, 0xff, 0xff}, nil, 0, ErrFrameTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame, need, err := nextFrame(tc.buf, 16)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if !bytes.Equal(frame, tc.wantFrame) || (err == nil && need != tc.wantNeed) {
				t.Fatalf("frame %x need %d, want %x need %d", frame, need, tc.wantFrame, tc.wantNeed)
			}
		})
	}
}

func TestFrameTooLargeNamesSizeAndLimit(t *testing.T) {
	_, _, err := nextFrame([]byte{0, 0, 4, 1}, 1024)
	if err == nil || err.Error() != "netio: frame too large: size 1025 bytes exceeds the limit of 1024" {
		t.Fatalf("err %v", err)
	}
}

// TestDrainFramesSplitEveryByte cuts a stream at every byte boundary, and
// also feeds it one byte at a time: the frames delivered never change.
func TestDrainFramesSplitEveryByte(t *testing.T) {
	buf := stream([]byte("a"), bytes.Repeat([]byte("b"), 7), bytes.Repeat([]byte("c"), 300), []byte("dd"))
	want, err := wholeFrames(buf, 1024)
	if err != nil || len(want) != 4 {
		t.Fatalf("reference: %d frames, %v", len(want), err)
	}
	for k := 0; k <= len(buf); k++ {
		got, err := feed(buf, []int{k, len(buf) - k}, 1024)
		if err != nil || !equalFrames(got, want) {
			t.Fatalf("split at %d: %d frames, %v", k, len(got), err)
		}
	}
	ones := make([]int, len(buf))
	for i := range ones {
		ones[i] = 1
	}
	if got, err := feed(buf, ones, 1024); err != nil || !equalFrames(got, want) {
		t.Fatalf("byte by byte: %d frames, %v", len(got), err)
	}
}

func TestDrainFramesStopsAndFails(t *testing.T) {
	buf := stream([]byte("1"), []byte("2"), []byte("3"), []byte("4"))
	in := &fakeInbound{buf: bytes.Clone(buf)}
	sink := &sliceSink{stopAt: 2}
	if err := drainFrames(in, 16, sink); err != nil || len(sink.frames) != 2 || in.InboundBuffered() != 10 {
		t.Fatalf("stop: %d frames, %d left, %v", len(sink.frames), in.InboundBuffered(), err)
	}
	sink.stopAt = 0
	sink.failOn, sink.failErr = 3, errors.New("boom")
	if err := drainFrames(in, 16, sink); err != sink.failErr || len(sink.frames) != 3 {
		t.Fatalf("fail: %d frames, %v", len(sink.frames), err)
	}
	// The failing frame is consumed too; the rest stays.
	if in.InboundBuffered() != 5 {
		t.Fatalf("%d bytes left, want 5", in.InboundBuffered())
	}
}

func equalFrames(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// FuzzNextFrame checks that feeding any stream in any chunks through the
// frame loop yields what nextFrame finds in the whole stream, and that every
// frame is well formed.
func FuzzNextFrame(f *testing.F) {
	f.Add(stream([]byte("a"), []byte("bcd")), uint64(1), uint16(16))
	f.Add([]byte{0, 0, 0, 0}, uint64(2), uint16(16))
	f.Add([]byte{0, 0, 1, 0, 1, 2, 3}, uint64(3), uint16(16))
	f.Add(stream(make([]byte, 300), []byte("x")), uint64(4), uint16(300))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, maxSize uint16) {
		max := 1 + int(maxSize%512)
		want, wantErr := wholeFrames(data, max)
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		var chunks []int
		for left := len(data); left > 0; {
			n := 1 + rng.IntN(min(left, 64))
			chunks = append(chunks, n)
			left -= n
		}
		got, gotErr := feed(data, chunks, max)
		if (gotErr == nil) != (wantErr == nil) || !equalFrames(got, want) {
			t.Fatalf("chunked: %d frames, %v; whole: %d frames, %v", len(got), gotErr, len(want), wantErr)
		}
		for _, fr := range got {
			size := int(binary.BigEndian.Uint32(fr))
			if size == 0 || size > max || len(fr) != 4+size {
				t.Fatalf("bad frame: size %d, len %d, max %d", size, len(fr), max)
			}
		}
		if wantErr != nil && !errors.Is(wantErr, ErrEmptyFrame) && !errors.Is(wantErr, ErrFrameTooLarge) {
			t.Fatalf("unexpected error kind %v", wantErr)
		}
	})
}
