package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"golang.org/x/sys/unix"
)

// TestDiskFullRealKernel writes to /dev/full, which fails every write with
// ENOSPC from the kernel, through both real backends.
func TestDiskFullRealKernel(t *testing.T) {
	for _, b := range backends()[:2] {
		t.Run(b.name, func(t *testing.T) {
			fs, _ := b.open(t)
			f, err := fs.OpenReadWrite("/dev/full")
			if err != nil {
				t.Fatalf("open /dev/full: %v", err)
			}
			defer f.Close()
			_, err = f.WriteAtSync([][]byte{[]byte("entry")}, 0)
			if !engine.IsNoSpace(err) {
				t.Fatalf("want ENOSPC, got %v", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "/dev/full") || !strings.Contains(msg, "disk full") {
				t.Fatalf("error does not name the path and the problem: %s", msg)
			}
		})
	}
}

func TestMemCapacityNoSpace(t *testing.T) {
	fs := engine.NewMemWithOptions(engine.MemOptions{Capacity: 100})
	f, err := fs.Create("/f")
	must(t, err)
	n, err := f.WriteAt([][]byte{bytes.Repeat([]byte{1}, 150)}, 0)
	if n != 100 || !engine.IsNoSpace(err) {
		t.Fatalf("over capacity: n=%d err=%v", n, err)
	}
	if free, _ := fs.FreeSpace("/"); free != 0 {
		t.Fatalf("free space %d after filling", free)
	}
	if err := f.Preallocate(0, 200); !engine.IsNoSpace(err) {
		t.Fatalf("preallocate past capacity: %v", err)
	}
	must(t, f.Truncate(10))
	if free, _ := fs.FreeSpace("/"); free != 90 {
		t.Fatalf("free space %d after truncate, want 90", free)
	}
}

// TestFdLimit runs itself in a child process with a tiny RLIMIT_NOFILE and
// checks that running out of descriptors is a clear error, not a panic.
func TestFdLimit(t *testing.T) {
	if os.Getenv("MAGNETAR_FDLIMIT_CHILD") == "1" {
		fdLimitChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFdLimit$")
	cmd.Env = append(os.Environ(), "MAGNETAR_FDLIMIT_CHILD=1", "MAGNETAR_FDLIMIT_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	for _, backend := range []string{"uring", "std"} {
		want := fmt.Sprintf("engine(%s): create %s", backend, "")
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "too many open files (raise the fd limit") {
			t.Fatalf("child output lacks %q:\n%s", want, out)
		}
	}
}

func fdLimitChild() {
	dir := os.Getenv("MAGNETAR_FDLIMIT_DIR")
	// The uring backend needs a few descriptors itself; set it up first.
	uring, err := engine.NewUring(engine.UringOptions{Entries: 8})
	if err != nil {
		fmt.Println("setup:", err)
		os.Exit(1)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 64, Max: 64}); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(1)
	}
	for _, fs := range []engine.FS{uring, engine.NewStd()} {
		var files []engine.File
		for i := 0; i < 100; i++ {
			f, err := fs.Create(filepath.Join(dir, fmt.Sprintf("%s-%d", fs.Backend(), i)))
			if err != nil {
				if !errors.Is(err, unix.EMFILE) {
					fmt.Println("unexpected error:", err)
					os.Exit(1)
				}
				fmt.Println(err)
				break
			}
			files = append(files, f)
		}
		for _, f := range files {
			f.Close()
		}
	}
}
