package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
	"golang.org/x/sys/unix"
)

// backend builds a fresh FS and a directory inside it for one test.
type backend struct {
	name string
	open func(t *testing.T) (engine.FS, string)
}

func backends() []backend {
	return []backend{
		{"uring", func(t *testing.T) (engine.FS, string) {
			fs, err := engine.NewUring(engine.UringOptions{Entries: 16})
			if err != nil {
				t.Fatalf("io_uring backend unavailable on this machine: %v", err)
			}
			t.Cleanup(func() {
				if err := fs.Close(); err != nil {
					t.Errorf("close uring fs: %v", err)
				}
			})
			return fs, t.TempDir()
		}},
		{"std", func(t *testing.T) (engine.FS, string) { return engine.NewStd(), t.TempDir() }},
		{"mem", func(t *testing.T) (engine.FS, string) {
			fs := engine.NewMem()
			if err := fs.MkdirAll("/data", 0o755); err != nil {
				t.Fatal(err)
			}
			return fs, "/data"
		}},
		{"errorfs(mem)", func(t *testing.T) (engine.FS, string) {
			fs := errorfs.Wrap(engine.NewMem(), errorfs.None)
			if err := fs.MkdirAll("/data", 0o755); err != nil {
				t.Fatal(err)
			}
			return fs, "/data"
		}},
	}
}

// forEachBackend runs one conformance case over every backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, fs engine.FS, dir string)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			fs, dir := b.open(t)
			fn(t, fs, dir)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, fs engine.FS, name string) []byte {
	t.Helper()
	data, err := engine.ReadFile(fs, name)
	must(t, err)
	return data
}

func TestConformanceWriteReadVectored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		name := filepath.Join(dir, "f")
		f, err := fs.Create(name)
		must(t, err)
		defer f.Close()
		n, err := f.WriteAt([][]byte{[]byte("hello "), {}, []byte("vectored "), []byte("world")}, 0)
		must(t, err)
		if n != 20 || f.Size() != 20 {
			t.Fatalf("wrote %d, size %d; want 20", n, f.Size())
		}
		_, err = f.WriteAt([][]byte{[]byte("VEC")}, 6)
		must(t, err)
		must(t, f.Datasync())
		got := make([]byte, 20)
		n, err = f.ReadAt(got, 0)
		must(t, err)
		if string(got[:n]) != "hello VECtored world" {
			t.Fatalf("read %q", got[:n])
		}
		// Reading across the end returns what is there and io.EOF.
		n, err = f.ReadAt(make([]byte, 10), 15)
		if n != 5 || !errors.Is(err, io.EOF) {
			t.Fatalf("read past end: n=%d err=%v", n, err)
		}
		if n, err := f.ReadAt(make([]byte, 4), 100); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("read beyond end: n=%d err=%v", n, err)
		}
	})
}

func TestConformanceManyBuffers(t *testing.T) {
	// More buffers than IOV_MAX: the backend must split and still write all.
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		f, err := fs.Create(filepath.Join(dir, "many"))
		must(t, err)
		defer f.Close()
		var bufs [][]byte
		var want []byte
		for i := 0; i < 2500; i++ {
			b := []byte(fmt.Sprintf("%05d;", i))
			bufs = append(bufs, b)
			want = append(want, b...)
		}
		n, err := f.WriteAtSync(bufs, 0)
		must(t, err)
		if n != len(want) {
			t.Fatalf("wrote %d of %d", n, len(want))
		}
		if got := readAll(t, fs, f.Name()); !bytes.Equal(got, want) {
			t.Fatalf("content differs (len %d vs %d)", len(got), len(want))
		}
	})
}

