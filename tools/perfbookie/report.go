package perfbookie

import (
	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// Report is the whole run.
type Report struct {
	// Target is "in-process" or the address given.
	Target      string `json:"target"`
	Backend     string `json:"io_backend"`
	Storage     string `json:"storage,omitempty"`
	JournalDir  string `json:"journal_dir"`
	LedgerDir   string `json:"ledger_dir,omitempty"`
	Duration    string `json:"duration_per_point"`
	Warmup      string `json:"warmup_per_point"`
	Outstanding int    `json:"outstanding_per_client"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
	// Disk is the journal disk's own figures (nil when not measured).
	Disk  *DiskLimits `json:"disk_limits,omitempty"`
	Adds  []Point     `json:"adds"`
	Reads []Point     `json:"cache_reads"`
	Cold  *ColdRead   `json:"cold_read,omitempty"`
	// Notes say what was not measured and why, and what to keep in mind.
	Notes []string `json:"notes,omitempty"`
}

// Latency holds percentiles in microseconds.
type Latency = perfkit.Latency

// Point is one measured load: adds, or reads of recent entries.
type Point struct {
	Op          string `json:"op"` // "add", "read"
	Clients     int    `json:"clients"`
	EntrySize   int    `json:"entry_size"`
	Outstanding int    `json:"outstanding"`
	Entries     int64  `json:"entries"`
	// Seconds is the measured window; Entries completed within it.
	Seconds       float64 `json:"seconds"`
	EntriesPerSec float64 `json:"entries_per_sec"`
	// MiBPerSec counts entry data (head included), not protocol framing.
	MiBPerSec float64 `json:"mib_per_sec"`
	LatencyUS Latency `json:"latency_us"`

	// In-process adds only: the journal's datasyncs in the window, the
	// bytes per datasync (the group size), and the disk's write+datasync
	// at that size rounded to 4 KiB, measured in the same run.
	JournalSyncs int64            `json:"journal_datasyncs,omitempty"`
	BytesPerSync float64          `json:"journal_bytes_per_datasync,omitempty"`
	DiskBlock    int              `json:"disk_block,omitempty"`
	Disk         *perfdisk.Result `json:"disk_limit,omitempty"`
	DiskFraction float64          `json:"disk_bandwidth_fraction,omitempty"`

	// Reads only: each client cycles over its ledger's last ReadWindow
	// entries.
	ReadWindow int64 `json:"read_window_per_client,omitempty"`
}

// DiskLimits are the disk's figures under the journal directory.
type DiskLimits struct {
	Dir      string          `json:"dir"`
	Datasync perfdisk.Result `json:"datasync"`
	// SeqRead reads back a file the size of the backlog (at least 8 MiB)
	// after evicting it from the page cache.
	SeqRead perfdisk.Result `json:"seqread"`
}

// ColdRead is the catch-up read of a backlog after a restart.
type ColdRead struct {
	Ledgers   int   `json:"ledgers"`
	EntrySize int   `json:"entry_size"`
	Entries   int64 `json:"entries"`
	Bytes     int64 `json:"bytes"`
	// WriteSeconds and WriteMiBPerSec are how the backlog was written
	// (all ledgers at once, Outstanding adds each).
	WriteSeconds   float64 `json:"write_seconds"`
	WriteMiBPerSec float64 `json:"write_mib_per_sec"`
	// RestartSeconds is closing and reopening the bookie (journal replay
	// included).
	RestartSeconds float64 `json:"restart_seconds"`
	// PageCacheDropped: every file of the bookie was evicted from the page
	// cache after the restart; if false, PageCacheNote says why not.
	PageCacheDropped bool   `json:"page_cache_dropped"`
	PageCacheNote    string `json:"page_cache_note,omitempty"`
	// Read is one client per ledger reading it from the first entry to
	// the last with Outstanding reads in flight; Seconds is the whole read.
	Read Point `json:"read"`
	// DiskFraction is Read's MiB/s over the disk's sequential read MiB/s.
	DiskFraction float64 `json:"disk_seqread_fraction,omitempty"`
}
