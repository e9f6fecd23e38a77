package metadata

// Space guard of the local store (issue 30). A Pebble commit that meets a
// full disk is fatal to Pebble, and a failed local store fails every
// session: the broker then dropped every bundle and reads stopped too. So
// writes that would grow the database are refused before they reach
// Pebble while the store's file system has less than MinFreeBytes free:
// the refused operation changes nothing and fails with ErrNoSpace, and
// everything else goes on. That space is the store's reserve: Pebble's
// own flushes and compactions, deletions (which free space), ephemeral
// nodes (never on disk: bookie modes, broker registrations and load
// reports) and ZooKeeper-style session ends still get it.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoSpace: the local store refused a write because its disk is nearly
// full. Nothing was changed, reads go on, and the same write succeeds once
// space is freed: retry later.
var ErrNoSpace = errors.New("metadata: out of disk space; write refused, reads go on")

// DefaultLocalMinFree is LocalOptions.MinFreeBytes by default, capped at
// 1% of the file system so a small disk is not refused at once.
const DefaultLocalMinFree = 16 << 20

// spaceCheckEvery bounds how often a busy store calls statfs.
const spaceCheckEvery = 100 * time.Millisecond

// spaceGuard admits writes while the file system has room.
type spaceGuard struct {
	dir     string
	minFree int64 // <0: never refuse
	usage   func(dir string) (free, total uint64, err error)

	mu        sync.Mutex
	checkedAt time.Time
	full      bool
	free      uint64
}

func newSpaceGuard(dir string, o LocalOptions) *spaceGuard {
	g := &spaceGuard{dir: dir, minFree: o.MinFreeBytes, usage: o.DiskUsage}
	if g.usage == nil {
		g.usage = statfsUsage
	}
	if g.minFree == 0 {
		g.minFree = DefaultLocalMinFree
	}
	return g
}

func statfsUsage(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// admit returns ErrNoSpace while free space is below the reserve. A
// failed statfs admits: refusing writes for a measuring error would be a
// worse failure than the one guarded against.
func (g *spaceGuard) admit() error {
	if g == nil || g.minFree < 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := time.Now(); now.Sub(g.checkedAt) >= spaceCheckEvery {
		g.checkedAt = now
		free, total, err := g.usage(g.dir)
		if err != nil {
			return nil
		}
		reserve := min(uint64(g.minFree), total/100)
		g.full, g.free = free < reserve, free
	}
	if g.full {
		return fmt.Errorf("%w: local store %s has %d bytes free", ErrNoSpace, g.dir, g.free)
	}
	return nil
}

// admitLocked is the guard for a write: persistent tells whether it puts
// a node on disk (ephemeral nodes and deletions never grow it).
func (s *MemoryServer) admitLocked(persistent bool) error {
	if !persistent || s.guard == nil {
		return nil
	}
	return s.guard.admit()
}
