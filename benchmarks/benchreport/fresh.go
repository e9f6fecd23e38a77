package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A scenario runs on a deployment started for it alone, on a data
// directory emptied first and removed after: a scenario that ran on an
// earlier one's server would measure that server's data and its
// background work too (entry-log flushes and compaction, ledger and
// cache GC, a larger index), and later scenarios would look worse than
// they are for reasons that are not theirs.

// starter starts a deployment on a data directory. stop ends every
// process it started; on error nothing it started is left running.
type starter func(dir string) (t target, stop func() error, err error)

// fresh runs fn against a deployment start makes on dir, emptied first
// and removed after. d (if not nil) keeps the highest peak RSS of the
// deployments it used.
func (r *runner) fresh(start starter, dir string, d *Deployment, fn func(target) error) error {
	return inEmptyDir(dir, func() error { return r.session(start, dir, d, fn) })
}

// session starts a deployment on dir as it is, runs fn against it and
// stops it; d's peak RSS becomes the higher of its own and this
// deployment's (read before the stop, while the processes exist).
func (r *runner) session(start starter, dir string, d *Deployment, fn func(target) error) error {
	t, stop, err := start(dir)
	if err != nil {
		return err
	}
	err = fn(t)
	if d != nil {
		d.PeakRSSMiB = max(d.PeakRSSMiB, peakRSS(t))
	}
	if serr := stop(); err == nil && serr != nil {
		err = serr
	}
	return err
}

// inEmptyDir runs fn with dir emptied before and removed after (also when
// fn fails: the next scenario needs the disk space).
func inEmptyDir(dir string, fn func() error) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("emptying %s: %w", dir, err)
	}
	err := fn()
	if rerr := os.RemoveAll(dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("removing %s: %w", dir, rerr))
	}
	settleDisk(filepath.Dir(dir))
	return err
}

// settleDisk commits the removal of a scenario's data to the file system
// and gives the device a few seconds to absorb it before the next
// scenario measures: on a file system mounted with discard (this VM's
// ext4), freeing gigabytes sends the device a burst of discards at the
// next commit, which I/O issued meanwhile waits behind (TUNING.md, the
// journal: unlinking a 64 MiB file took 48-54 ms). The first report with
// fresh servers had its 10% point, run right after the 64 KiB run's
// gigabytes were removed, at p99 276 ms with p95 12 ms.
func settleDisk(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = unix.Syncfs(int(f.Fd()))
		f.Close()
	}
	time.Sleep(diskSettle)
}

const diskSettle = 3 * time.Second

// standaloneOn is a starter of standalones named name (the client
// runs' variant label) with config and extra flags.
func (r *runner) standaloneOn(name, config string, extra ...string) starter {
	return func(dir string) (target, func() error, error) {
		t, err := r.startStandaloneConf(config, dir, extra...)
		if err != nil {
			return target{}, nil, err
		}
		t.name = name
		return t, t.servers[0].stop, nil
	}
}
