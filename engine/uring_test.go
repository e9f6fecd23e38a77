package engine

import (
	"bytes"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestUringLeaderHandOffStress drives many goroutines through a tiny ring
// (4 completion slots) with a mix of one- and two-SQE operations, so slots
// run out, leadership changes hands constantly and linked chains wait on
// their second slot. A lost wake-up would hang; the test fails instead.
func TestUringLeaderHandOffStress(t *testing.T) {
	fs, err := NewUring(UringOptions{Entries: 2})
	if err != nil {
		t.Fatalf("io_uring unavailable: %v", err)
	}
	defer fs.Close()
	f, err := fs.Create(filepath.Join(t.TempDir(), "stress"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const goroutines, ops, block = 64, 40, 64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			want := bytes.Repeat([]byte{byte(g)}, block)
			got := make([]byte, block)
			off := int64(g * block)
			for i := 0; i < ops; i++ {
				var err error
				switch i % 3 {
				case 0:
					_, err = f.WriteAtSync([][]byte{want[:10], want[10:]}, off)
				case 1:
					_, err = f.WriteAt([][]byte{want}, off)
				default:
					err = f.Datasync()
				}
				if err == nil {
					_, err = f.ReadAt(got, off)
				}
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("goroutine %d op %d: err %v, data ok %v", g, i, err, bytes.Equal(got, want))
					return
				}
			}
		}(g)
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		buf := make([]byte, 1<<20)
		t.Fatalf("operations hung (lost wake-up?):\n%s", buf[:runtime.Stack(buf, true)])
	}
	if got := f.Size(); got != goroutines*block {
		t.Fatalf("size %d", got)
	}
}

// TestUringOneEntryRing: a linked write+datasync needs two SQEs; a ring asked
// for one entry must still serve it rather than break or hang.
func TestUringOneEntryRing(t *testing.T) {
	fs, err := NewUring(UringOptions{Entries: 1})
	if err != nil {
		t.Fatalf("io_uring unavailable: %v", err)
	}
	defer fs.Close()
	f, err := fs.Create(filepath.Join(t.TempDir(), "one"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < 3; i++ {
		if _, err := f.WriteAtSync([][]byte{[]byte("ab"), []byte("cd")}, int64(4*i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if f.Size() != 12 {
		t.Fatalf("size %d", f.Size())
	}
}

// Separate gives a uring FS a ring of its own over the same files: what
// one writes the other reads, and closing the separate one leaves the
// first working. Other backends come back as they are.
func TestSeparate(t *testing.T) {
	fs, err := NewUring(UringOptions{Entries: 8})
	if err != nil {
		t.Fatalf("io_uring unavailable: %v", err)
	}
	defer fs.Close()
	sep, err := Separate(fs)
	if err != nil {
		t.Fatal(err)
	}
	if sep == fs {
		t.Fatal("Separate returned the same uring FS")
	}
	if a, b := fs.(*osFS).io.(*uringIO), sep.(*osFS).io.(*uringIO); a.ring == b.ring || b.opts != a.opts {
		t.Fatalf("separate FS shares the ring or lost its options (%+v vs %+v)", b.opts, a.opts)
	}
	name := filepath.Join(t.TempDir(), "shared")
	f, err := sep.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAtSync([][]byte{[]byte("journal")}, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sep.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(fs, name)
	if err != nil || string(got) != "journal" {
		t.Fatalf("read through the first FS after closing the separate one: %q, %v", got, err)
	}
	for _, other := range []FS{NewStd(), NewMem()} {
		if s, err := Separate(other); err != nil || s != other {
			t.Fatalf("%s: Separate = %v, %v; want the FS itself", other.Backend(), s, err)
		}
	}
}
