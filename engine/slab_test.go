package engine_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/magnetar-io/magnetar/engine"
)

func TestSlabBuffersAreAlignedAndBounded(t *testing.T) {
	s, err := engine.NewSlab(5000, 3)
	must(t, err)
	if s.BufSize() != 8192 {
		t.Fatalf("buffer size %d, want 5000 rounded up to pages", s.BufSize())
	}
	var got [][]byte
	for i := 0; i < 3; i++ {
		b := s.TryGet()
		if b == nil || len(b) != 8192 || cap(b) != 8192 || uintptr(unsafe.Pointer(&b[0]))%4096 != 0 {
			t.Fatalf("buffer %d: len %d cap %d", i, len(b), cap(b))
		}
		got = append(got, b)
	}
	if s.TryGet() != nil {
		t.Fatal("slab handed out more buffers than it has")
	}
	if err := s.Close(); err == nil {
		t.Fatal("close with buffers out succeeded")
	}
	for _, b := range got {
		s.Put(b)
	}
	must(t, s.Close())
}

// TestRegisteredBuffersRoundTrip uses slab memory registered with the ring,
// so single-buffer writes and reads take WRITE_FIXED / READ_FIXED.
func TestRegisteredBuffersRoundTrip(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			fs, dir := b.open(t)
			s, err := engine.NewSlab(4096, 4)
			must(t, err)
			defer s.Close()
			must(t, engine.RegisterBuffers(fs, s.Region()))
			f, err := fs.Create(filepath.Join(dir, "fixed"))
			must(t, err)
			defer f.Close()
			w := s.Get()
			defer s.Put(w)
			copy(w, bytes.Repeat([]byte("fixed!"), 600))
			_, err = f.WriteAtSync([][]byte{w}, 0)
			must(t, err)
			r := s.Get()
			defer s.Put(r)
			n, err := f.ReadAt(r, 0)
			must(t, err)
			if n != 4096 || !bytes.Equal(r, w) {
				t.Fatal("read back differs")
			}
		})
	}
}
