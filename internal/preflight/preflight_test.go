package preflight

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeHost answers from fields; Disk maps directories to infos.
type fakeHost struct {
	files   map[string]string
	nofile  uint64
	memlock uint64
	uring   error
	synced  bool
	disks   map[string]DiskInfo
}

func (h fakeHost) ReadFile(p string) (string, error) {
	if v, ok := h.files[p]; ok {
		return v, nil
	}
	return "", errors.New("no such file")
}
func (h fakeHost) OpenFileLimit() (uint64, error)   { return h.nofile, nil }
func (h fakeHost) MemlockLimit() (uint64, error)    { return h.memlock, nil }
func (h fakeHost) IOUring() error                   { return h.uring }
func (h fakeHost) ClockSynchronized() (bool, error) { return h.synced, nil }
func (h fakeHost) Disk(dir string) (DiskInfo, error) {
	if d, ok := h.disks[dir]; ok {
		return d, nil
	}
	return DiskInfo{}, errors.New("unknown dir")
}

func find(t *testing.T, fs []Finding, check string) Finding {
	t.Helper()
	for _, f := range fs {
		if strings.HasPrefix(f.Check, check) {
			return f
		}
	}
	t.Fatalf("no finding %q in %+v", check, fs)
	return Finding{}
}

func TestLimits(t *testing.T) {
	for _, c := range []struct {
		nofile, memlock uint64
		want            Status
	}{
		{1024, 1 << 40, Fail}, {8192, 1 << 40, Warn}, {1 << 20, 1 << 40, OK}, {1 << 20, 8 << 20, Warn},
	} {
		got := Worst(Limits(fakeHost{nofile: c.nofile, memlock: c.memlock}))
		if got != c.want {
			t.Errorf("nofile %d memlock %d: %v, want %v", c.nofile, c.memlock, got, c.want)
		}
	}
}

func TestKernelSettings(t *testing.T) {
	h := fakeHost{files: map[string]string{
		"/sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
		"/proc/sys/vm/swappiness":                     "60\n",
	}}
	fs := Kernel(h)
	if f := find(t, fs, "transparent huge pages"); f.Status != Warn || f.Advice == "" {
		t.Errorf("THP always: %+v", f)
	}
	if f := find(t, fs, "swappiness"); f.Status != Warn {
		t.Errorf("swappiness 60: %+v", f)
	}
	h.files["/sys/kernel/mm/transparent_hugepage/enabled"] = "always [madvise] never\n"
	h.files["/proc/sys/vm/swappiness"] = "1\n"
	if w := Worst(Kernel(h)); w != OK {
		t.Errorf("madvise, swappiness 1: %v", w)
	}
}

// Disks: tmpfs and a disk past diskUsageThreshold fail (data loss, a
// read-only bookie); a journal sharing a device and little room warn.
func TestDisks(t *testing.T) {
	j, l1, l2 := t.TempDir(), t.TempDir(), t.TempDir()
	good := DiskInfo{Device: 1, FSType: "xfs", TotalBytes: 1 << 40, FreeBytes: 1 << 39}
	h := fakeHost{disks: map[string]DiskInfo{j: good, l1: {Device: 2, FSType: "ext4", TotalBytes: 1 << 40, FreeBytes: 1 << 39},
		l2: {Device: 3, FSType: "ext4", TotalBytes: 1 << 40, FreeBytes: 1 << 39}}}
	fs := Disks(h, Dirs{Journal: []string{j}, Ledgers: []string{l1, l2}})
	if w := Worst(fs); w != OK {
		t.Fatalf("three disks: %v %+v", w, fs)
	}
	h.disks[l1] = DiskInfo{Device: 1, FSType: "xfs", TotalBytes: 1 << 40, FreeBytes: 1 << 39}
	if f := find(t, Disks(h, Dirs{Journal: []string{j}, Ledgers: []string{l1}}), "journal device"); f.Status != Warn {
		t.Errorf("journal sharing its device: %+v", f)
	}
	h.disks[l1] = DiskInfo{Device: 2, FSType: "tmpfs", TotalBytes: 1 << 30, FreeBytes: 1 << 29}
	if f := find(t, Disks(h, Dirs{Ledgers: []string{l1}}), "ledgers"); f.Status != Fail {
		t.Errorf("tmpfs: %+v", f)
	}
	h.disks[l1] = DiskInfo{Device: 2, FSType: "ext4", TotalBytes: 100 << 30, FreeBytes: 3 << 30}
	if f := find(t, Disks(h, Dirs{Ledgers: []string{l1}}), "ledgers"); f.Status != Fail {
		t.Errorf("97%% used: %+v", f)
	}
	h.disks[l1] = DiskInfo{Device: 2, FSType: "ext4", TotalBytes: 8 << 30, FreeBytes: 2 << 30}
	if f := find(t, Disks(h, Dirs{Ledgers: []string{l1}}), "ledgers"); f.Status != Warn {
		t.Errorf("2 GiB free: %+v", f)
	}
	if f := find(t, Disks(h, Dirs{Journal: []string{"/proc/cannot-create-here"}}), "journal"); f.Status != Fail {
		t.Errorf("unwritable dir: %+v", f)
	}
}

func TestJournalSpeedAndClockAndUring(t *testing.T) {
	if f := JournalSpeed("/j", SyncLatency{P50: 200 * time.Microsecond, P99: time.Millisecond, Ops: 5000}); f.Status != OK {
		t.Errorf("1 ms p99: %+v", f)
	}
	if f := JournalSpeed("/j", SyncLatency{P50: 8 * time.Millisecond, P99: 25 * time.Millisecond, Ops: 100}); f.Status != Warn || f.Advice == "" {
		t.Errorf("25 ms p99: %+v", f)
	}
	if f := Clock(fakeHost{synced: false}); f.Status != Warn {
		t.Errorf("unsynchronised clock: %+v", f)
	}
	if f := IOUring(fakeHost{uring: errors.New("ENOSYS")}); f.Status != Warn || !strings.Contains(f.Detail, "ENOSYS") {
		t.Errorf("no io_uring: %+v", f)
	}
}

// The machine itself answers every question (whatever the verdicts).
func TestMachine(t *testing.T) {
	m := Machine{ProbeIOUring: func() error { return nil }}
	if _, err := m.OpenFileLimit(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ClockSynchronized(); err != nil {
		t.Fatal(err)
	}
	d, err := m.Disk(t.TempDir())
	if err != nil || d.TotalBytes == 0 || d.FSType == "" {
		t.Fatalf("disk %+v, %v", d, err)
	}
}
