package preflight

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Dirs are the directories a bookie (or a standalone) will write.
type Dirs struct {
	Journal []string
	Ledgers []string
	// UsageThreshold is diskUsageThreshold: past it a bookie turns
	// read-only (0 means the default, 0.95).
	UsageThreshold float64
}

// minFreeBytes: less than this and a bookie fills up within hours of
// steady traffic (its entry logs preallocate 1 GiB at a time).
const minFreeBytes = 4 << 30

// Disks checks every journal and ledger directory: it exists or can be
// created and written, its file system holds data across a restart (not
// tmpfs), it has room, and the journal has a device of its own.
func Disks(h Host, d Dirs) []Finding {
	threshold := d.UsageThreshold
	if threshold <= 0 {
		threshold = 0.95
	}
	var out []Finding
	devices := map[uint64][]string{}
	check := func(role, dir string) (DiskInfo, bool) {
		name := role + " " + dir
		if err := writable(dir); err != nil {
			out = append(out, fail(name, "create it and give the service's user write access (chown magnetar: "+dir+")",
				"not writable: %v", err))
			return DiskInfo{}, false
		}
		info, err := h.Disk(dir)
		if err != nil {
			out = append(out, fail(name, "", "cannot stat its file system: %v", err))
			return DiskInfo{}, false
		}
		out = append(out, diskFinding(name, info, threshold))
		return info, true
	}
	for _, dir := range d.Journal {
		if info, ok := check("journal", dir); ok {
			devices[info.Device] = append(devices[info.Device], "journal "+dir)
		}
	}
	for _, dir := range d.Ledgers {
		if info, ok := check("ledgers", dir); ok {
			devices[info.Device] = append(devices[info.Device], "ledgers "+dir)
		}
	}
	return append(out, sharedDevices(devices)...)
}

func diskFinding(name string, info DiskInfo, threshold float64) Finding {
	free := bytesName(info.FreeBytes)
	switch {
	case info.FSType == "tmpfs":
		return fail(name, "put it on a disk: tmpfs loses everything at a reboot, acknowledged messages included",
			"on tmpfs (%s free)", free)
	case info.Used() >= threshold:
		return fail(name, "free space or add a disk: a bookie is read-only past diskUsageThreshold",
			"%s, %.0f%% used, past diskUsageThreshold %.2f", info.FSType, 100*info.Used(), threshold)
	case info.FreeBytes < minFreeBytes:
		return warn(name, "give it more room: entry logs preallocate 1 GiB each", "%s, only %s free", info.FSType, free)
	case info.FSType != "ext4" && info.FSType != "xfs":
		return warn(name, "ext4 or xfs are what BookKeeper and magnetar are measured on",
			"%s, %s free", info.FSType, free)
	}
	return ok(name, "%s, %s free (%.0f%% used)", info.FSType, free, 100*info.Used())
}

// sharedDevices warns when a journal shares a device with anything else:
// every publish waits for the journal's sync, and ledger writes queued on
// the same device make that wait longer.
func sharedDevices(devices map[uint64][]string) []Finding {
	var out []Finding
	for _, users := range devices {
		journal := false
		for _, u := range users {
			journal = journal || strings.HasPrefix(u, "journal")
		}
		if journal && len(users) > 1 {
			out = append(out, warn("journal device",
				"give the journal a device of its own (an NVMe or a small SSD): ledger writes on the same device add to every publish's latency",
				"shared: %v", users))
		}
	}
	if len(out) == 0 {
		out = append(out, ok("journal device", "not shared with the ledgers"))
	}
	return out
}

// writable creates dir if needed and writes, syncs and removes a file in it.
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".magnetar-doctor-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write([]byte("preflight")); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SyncLatency is a measurement of a device's sync latency (p50, p99).
type SyncLatency struct {
	P50, P99 time.Duration
	Ops      int64
}

// JournalSpeed judges the journal device by its 4 KiB append+fdatasync
// latency: every durable publish waits for one.
func JournalSpeed(dir string, l SyncLatency) Finding {
	name := "journal speed " + dir
	detail := fmt.Sprintf("4 KiB append+fdatasync: p50 %v, p99 %v over %d syncs", l.P50, l.P99, l.Ops)
	switch {
	case l.P99 <= 2*time.Millisecond:
		return Finding{Check: name, Status: OK, Detail: detail + " (fast enough: a durable publish p99 under 5 ms is reachable)"}
	case l.P99 <= 10*time.Millisecond:
		return Finding{Check: name, Status: Warn, Detail: detail,
			Advice: "an SSD or NVMe with power-loss protection brings this under 1 ms; TUNING.md has figures"}
	}
	return Finding{Check: name, Status: Warn, Detail: detail,
		Advice: "a rotating or throttled disk: every durable publish waits for this; move the journal to an SSD/NVMe"}
}
