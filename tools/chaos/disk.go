package chaos

// Disk faults: the last bookie's directory is a small tmpfs that
// disk-full fills, and every bookie runs with a fault control file
// (MAGNETAR_TEST_FAULT_CONTROL, cmd/magnetar/bookiefaults.go) through
// which journal-fsync-error makes its journal's fsyncs fail.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// tmpfsSize: the runs' data accumulates on every bookie (each run's
	// topics stay). At 512 MiB (a quarter of it journal files) bk4's disk
	// passed diskUsageThreshold after about 170 runs and bk4 stayed
	// read-only, so every later bookie fault left an E=3 writer no
	// replacement: 5 Dec's part 1, seeds 8-10, 10-14 s on topics with a
	// spare bookie (kill-bookie, pause-bookie, journal-fsync-error,
	// rolling-restart), and likely 4 Dec's seeds 8-11 too. 2 GiB lasts
	// about 1,100 runs; tmpfsFullest refuses a run before that.
	tmpfsSize   = 2 << 30
	tmpfsSource = "magnetar-chaos" // how leftovers of a crashed run are found in /proc/mounts
	// tmpfsFullest is the fullest bk4's disk may be when a run starts:
	// fuller, the bookie may turn read-only in the run without a fault.
	tmpfsFullest = 0.75
)

// checkSmallDisk refuses a run on a cluster whose small disk is almost
// full of earlier runs' data: it would measure a cluster without its
// spare bookie, not the scenario.
func checkSmallDisk(dir string) error {
	if dir == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Blocks == 0 {
		return nil
	}
	used := 1 - float64(st.Bavail)/float64(st.Blocks)
	if used > tmpfsFullest {
		return fmt.Errorf("bk4's disk %s is %.0f%% full of earlier runs' data (over %.0f%%): the bookie would turn read-only "+
			"without a fault and the run would measure a cluster without its spare bookie; start a new work directory", dir, 100*used, 100*tmpfsFullest)
	}
	return nil
}

func mountTmpfs(dir string, size int64) error {
	if err := unix.Mount(tmpfsSource, dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		return fmt.Errorf("mount a tmpfs at %s: %w", dir, err)
	}
	return nil
}

// unmountLeftovers unmounts the tmpfs mounts a crashed run left.
func unmountLeftovers() {
	raw, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == tmpfsSource && f[2] == "tmpfs" {
			_ = unix.Unmount(f[1], unix.MNT_DETACH)
		}
	}
}

// faultControl is a bookie's fault control file.
func faultControl(dir string) string {
	return filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".faults")
}

// setFault writes a bookie's fault mode ("" clears it).
func setFault(dir, mode string) error {
	return os.WriteFile(faultControl(dir), []byte(mode+"\n"), 0o644)
}

// fill allocates a filler file in dir leaving about free bytes.
func fill(dir string, free int64) (string, error) {
	return fillWith(dir, free, func(fd int, n int64) error { return unix.Fallocate(fd, 0, 0, n) })
}

// fillAttempts bounds fillWith's measurements: the bookie on the disk may
// take space between a statfs and the allocation (its journal or entry
// log growing), which fails the allocation with ENOSPC.
const fillAttempts = 5

// fillWith is fill with the allocation given (tests inject ENOSPC).
func fillWith(dir string, free int64, alloc func(fd int, n int64) error) (string, error) {
	path := filepath.Join(dir, "chaos-filler")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for attempt := 1; ; attempt++ {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return path, err
		}
		n := int64(st.Bavail)*st.Bsize - free
		if n <= 0 {
			return path, nil
		}
		err := alloc(int(f.Fd()), n)
		if err == nil {
			return path, nil
		}
		if !errors.Is(err, unix.ENOSPC) || attempt == fillAttempts {
			return path, fmt.Errorf("fill %s (attempt %d): %w", dir, attempt, err)
		}
	}
}
