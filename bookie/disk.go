package bookie

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
)

// DiskUsageFunc reports a directory's file system's free and total bytes.
type DiskUsageFunc func(dir string) (free, total uint64, err error)

// StatfsUsage is the default DiskUsageFunc.
func StatfsUsage(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// DirUsage is one directory's usage as of the last disk check.
type DirUsage struct {
	Dir     string
	Journal bool    // a journal directory (else a ledger directory)
	Used    float64 // 1 - free/total, as BookKeeper computes it
	Free    uint64
	Total   uint64
}

// diskState is the result of the last disk check.
type diskState struct {
	free, total uint64 // ledger directories, summed
	dirs        []DirUsage
}

// diskSpace returns the free and total bytes of the ledger directories
// (summed over their file systems) as of the last check.
func (c *Core) diskSpace() (free, total uint64) {
	if st := c.disk.Load(); st != nil {
		return st.free, st.total
	}
	return 0, 0
}

// DiskSpace returns the free and total bytes of the ledger directories as
// of the last disk check.
func (c *Core) DiskSpace() (free, total uint64) { return c.diskSpace() }

// DirUsages returns every journal and ledger directory's usage as of the
// last disk check (for metrics and status pages).
func (c *Core) DirUsages() []DirUsage {
	if st := c.disk.Load(); st != nil {
		return st.dirs
	}
	return nil
}

// measure takes every journal and ledger directory's usage.
func (c *Core) measure() *diskState {
	st := &diskState{}
	for i, d := range append(append([]string{}, c.journalDirs...), c.opts.LedgerDirs...) {
		free, total, err := c.opts.DiskUsage(d)
		if err != nil {
			c.log.Warn("bookie disk check failed", "dir", d, "err", err)
			continue
		}
		u := DirUsage{Dir: d, Journal: i < len(c.journalDirs), Free: free, Total: total}
		if total > 0 {
			u.Used = 1 - float64(free)/float64(total)
		}
		if !u.Journal {
			st.free += free
			st.total += total
		}
		st.dirs = append(st.dirs, u)
	}
	return st
}

// checkDisks measures every journal and ledger directory. One fuller than
// DiskUsageThreshold makes the bookie read-only (out of space); it turns
// writable again once every directory is below DiskUsageLwmThreshold (the
// gap stops it flapping), whether the threshold or an ENOSPC made it
// read-only. A storage failure keeps it read-only whatever the disks say.
// It runs every DiskCheckInterval and before each preallocation.
func (c *Core) checkDisks() {
	c.diskMu.Lock()
	defer c.diskMu.Unlock()
	st := c.measure()
	c.disk.Store(st)
	var worst DirUsage
	for _, u := range st.dirs {
		if u.Used >= worst.Used {
			worst = u
		}
		c.warnLocked(u)
	}
	full := worst.Used > c.opts.DiskUsageThreshold || (c.diskFull.Load() && worst.Used >= c.opts.DiskUsageLwmThreshold)
	switch {
	case full && worst.Used > c.opts.DiskUsageThreshold:
		c.diskWhy.Store(fmt.Sprintf("%s: %s directory %s is %.1f%% full (diskUsageThreshold %.2f)",
			OutOfSpaceReason, kind(worst), worst.Dir, 100*worst.Used, c.opts.DiskUsageThreshold))
	case !full && c.diskFull.Load():
		c.log.Info("bookie disks below the low-water mark; writable again", "fullest", worst.Dir,
			"used", worst.Used, "lwm", c.opts.DiskUsageLwmThreshold)
	}
	if full && !c.diskFull.Load() {
		why, _ := c.diskWhy.Load().(string)
		c.log.Warn("bookie disk full; read-only until every directory is below the low-water mark", "why", why,
			"lwm", c.opts.DiskUsageLwmThreshold)
	}
	c.diskFull.Store(full)
	c.updateMode()
}

// warnLocked logs once each time a directory passes diskUsageWarnThreshold.
// Caller holds diskMu.
func (c *Core) warnLocked(u DirUsage) {
	over := u.Used > c.opts.DiskUsageWarnThreshold
	if over == c.diskWarned[u.Dir] {
		return
	}
	c.diskWarned[u.Dir] = over
	if over {
		c.log.Warn("bookie directory above diskUsageWarnThreshold", "kind", kind(u), "dir", u.Dir,
			"used", u.Used, "warn", c.opts.DiskUsageWarnThreshold, "threshold", c.opts.DiskUsageThreshold)
	}
}

func kind(u DirUsage) string {
	if u.Journal {
		return "journal"
	}
	return "ledger"
}

// OutOfSpaceReason starts the reason ReadOnly gives while the bookie is
// read-only because a disk is full (a state it leaves by itself).
const OutOfSpaceReason = "out of space"

// noSpace records that a write found its disk full (ENOSPC or a refused
// preallocation): the bookie turns read-only, as for a disk past the
// threshold, and the disk checker makes it writable again below the
// low-water mark. Nothing acknowledged was lost (see isNoSpace).
func (c *Core) noSpace(what string, err error) {
	c.diskMu.Lock()
	defer c.diskMu.Unlock()
	if c.diskFull.Swap(true) {
		return
	}
	c.diskWhy.Store(fmt.Sprintf("%s: %s: %v", OutOfSpaceReason, what, err))
	c.log.Warn("bookie "+what+" out of space; read-only until every directory is below the low-water mark",
		"err", err, "lwm", c.opts.DiskUsageLwmThreshold)
	c.updateMode()
}

// isNoSpace reports whether err is a full disk that lost nothing (an
// out-of-space error of the journal or the ledger storage), as opposed to
// a failure, which stays fail-stop.
func isNoSpace(err error) bool {
	if errors.Is(err, journal.ErrFailed) || errors.Is(err, entrylog.ErrFailed) {
		return false
	}
	return errors.Is(err, journal.ErrNoSpace) || errors.Is(err, entrylog.ErrNoSpace) || engine.IsNoSpaceOnWrite(err)
}

// journalSpace decides a journal preallocation (journal.SpaceFunc). It
// checks the disks first, so a journal directory past diskUsageThreshold
// turns the bookie read-only before ENOSPC can come. Growth may still use
// the space above the threshold (the adds that need it were accepted:
// before the bookie turned read-only, or recovery adds and fences, which a
// read-only bookie takes as BookKeeper's does), but never the last
// reserveOf(total), kept for checkpoints and the storage's flushes.
func (c *Core) journalSpace(dir string, need, want int64) (int64, error) {
	c.checkDisks()
	free, total, err := c.opts.DiskUsage(dir)
	if err != nil || total == 0 {
		return want, nil // no measure: ENOSPC stays the limit
	}
	room := int64(free) - reserveOf(total)
	if room < need {
		return 0, fmt.Errorf("%w: journal directory %s has %d bytes free; growing by %d would leave less than the %d kept for checkpoints and ledger storage flushes",
			journal.ErrNoSpace, dir, free, need, reserveOf(total))
	}
	return min(want, room), nil
}

// reserveOf is the space no journal preallocation takes on a disk of
// total bytes: 2%, at most 64 MiB.
func reserveOf(total uint64) int64 { return int64(min(total/50, 64<<20)) }

// storageSpace decides an entry-log preallocation (entrylog.SpaceFunc). A
// flush writes entries already journaled (often acknowledged), so it may
// use the reserve: only ENOSPC stops it. It checks the disks first, so a
// bookie that passes the threshold turns read-only before that.
func (c *Core) storageSpace(dir string, need, want int64) (int64, error) {
	c.checkDisks()
	return want, nil
}

func (c *Core) diskLoop() {
	defer close(c.diskDone)
	t := time.NewTicker(c.opts.DiskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.checkDisks()
		}
	}
}
