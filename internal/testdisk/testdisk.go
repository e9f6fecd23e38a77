// Package testdisk gives tests small real file systems to fill: a
// size-limited tmpfs mounted for one test, and a filler file that leaves a
// chosen number of bytes free. The full-disk tests of the bookie, the
// managed ledger and standalone share it.
package testdisk

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a tmpfs of size (mount's syntax: "48m") at a new
// directory and unmounts it when the test ends. It skips the test under
// -short and where mounting is not allowed (not root).
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("mounts a real tmpfs (mount(8), root) and fills it: skipped under -short; make test runs it")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("needs a size-limited tmpfs (root, where mount is allowed): mount: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Fill writes a filler file in dir until about free bytes are left (or
// the disk is full) and returns its path; removing it frees the space.
func Fill(t testing.TB, dir string, free int64) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	have := int64(st.Bavail) * st.Bsize
	p := filepath.Join(dir, "filler")
	// Appended to, so calling Fill again tops the filler up after the
	// code under test released space (a truncated preallocation).
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for left := have - free; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			break // full: that is the point
		}
	}
	return p
}

// Free returns the bytes available under dir now.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * st.Bsize
}
