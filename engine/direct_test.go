package engine_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/magnetar-io/magnetar/engine"
)

// directFile creates name and switches it to direct writes.
func directFile(t *testing.T, fs engine.FS, name string) engine.File {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.DirectWrites(); err != nil {
		t.Fatalf("DirectWrites on %s: %v", fs.Backend(), err)
	}
	return f
}

// randomBufs splits total bytes of random data into buffers of random sizes
// (so their addresses and lengths are unaligned) and returns them joined too.
func randomBufs(rng *rand.Rand, total int) ([][]byte, []byte) {
	all := make([]byte, total)
	rng.Read(all)
	var bufs [][]byte
	for rest := all; len(rest) > 0; {
		n := min(len(rest), 1+rng.Intn(70000))
		bufs = append(bufs, rest[:n:n])
		rest = rest[n:]
	}
	return bufs, all
}

func readBack(t *testing.T, f engine.File, off int64, n int) []byte {
	t.Helper()
	got := make([]byte, n)
	if _, err := f.ReadAt(got, off); err != nil {
		t.Fatalf("read %d bytes at %d: %v", n, off, err)
	}
	return got
}

// Unaligned buffers of any size (more than one bounce buffer's worth among
// them) land byte for byte at an aligned offset, with and without the sync,
// and buffered reads of the same file see them.
func TestDirectWritesUnalignedBuffers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		rng := rand.New(rand.NewSource(7))
		f := directFile(t, fs, filepath.Join(dir, "d"))
		var want []byte
		for i, total := range []int{engine.DirectAlign, 3<<20 + 5*engine.DirectAlign, 64 * engine.DirectAlign} {
			bufs, all := randomBufs(rng, total)
			off := int64(len(want))
			var err error
			if i%2 == 0 {
				_, err = f.WriteAtSync(bufs, off)
			} else {
				_, err = f.WriteAt(bufs, off)
			}
			if err != nil {
				t.Fatalf("direct write %d of %d bytes at %d: %v", i, total, off, err)
			}
			want = append(want, all...)
		}
		if f.Size() != int64(len(want)) {
			t.Fatalf("size %d, want %d", f.Size(), len(want))
		}
		if got := readBack(t, f, 0, len(want)); !bytes.Equal(got, want) {
			t.Fatal("direct writes read back differently")
		}
	})
}

// A page the page cache holds is replaced by a direct write over it: readers
// never see the old bytes.
func TestDirectWritesReplaceCachedPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		f := directFile(t, fs, filepath.Join(dir, "d"))
		old := bytes.Repeat([]byte{1}, 2*engine.DirectAlign)
		if _, err := f.WriteAtSync([][]byte{old}, 0); err != nil {
			t.Fatal(err)
		}
		readBack(t, f, 0, len(old)) // now cached (on a real file system)
		repl := bytes.Repeat([]byte{2}, engine.DirectAlign)
		if _, err := f.WriteAt([][]byte{repl[:100], repl[100:]}, engine.DirectAlign); err != nil {
			t.Fatal(err)
		}
		want := append(old[:engine.DirectAlign:engine.DirectAlign], repl...)
		if got := readBack(t, f, 0, len(want)); !bytes.Equal(got, want) {
			t.Fatal("a read after a direct write saw the cached old bytes")
		}
	})
}

// Unaligned offsets and lengths fail with ErrUnaligned and write nothing.
func TestDirectWritesRejectUnaligned(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		f := directFile(t, fs, filepath.Join(dir, "d"))
		block := make([]byte, engine.DirectAlign)
		cases := []struct {
			name string
			bufs [][]byte
			off  int64
		}{
			{"offset", [][]byte{block}, 512},
			{"length", [][]byte{block[:100]}, 0},
			{"length over two buffers", [][]byte{block, block[:1]}, 0},
		}
		for _, c := range cases {
			if _, err := f.WriteAt(c.bufs, c.off); !errors.Is(err, engine.ErrUnaligned) {
				t.Errorf("%s: WriteAt = %v, want ErrUnaligned", c.name, err)
			}
			if _, err := f.WriteAtSync(c.bufs, c.off); !errors.Is(err, engine.ErrUnaligned) {
				t.Errorf("%s: WriteAtSync = %v, want ErrUnaligned", c.name, err)
			}
		}
		if f.Size() != 0 {
			t.Fatalf("rejected writes left a %d-byte file", f.Size())
		}
	})
}