func TestConformanceConcurrentAppend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		f, err := fs.Create(filepath.Join(dir, "log"))
		must(t, err)
		defer f.Close()
		const writers, each, recLen = 8, 50, 16
		var wg sync.WaitGroup
		offsets := make(chan int64, writers*each)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < each; i++ {
					rec := []byte(fmt.Sprintf("w%02d-i%03d-%s", w, i, "xxxxx"))[:recLen]
					off, err := f.Append([][]byte{rec[:5], rec[5:]})
					if err != nil {
						t.Error(err)
						return
					}
					offsets <- off
				}
			}(w)
		}
		wg.Wait()
		close(offsets)
		must(t, f.Datasync())
		seen := map[int64]bool{}
		for off := range offsets {
			if off%recLen != 0 || seen[off] {
				t.Fatalf("bad or duplicate append offset %d", off)
			}
			seen[off] = true
		}
		if f.Size() != writers*each*recLen {
			t.Fatalf("size %d, want %d", f.Size(), writers*each*recLen)
		}
		data := readAll(t, fs, f.Name())
		counts := map[string]int{}
		for i := 0; i < len(data); i += recLen {
			counts[string(data[i:i+recLen])]++
		}
		if len(counts) != writers*each {
			t.Fatalf("%d distinct records, want %d", len(counts), writers*each)
		}
	})
}

func TestConformanceConcurrentWriteAtSync(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		f, err := fs.Create(filepath.Join(dir, "wal"))
		must(t, err)
		defer f.Close()
		const n, size = 64, 512
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				block := bytes.Repeat([]byte{byte(i)}, size)
				if _, err := f.WriteAtSync([][]byte{block[:100], block[100:]}, int64(i*size)); err != nil {
					t.Error(err)
				}
			}(i)
		}
		wg.Wait()
		data := readAll(t, fs, f.Name())
		for i := 0; i < n; i++ {
			if !bytes.Equal(data[i*size:(i+1)*size], bytes.Repeat([]byte{byte(i)}, size)) {
				t.Fatalf("block %d corrupted", i)
			}
		}
	})
}

func TestConformancePreallocateTruncate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		name := filepath.Join(dir, "pre")
		f, err := fs.Create(name)
		must(t, err)
		defer f.Close()
		must(t, f.Preallocate(0, 1<<20))
		if f.Size() != 0 {
			t.Fatalf("preallocate changed the size to %d", f.Size())
		}
		off, err := f.Append([][]byte{[]byte("abc")})
		must(t, err)
		if off != 0 {
			t.Fatalf("append after preallocate at %d, want 0", off)
		}
		must(t, f.Truncate(10))
		if fi, err := fs.Stat(name); err != nil || fi.Size != 10 || f.Size() != 10 {
			t.Fatalf("after truncate(10): stat %+v err %v size %d", fi, err, f.Size())
		}
		got := readAll(t, fs, name)
		if !bytes.Equal(got, []byte("abc\x00\x00\x00\x00\x00\x00\x00")) {
			t.Fatalf("content %q", got)
		}
		must(t, f.Truncate(1))
		off, err = f.Append([][]byte{[]byte("Z")})
		must(t, err)
		if off != 1 || string(readAll(t, fs, name)) != "aZ" {
			t.Fatalf("append after shrink at %d: %q", off, readAll(t, fs, name))
		}
		must(t, f.DropCache())
		// Writeback of a written range (and of one past the end) is no
		// barrier and changes nothing readable.
		must(t, f.WriteBack(0, 2))
		must(t, f.WriteBack(0, 1<<20))
		if string(readAll(t, fs, name)) != "aZ" {
			t.Fatalf("content after writeback: %q", readAll(t, fs, name))
		}
	})
}

func TestConformanceNamespace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		sub := filepath.Join(dir, "a", "b")
		must(t, fs.MkdirAll(sub, 0o755))
		must(t, fs.MkdirAll(sub, 0o755)) // idempotent
		for _, n := range []string{"3", "1", "2"} {
			f, err := fs.Create(filepath.Join(sub, n))
			must(t, err)
			_, err = f.WriteAt([][]byte{[]byte(n)}, 0)
			must(t, err)
			must(t, f.Close())
		}
		names, err := fs.List(sub)
		must(t, err)
		if fmt.Sprint(names) != "[1 2 3]" {
			t.Fatalf("list: %v", names)
		}
		must(t, fs.Rename(filepath.Join(sub, "1"), filepath.Join(sub, "3")))
		if got := string(readAll(t, fs, filepath.Join(sub, "3"))); got != "1" {
			t.Fatalf("rename did not replace: %q", got)
		}
		must(t, fs.SyncDir(sub))
		must(t, fs.Remove(filepath.Join(sub, "2")))
		names, _ = fs.List(sub)
		if fmt.Sprint(names) != "[3]" {
			t.Fatalf("list after remove: %v", names)
		}
		fi, err := fs.Stat(sub)
		must(t, err)
		if !fi.IsDir() || fi.Name != "b" {
			t.Fatalf("stat dir: %+v", fi)
		}
		if err := fs.Remove(sub); !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			t.Fatalf("remove non-empty dir: %v", err)
		}
		free, err := fs.FreeSpace(dir)
		must(t, err)
		if free == 0 {
			t.Fatal("free space 0")
		}
		empty, err := fs.List(filepath.Join(dir, "a", "b", "..", "b"))
		must(t, err)
		if len(empty) != 1 {
			t.Fatalf("list via dot-dot: %v", empty)
		}
	})
}

func TestConformanceErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		missing := filepath.Join(dir, "nope")
		if _, err := fs.Open(missing); !engine.IsNotExist(err) {
			t.Fatalf("open missing: %v", err)
		}
		if _, err := fs.Create(filepath.Join(missing, "f")); !engine.IsNotExist(err) {
			t.Fatalf("create in missing dir: %v", err)
		}
		if err := fs.Remove(missing); !engine.IsNotExist(err) {
			t.Fatalf("remove missing: %v", err)
		}
		if _, err := fs.Stat(missing); !engine.IsNotExist(err) {
			t.Fatalf("stat missing: %v", err)
		}
		if _, err := fs.List(missing); !engine.IsNotExist(err) {
			t.Fatalf("list missing: %v", err)
		}
		if _, err := fs.Open(dir); !errors.Is(err, unix.EISDIR) {
			t.Fatalf("open dir as file: %v", err)
		}
		name := filepath.Join(dir, "ro")
		w, err := fs.Create(name)
		must(t, err)
		must(t, w.Close())
		if err := w.Close(); !errors.Is(err, engine.ErrClosed) {
			t.Fatalf("double close: %v", err)
		}
		if _, err := w.WriteAt([][]byte{[]byte("x")}, 0); !errors.Is(err, engine.ErrClosed) {
			t.Fatalf("write after close: %v", err)
		}
		r, err := fs.Open(name)
		must(t, err)
		defer r.Close()
		_, err = r.WriteAt([][]byte{[]byte("x")}, 0)
		if !errors.Is(err, unix.EBADF) {
			t.Fatalf("write to read-only handle: %v", err)
		}
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Path != name || ee.Op == "" {
			t.Fatalf("error does not name op and path: %v", err)
		}
	})
}

// TestConformanceRandomOps checks each backend against a byte-slice model
// under a seeded random mix of writes, appends, truncates and reads.
func TestConformanceRandomOps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fs engine.FS, dir string) {
		seed := int64(42)
		rng := rand.New(rand.NewSource(seed))
		f, err := fs.Create(filepath.Join(dir, "model"))
		must(t, err)
		defer f.Close()
		var model []byte
		for i := 0; i < 400; i++ {
			switch op := rng.Intn(10); {
			case op < 4:
				off := int64(rng.Intn(len(model) + 100))
				data := randBytes(rng, rng.Intn(300))
				_, err := f.WriteAt(splitRandom(rng, data), off)
				must(t, err)
				model = applyWrite(model, off, data)
			case op < 7:
				data := randBytes(rng, rng.Intn(300))
				off, err := f.Append(splitRandom(rng, data))
				must(t, err)
				if off != int64(len(model)) {
					t.Fatalf("seed %d step %d: append at %d, model len %d", seed, i, off, len(model))
				}
				model = append(model, data...)
			case op < 8:
				size := int64(rng.Intn(len(model) + 50))
				must(t, f.Truncate(size))
				model = applyWrite(model[:min(int64(len(model)), size)], size, nil)
			default:
				must(t, f.Datasync())
			}
			if f.Size() != int64(len(model)) {
				t.Fatalf("seed %d step %d: size %d, model %d", seed, i, f.Size(), len(model))
			}
		}
		if got := readAll(t, fs, f.Name()); !bytes.Equal(got, model) {
			t.Fatalf("seed %d: content differs from model", seed)
		}
	})
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

func splitRandom(rng *rand.Rand, data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		n := 1 + rng.Intn(len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

func applyWrite(model []byte, off int64, data []byte) []byte {
	if end := off + int64(len(data)); end > int64(len(model)) {
		model = append(model, make([]byte, end-int64(len(model)))...)
	}
	copy(model[off:], data)
	return model
}
