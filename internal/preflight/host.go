package preflight

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Host is what the checks read of the machine.
type Host interface {
	// ReadFile reads a /proc or /sys file.
	ReadFile(path string) (string, error)
	OpenFileLimit() (uint64, error)
	MemlockLimit() (uint64, error)
	// IOUring sets up and tears down a small ring.
	IOUring() error
	ClockSynchronized() (bool, error)
	// Disk describes the file system holding dir.
	Disk(dir string) (DiskInfo, error)
}

// DiskInfo is a directory's file system.
type DiskInfo struct {
	Device     uint64 // st_dev: same device, same disk
	FSType     string
	TotalBytes uint64
	FreeBytes  uint64 // available to unprivileged users
}

// Used is the fraction of the file system in use, as the bookie's disk
// checker computes it.
func (d DiskInfo) Used() float64 {
	if d.TotalBytes == 0 {
		return 0
	}
	return 1 - float64(d.FreeBytes)/float64(d.TotalBytes)
}

// Machine is the Host this process runs on.
type Machine struct {
	// ProbeIOUring sets up a ring (the engine's constructor, injected so
	// this package needs no io_uring code of its own).
	ProbeIOUring func() error
}

func (Machine) ReadFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func (Machine) OpenFileLimit() (uint64, error) { return rlimit(unix.RLIMIT_NOFILE) }

func (Machine) MemlockLimit() (uint64, error) { return rlimit(unix.RLIMIT_MEMLOCK) }

func rlimit(resource int) (uint64, error) {
	var l unix.Rlimit
	if err := unix.Getrlimit(resource, &l); err != nil {
		return 0, err
	}
	return l.Cur, nil
}

func (m Machine) IOUring() error {
	if m.ProbeIOUring == nil {
		return fmt.Errorf("no probe")
	}
	return m.ProbeIOUring()
}

// ClockSynchronized asks the kernel (adjtimex): TIME_ERROR means the
// clock is not synchronised.
func (Machine) ClockSynchronized() (bool, error) {
	var tx unix.Timex
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return false, err
	}
	return state != unix.TIME_ERROR, nil
}

func (Machine) Disk(dir string) (DiskInfo, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return DiskInfo{}, err
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return DiskInfo{}, err
	}
	return DiskInfo{Device: st.Dev, FSType: fsTypeName(int64(fs.Type)),
		TotalBytes: fs.Blocks * uint64(fs.Bsize), FreeBytes: fs.Bavail * uint64(fs.Bsize)}, nil
}

// zfsMagic is ZFS's statfs type (not in x/sys/unix: ZFS is out of tree).
const zfsMagic = 0x2fc12fc1

// fsTypeName names the file systems a data directory may be on.
func fsTypeName(t int64) string {
	switch t {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case zfsMagic:
		return "zfs"
	}
	return fmt.Sprintf("0x%x", t)
}
