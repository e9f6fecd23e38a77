package bookie

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
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

// diskState is the result of the last disk check.
type diskState struct {
	free, total uint64
}

// diskSpace returns the free and total bytes of the ledger directories
// (summed over their file systems) as of the last check.
func (c *Core) diskSpace() (free, total uint64) {
	if st := c.disk.Load(); st != nil {
		return st.free, st.total
	}
	return 0, 0
}

// checkDisks measures every ledger directory; a directory above
// DiskUsageThreshold makes the bookie read-only, and it becomes writable
// again once every directory is below DiskUsageLwmThreshold (the gap stops
// it flapping). A storage failure keeps it read-only whatever the disks say.
func (c *Core) checkDisks() {
	var sum diskState
	worst := 0.0
	worstDir := ""
	for _, d := range c.opts.LedgerDirs {
		free, total, err := c.opts.DiskUsage(d)
		if err != nil {
			c.log.Warn("bookie disk check failed", "dir", d, "err", err)
			continue
		}
		sum.free += free
		sum.total += total
		if total > 0 {
			if used := 1 - float64(free)/float64(total); used > worst {
				worst, worstDir = used, d
			}
		}
	}
	c.disk.Store(&sum)
	full := worst > c.opts.DiskUsageThreshold || (c.diskFull.Load() && worst >= c.opts.DiskUsageLwmThreshold)
	if full != c.diskFull.Swap(full) {
		if full {
			c.log.Warn("bookie ledger disk full", "dir", worstDir, "used", worst, "threshold", c.opts.DiskUsageThreshold)
		} else {
			c.log.Info("bookie ledger disks below the low-water mark", "used", worst, "lwm", c.opts.DiskUsageLwmThreshold)
		}
	}
	c.diskWhy.Store(fmt.Sprintf("ledger directory %s is %.1f%% full (diskUsageThreshold %.2f)", worstDir, 100*worst, c.opts.DiskUsageThreshold))
	c.updateMode()
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

// DiskSpace returns the free and total bytes of the ledger directories as
// of the last disk check.
func (c *Core) DiskSpace() (free, total uint64) { return c.diskSpace() }
