package perfledger

import (
	"fmt"
	"io"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// Report is the whole run.
type Report struct {
	// Target is "in-process" or the metadata store given.
	Target  string `json:"target"`
	Bookies int    `json:"bookies"`
	Backend string `json:"io_backend"`
	Storage string `json:"storage,omitempty"`
	Dir     string `json:"dir"`
	// Duration and Warmup are per point; Outstanding is per writer.
	Duration    string `json:"duration_per_point"`
	Warmup      string `json:"warmup_per_point"`
	Outstanding int    `json:"outstanding_per_writer"`
	Digest      string `json:"digest"`
	// Verify is how many entries of each ledger were read back: a number
	// or "all".
	Verify     string `json:"verify_per_ledger"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// Disk is the disk's own figures (nil when not measured).
	Disk   *DiskLimits `json:"disk_limits,omitempty"`
	Points []Point     `json:"points"`
	// Notes say what was skipped or not measured and why.
	Notes []string `json:"notes,omitempty"`
}

// DiskLimits are the disk's figures under Dir, through the run's backend.
type DiskLimits struct {
	Dir string `json:"dir"`
	// WriteSync is write+datasync of 1 MiB blocks appended to one file,
	// one at a time: about the most a synced stream gets from this disk.
	WriteSync perfdisk.Result `json:"write_datasync"`
	// Datasync is one fdatasync after a 4 KiB append.
	Datasync perfdisk.Result `json:"datasync"`
}

// Latency holds percentiles in microseconds.
type Latency = perfkit.Latency

// Point is one measured quorum, entry size and writer count.
type Point struct {
	Quorum      Quorum `json:"quorum"`
	Writers     int    `json:"writers"`
	EntrySize   int    `json:"entry_size"`
	Outstanding int    `json:"outstanding"`
	// Entries completed within the measured window of Seconds.
	Entries       int64   `json:"entries"`
	Seconds       float64 `json:"seconds"`
	EntriesPerSec float64 `json:"entries_per_sec"`
	// MiBPerSec counts payload bytes: what the application appended.
	MiBPerSec float64 `json:"mib_per_sec"`
	// LatencyUS is the append call to its callback.
	LatencyUS Latency `json:"latency_us"`

	// In-process bookies only: the bytes all journals wrote in the window
	// per second, and per datasync (the group size), seen below them.
	JournalMiBPerSec float64 `json:"journal_mib_per_sec,omitempty"`
	JournalSyncs     int64   `json:"journal_datasyncs,omitempty"`
	BytesPerSync     float64 `json:"journal_bytes_per_datasync,omitempty"`
	// DiskFraction is MiBPerSec x Qw over the disk's write+datasync MiB/s
	// (DiskLimits.WriteSync): every payload byte reaches Qw journals on
	// the one disk. It can pass 1: the baseline is one synced stream,
	// and several journals' writes and syncs overlap.
	DiskFraction float64 `json:"disk_fraction_qw,omitempty"`

	// Appended is every entry the writers' ledgers hold (warm-up and
	// drain included); Verified were read back and compared byte for byte.
	Appended int64 `json:"appended"`
	Verified int64 `json:"verified"`
	// EnsembleChanges counts fragments added to the ledgers while they
	// were written (a bookie failed or timed out); 0 in a clean run.
	EnsembleChanges int `json:"ensemble_changes"`
}

const pointHeader = "E,Qw,Qa writers" + perfkit.RateHeader + " | jrnl MiB/s KiB/sync Qw*MiB/disk  verified"

// Format writes the report for people: the run and the disk's limits, one
// row per point, and the notes.
func Format(w io.Writer, rep *Report) {
	fmt.Fprintln(w, FormatHeader(rep))
	fmt.Fprintln(w, pointHeader)
	for _, p := range rep.Points {
		fmt.Fprintln(w, FormatPoint(p))
	}
	FormatNotes(w, rep)
}

// FormatNotes writes what was skipped or not measured and why.
func FormatNotes(w io.Writer, rep *Report) {
	perfkit.FormatNotes(w, rep.Notes)
}

// FormatHeader describes the run and the disk's limits in a few lines.
func FormatHeader(rep *Report) string {
	s := fmt.Sprintf("ledger client -> %d bookies %s", rep.Bookies, rep.Target)
	if rep.Storage != "" {
		s += fmt.Sprintf(" (%s storage)", rep.Storage)
	}
	s += fmt.Sprintf(", %s backend, under %s; %s per point after %s warm-up, %d outstanding per writer, "+
		"%s digest, verify %s entries per ledger, GOMAXPROCS %d", rep.Backend, rep.Dir, rep.Duration, rep.Warmup, rep.Outstanding,
		rep.Digest, rep.Verify, rep.GOMAXPROCS)
	if d := rep.Disk; d != nil {
		s += fmt.Sprintf("\ndisk: write+datasync of %s blocks %.1f MiB/s (p50 %d us); one datasync p50 %d p99 %d us",
			perfdisk.SizeName(d.WriteSync.BlockSize), d.WriteSync.MiBPerSec, perfkit.Lat(d.WriteSync).P50, perfkit.Lat(d.Datasync).P50, perfkit.Lat(d.Datasync).P99)
	}
	return s
}

// FormatPoint renders one point as a table row.
func FormatPoint(p Point) string {
	row := fmt.Sprintf("%-7s %7d ", p.Quorum, p.Writers) + perfkit.RateColumns(p.EntrySize, p.EntriesPerSec, p.MiBPerSec, p.LatencyUS)
	jrnl, perSync, frac := "         -", "       -", "          -"
	if p.JournalMiBPerSec > 0 {
		jrnl = fmt.Sprintf("%10.1f", p.JournalMiBPerSec)
	}
	if p.JournalSyncs > 0 {
		perSync = fmt.Sprintf("%8.1f", p.BytesPerSync/1024)
	}
	if p.DiskFraction > 0 {
		frac = fmt.Sprintf("%10.0f%%", 100*p.DiskFraction)
	}
	row += fmt.Sprintf(" %s %s %s %9d", jrnl, perSync, frac, p.Verified)
	if p.EnsembleChanges > 0 {
		row += fmt.Sprintf("  (%d ensemble changes)", p.EnsembleChanges)
	}
	return row
}
