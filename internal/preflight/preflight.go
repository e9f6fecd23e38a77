// Package preflight checks a host before a bookie, broker or standalone
// runs on it (`magnetar doctor`): the disks the journal and the ledgers
// will live on, the kernel limits and settings io_uring and a message bus
// depend on, the clock, the metadata store, and how fast the journal's
// device syncs.
//
// Every check returns Findings. A finding is OK, Warn (works, but slower
// or riskier than it should be) or Fail (would lose data or fail at
// runtime); each Warn and Fail carries plain-language advice. The host is
// read through Host, so the checks are testable without the machine's
// /proc and /sys.
package preflight

import (
	"fmt"
	"strconv"
	"strings"
)

// Status is a finding's verdict.
type Status int

// Verdicts, in increasing severity.
const (
	OK Status = iota
	Warn
	Fail
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Warn:
		return "warn"
	}
	return "FAIL"
}

// MarshalText writes the verdict's name (JSON output).
func (s Status) MarshalText() ([]byte, error) { return []byte(strings.ToLower(s.String())), nil }

// Finding is one check's result.
type Finding struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Advice string `json:"advice,omitempty"`
}

// Worst is the most severe status among findings.
func Worst(findings []Finding) Status {
	w := OK
	for _, f := range findings {
		w = max(w, f.Status)
	}
	return w
}

func ok(check, format string, args ...any) Finding {
	return Finding{Check: check, Status: OK, Detail: fmt.Sprintf(format, args...)}
}

func warn(check, advice, format string, args ...any) Finding {
	return Finding{Check: check, Status: Warn, Detail: fmt.Sprintf(format, args...), Advice: advice}
}

func fail(check, advice, format string, args ...any) Finding {
	return Finding{Check: check, Status: Fail, Detail: fmt.Sprintf(format, args...), Advice: advice}
}

// Limits below which a role fails or is warned about.
const (
	// minOpenFiles: every client connection, entry log and index file is
	// a descriptor; below this a busy broker or bookie runs out.
	minOpenFiles = 4096
	// goodOpenFiles is what the systemd units set (LimitNOFILE).
	goodOpenFiles = 65536
	// goodMemlock: io_uring rings and registered buffers are locked
	// memory on kernels that charge them to RLIMIT_MEMLOCK (before 5.12).
	goodMemlock = 64 << 20
	// maxSwappiness: a broker or bookie swapped out stalls every client.
	maxSwappiness = 10
)

// Limits checks the open-file and locked-memory limits of this process
// (the ones the service will inherit when run from the same unit).
func Limits(h Host) []Finding {
	var out []Finding
	nofile, err := h.OpenFileLimit()
	switch {
	case err != nil:
		out = append(out, warn("open files", "", "cannot read RLIMIT_NOFILE: %v", err))
	case nofile < minOpenFiles:
		out = append(out, fail("open files", "raise it: LimitNOFILE=65536 in the systemd unit, or ulimit -n 65536",
			"limit %d: too low for a broker's connections or a bookie's files", nofile))
	case nofile < goodOpenFiles:
		out = append(out, warn("open files", "LimitNOFILE=65536 in the systemd unit, or ulimit -n 65536",
			"limit %d: enough to start, short for many clients", nofile))
	default:
		out = append(out, ok("open files", "limit %d", nofile))
	}
	memlock, err := h.MemlockLimit()
	switch {
	case err != nil:
		out = append(out, warn("locked memory", "", "cannot read RLIMIT_MEMLOCK: %v", err))
	case memlock < goodMemlock:
		out = append(out, warn("locked memory",
			"LimitMEMLOCK=infinity in the systemd unit (kernels before 5.12 charge io_uring rings to it); magnetar falls back to plain I/O if io_uring cannot start",
			"limit %s", bytesName(memlock)))
	default:
		out = append(out, ok("locked memory", "limit %s", bytesName(memlock)))
	}
	return out
}

// IOUring checks that io_uring can be set up (magnetar falls back to
// plain system calls without it, at a cost in latency).
func IOUring(h Host) Finding {
	if err := h.IOUring(); err != nil {
		return warn("io_uring", "use a kernel of 5.6 or later with io_uring enabled (sysctl kernel.io_uring_disabled=0); magnetar runs without it, slower",
			"unavailable: %v", err)
	}
	return ok("io_uring", "available")
}

// Kernel checks transparent huge pages and swappiness.
func Kernel(h Host) []Finding {
	var out []Finding
	if thp, err := h.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		mode := selected(thp)
		if mode == "always" {
			out = append(out, warn("transparent huge pages",
				"echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (and in the boot settings): compaction stalls show up as latency spikes",
				"mode %q", mode))
		} else {
			out = append(out, ok("transparent huge pages", "mode %q", mode))
		}
	}
	if raw, err := h.ReadFile("/proc/sys/vm/swappiness"); err == nil {
		v, err := strconv.Atoi(strings.TrimSpace(raw))
		switch {
		case err != nil:
			out = append(out, warn("swappiness", "", "unreadable value %q", strings.TrimSpace(raw)))
		case v > maxSwappiness:
			out = append(out, warn("swappiness", "sysctl vm.swappiness=1 (and in /etc/sysctl.d): the page cache should go before the broker's heap",
				"vm.swappiness=%d", v))
		default:
			out = append(out, ok("swappiness", "vm.swappiness=%d", v))
		}
	}
	return out
}

// selected is the bracketed choice of a /sys multiple-choice file
// ("always [madvise] never" -> "madvise").
func selected(s string) string {
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return strings.TrimSpace(s)
}

// Clock checks that the kernel believes its clock synchronised (NTP or
// PTP): publish times, message TTL, retention and the ledgers' rollover
// all read it.
func Clock(h Host) Finding {
	synced, err := h.ClockSynchronized()
	switch {
	case err != nil:
		return warn("clock", "", "cannot tell whether the clock is synchronised: %v", err)
	case !synced:
		return warn("clock", "run chrony or systemd-timesyncd: message TTL, retention and publish times read this clock",
			"not synchronised")
	}
	return ok("clock", "synchronised")
}

func bytesName(n uint64) string {
	switch {
	case n >= 1<<62:
		return "unlimited"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
