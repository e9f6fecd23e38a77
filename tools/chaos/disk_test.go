package chaos

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFillRetriesWhenSpaceShrinks: the bookie on the disk may take space
// between the filler's statfs and its fallocate (its journal or entry log
// growing); the filler measures again instead of failing the run (5 Dec,
// disk-full seed 1: "fill ...: no space left on device").
func TestFillRetriesWhenSpaceShrinks(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	alloc := func(fd int, n int64) error {
		calls++
		if calls == 1 {
			return unix.ENOSPC // someone took space since the statfs
		}
		return nil
	}
	path, err := fillWith(dir, 1<<20, alloc)
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
	if calls != 2 {
		t.Fatalf("%d allocations, want a retry after ENOSPC", calls)
	}
	if path != filepath.Join(dir, "chaos-filler") {
		t.Fatalf("filler %s", path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}

	// Space that keeps shrinking faster than the filler can measure is
	// still an error, after a few attempts.
	calls = 0
	if _, err := fillWith(dir, 1<<20, func(int, int64) error { calls++; return unix.ENOSPC }); err == nil || calls < 3 {
		t.Fatalf("fill with space always gone: %v after %d attempts", err, calls)
	}
}