// The direct descriptor follows the file, not its name: a rename between
// DirectWrites and the writes (the journal renames recycled files) changes
// nothing.
func TestDirectWritesFollowRename(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		f := directFile(t, fs, a)
		if err := fs.Rename(a, b); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{9}, engine.DirectAlign)
		if _, err := f.WriteAtSync([][]byte{data}, 0); err != nil {
			t.Fatal(err)
		}
		g, err := fs.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if got := readBack(t, g, 0, len(data)); !bytes.Equal(got, data) {
			t.Fatal("the renamed file does not hold the direct write")
		}
	})
}

// Buffers that are already aligned (a slab's) go to the kernel without a copy
// and land as well.
func TestDirectWritesAlignedBuffers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		slab, err := engine.NewSlab(2*engine.DirectAlign, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer slab.Close()
		b1, b2 := slab.Get(), slab.Get()
		defer slab.Put(b1)
		defer slab.Put(b2)
		rng := rand.New(rand.NewSource(3))
		rng.Read(b1)
		rng.Read(b2)
		f := directFile(t, fs, filepath.Join(dir, "d"))
		if _, err := f.WriteAtSync([][]byte{b1, b2}, engine.DirectAlign); err != nil {
			t.Fatal(err)
		}
		want := append(append([]byte(nil), b1...), b2...)
		if got := readBack(t, f, engine.DirectAlign, len(want)); !bytes.Equal(got, want) {
			t.Fatal("aligned direct writes read back differently")
		}
	})
}

// ReadDirect returns what was written, direct or buffered, on a file opened
// for reading only too; a read past the end stops at the end with io.EOF.
func TestReadDirectReadsWhatWasWritten(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		rng := rand.New(rand.NewSource(11))
		name := filepath.Join(dir, "d")
		f := directFile(t, fs, name)
		bufs, want := randomBufs(rng, 40*engine.DirectAlign)
		if _, err := f.WriteAtSync(bufs, 0); err != nil {
			t.Fatal(err)
		}
		tail := make([]byte, 100) // a buffered file may end inside a block
		rng.Read(tail)
		buffered, err := fs.OpenReadWrite(name)
		must(t, err)
		t.Cleanup(func() { buffered.Close() })
		if _, err := buffered.WriteAtSync([][]byte{tail}, int64(len(want))); err != nil {
			t.Fatal(err)
		}
		want = append(want, tail...)
		ro, err := fs.Open(name)
		must(t, err)
		t.Cleanup(func() { ro.Close() })
		for _, file := range []engine.File{f, ro} {
			got := engine.AlignedBuffer(8 * engine.DirectAlign)
			if n, err := file.ReadDirect(got, 4*engine.DirectAlign); err != nil || n != len(got) {
				t.Fatalf("ReadDirect in the middle = %d, %v", n, err)
			}
			if !bytes.Equal(got, want[4*engine.DirectAlign:12*engine.DirectAlign]) {
				t.Fatal("ReadDirect returned other bytes than were written")
			}
			end := engine.AlignedBuffer(2 * engine.DirectAlign)
			n, err := file.ReadDirect(end, 40*engine.DirectAlign)
			if !errors.Is(err, io.EOF) || n != len(tail) || !bytes.Equal(end[:n], tail) {
				t.Fatalf("ReadDirect over the end = %d, %v; want %d bytes and io.EOF", n, err, len(tail))
			}
		}
	})
}

// Unaligned offsets, lengths and buffers fail with ErrUnaligned.
func TestReadDirectRejectsUnaligned(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		f := directFile(t, fs, filepath.Join(dir, "d"))
		if _, err := f.WriteAtSync([][]byte{make([]byte, 4*engine.DirectAlign)}, 0); err != nil {
			t.Fatal(err)
		}
		buf := engine.AlignedBuffer(3 * engine.DirectAlign)
		cases := []struct {
			name string
			p    []byte
			off  int64
		}{
			{"offset", buf[:engine.DirectAlign], 512},
			{"length", buf[:100], 0},
			{"buffer", buf[512 : 512+engine.DirectAlign], 0},
		}
		for _, c := range cases {
			if _, err := f.ReadDirect(c.p, c.off); !errors.Is(err, engine.ErrUnaligned) {
				t.Errorf("%s: ReadDirect = %v, want ErrUnaligned", c.name, err)
			}
		}
	})
}

// AlignedBuffer's address is aligned whatever the size.
func TestAlignedBuffer(t *testing.T) {
	for _, n := range []int{1, 100, engine.DirectAlign, 3*engine.DirectAlign + 7, 1 << 20} {
		b := engine.AlignedBuffer(n)
		if len(b) != n || cap(b) != n || uintptr(unsafe.Pointer(&b[0]))%engine.DirectAlign != 0 {
			t.Fatalf("AlignedBuffer(%d): len %d cap %d at %p", n, len(b), cap(b), &b[0])
		}
	}
}
