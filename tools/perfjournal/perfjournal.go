// Package perfjournal measures the bookie journal (package journal) under
// closed-loop load, as bookie clients drive it: each writer adds an entry,
// waits for its acknowledgement, and adds the next. For every point
// (backend, entry size, writers, journal settings) it reports entries/s,
// MiB/s, add latency percentiles and the average group (entries and bytes
// per datasync), and, in the same run on the same directory and backend,
// the disk's own limit through perfdisk: write+datasync at the measured
// group size and the latency of one datasync. From those it checks the
// journal issue's targets at 1 KiB entries with 64 writers. It backs
// `magnetar perf journal`.
package perfjournal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

// Config chooses what to measure. Every combination of Pipelines, Reuse
// and GroupWaits is a variant; every variant is measured at every entry
// size and writer count.
type Config struct {
	Dir          string          // directory on the disk to measure (files are removed afterwards)
	Backends     []string        // "uring", "std"
	EntrySizes   []int           // payload bytes per entry
	Writers      []int           // concurrent closed-loop writers
	Inflight     int             // adds in flight per writer (1: wait for each acknowledgement)
	Pipelines    []bool          // journal Options.Pipeline
	Reuse        []bool          // journal Options.ReuseFiles (journalReuseFiles)
	GroupWaits   []time.Duration // journalMaxGroupWaitMSec; 0 means no lingering at all
	SkipSync     bool            // journalSyncData=false (pipeline then has no effect)
	Duration     time.Duration   // measured time per point
	Warmup       time.Duration   // unmeasured load before each point's window
	DiskDuration time.Duration   // time per perfdisk measurement
	MaxFileSize  int64           // journalMaxSizeMB: small enough that files rotate within a run
}

// DefaultConfig returns the settings `magnetar perf journal` uses by default.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:          dir,
		Backends:     []string{engine.BackendUring, engine.BackendStd},
		EntrySizes:   []int{1 << 10, 16 << 10},
		Writers:      []int{1, 4, 16, 64, 256},
		Inflight:     1,
		Pipelines:    []bool{false, true},
		Reuse:        []bool{false},
		GroupWaits:   []time.Duration{time.Millisecond},
		Duration:     3 * time.Second,
		Warmup:       500 * time.Millisecond,
		DiskDuration: 2 * time.Second,
		MaxFileSize:  64 << 20,
	}
}

// Variant is one combination of journal settings.
type Variant struct {
	Pipeline       bool  `json:"pipeline"`
	ReuseFiles     bool  `json:"reuse_files"`
	MaxGroupWaitUS int64 `json:"max_group_wait_us"`
	SkipSync       bool  `json:"skip_sync"`
}

// Label names the variant in tables and errors. (Not String: Point and
// Target embed Variant, and a promoted String would print them as this.)
func (v Variant) Label() string {
	s := fmt.Sprintf("pipeline=%s reuse=%s wait=%s", onOff(v.Pipeline), onOff(v.ReuseFiles),
		time.Duration(v.MaxGroupWaitUS)*time.Microsecond)
	if v.SkipSync {
		s += " syncdata=off"
	}
	return s
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Point is one measured (backend, variant, entry size, writers).
type Point struct {
	Backend string `json:"backend"`
	Variant
	EntrySize     int     `json:"entry_size"`
	Writers       int     `json:"writers"`
	Inflight      int     `json:"inflight"`
	Entries       int64   `json:"entries"`
	Seconds       float64 `json:"seconds"`
	EntriesPerSec float64 `json:"entries_per_sec"`
	// MiBPerSec counts payload bytes; WrittenMiBPerSec counts what reached
	// the journal files (record and group headers, block padding).
	MiBPerSec        float64          `json:"mib_per_sec"`
	WrittenMiBPerSec float64          `json:"written_mib_per_sec"`
	LatencyUS        perfdisk.Latency `json:"add_latency_us"`
	Datasyncs        int64            `json:"datasyncs"`
	EntriesPerSync   float64          `json:"entries_per_datasync"`
	BytesPerSync     float64          `json:"bytes_per_datasync"`
	// Disk is perfdisk's write+datasync at DiskBlock (the group bytes
	// rounded to 4 KiB); BandwidthFraction is MiBPerSec over its MiB/s.
	DiskBlock         int              `json:"disk_block,omitempty"`
	Disk              *perfdisk.Result `json:"disk_limit,omitempty"`
	BandwidthFraction float64          `json:"bandwidth_fraction,omitempty"`
}

// Baseline is the disk's own figures for one backend.
type Baseline struct {
	Backend string `json:"backend"`
	// PerEntry is 4 KiB write+datasync one at a time into a fresh file:
	// the rate of a journal doing one datasync per entry.
	PerEntry perfdisk.Result `json:"per_entry"`
	// PerEntryOverwrite is the same into an allocated file, the fair
	// baseline for reuse=on (measured only when reuse is).
	PerEntryOverwrite *perfdisk.Result `json:"per_entry_overwrite,omitempty"`
	Datasync          perfdisk.Result  `json:"datasync"`
}

// Report is the whole run.
type Report struct {
	Dir          string     `json:"dir"`
	FreeBytes    uint64     `json:"free_bytes"`
	Duration     string     `json:"duration_per_point"`
	Warmup       string     `json:"warmup_per_point"`
	DiskDuration string     `json:"duration_per_disk_case"`
	MaxFileSize  int64      `json:"max_file_size"`
	GOMAXPROCS   int        `json:"gomaxprocs"`
	Baselines    []Baseline `json:"baselines"`
	Points       []Point    `json:"points"`
	Targets      []Target   `json:"targets"`
}

// Run measures every point in cfg. Rows go to progress (if not nil) as
// they are measured, so a long run shows where it is.
func Run(cfg Config, progress io.Writer) (*Report, error) {
	if progress == nil {
		progress = io.Discard
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	free, err := freeSpace(cfg)
	if err != nil {
		return nil, err
	}
	rep := &Report{Dir: cfg.Dir, FreeBytes: free, Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(),
		DiskDuration: cfg.DiskDuration.String(), MaxFileSize: cfg.MaxFileSize, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	fmt.Fprintln(progress, pointHeader)
	for _, name := range cfg.Backends {
		if err := runBackend(rep, cfg, name, progress); err != nil {
			return nil, fmt.Errorf("perf journal (%s): %w", name, err)
		}
	}
	rep.Targets = targets(rep)
	return rep, nil
}

func (cfg Config) check() error {
	switch {
	case len(cfg.Backends) == 0 || len(cfg.EntrySizes) == 0 || len(cfg.Writers) == 0:
		return errors.New("perf journal: no backends, entry sizes or writer counts")
	case len(cfg.Pipelines) == 0 || len(cfg.Reuse) == 0 || len(cfg.GroupWaits) == 0:
		return errors.New("perf journal: no pipeline, reuse or group wait setting")
	case cfg.Inflight < 1 || cfg.Duration <= 0 || cfg.DiskDuration <= 0 || cfg.Warmup < 0:
		return errors.New("perf journal: inflight, duration and disk duration must be positive")
	case cfg.MaxFileSize < 8<<20:
		return errors.New("perf journal: max file size must be at least 8 MiB")
	}
	for _, n := range cfg.Writers {
		// Past the journal's queue (10000) Add blocks, and the wait would
		// be measured as journal latency.
		if n < 1 || n*cfg.Inflight > 10000 {
			return fmt.Errorf("perf journal: %d writers x %d in flight: want 1..10000 adds in flight", n, cfg.Inflight)
		}
	}
	return nil
}

// freeSpace checks that the directory exists and has room: perfdisk's
// files (appends wrap at 1 GiB, overwrite files are 256 MiB) plus the
// journal files a point keeps before checkpoints retire them.
func freeSpace(cfg Config) (uint64, error) {
	std := engine.NewStd()
	if err := std.MkdirAll(cfg.Dir, 0o755); err != nil {
		return 0, err
	}
	free, err := std.FreeSpace(cfg.Dir)
	if err != nil {
		return 0, err
	}
	if need := uint64(1<<30 + 8*cfg.MaxFileSize); free < need {
		return 0, fmt.Errorf("perf journal: %s has %d MiB free, the run may need about %d MiB", cfg.Dir, free>>20, need>>20)
	}
	return free, nil
}

// variants is the cross product of the settings lists. With SkipSync the
// pipeline setting has no effect, so it is measured once.
func (cfg Config) variants() []Variant {
	var out []Variant
	seen := map[Variant]bool{}
	for _, p := range cfg.Pipelines {
		for _, r := range cfg.Reuse {
			for _, w := range cfg.GroupWaits {
				v := Variant{Pipeline: p && !cfg.SkipSync, ReuseFiles: r, MaxGroupWaitUS: w.Microseconds(), SkipSync: cfg.SkipSync}
				if !seen[v] {
					seen[v] = true
					out = append(out, v)
				}
			}
		}
	}
	return out
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// runBackend measures the disk's baseline and every point on one backend,
// sharing one engine.FS so journal and disk figures come from the same
// io path.
func runBackend(rep *Report, cfg Config, name string, progress io.Writer) error {
	fs, err := engine.New(engine.Options{Backend: name, Logger: discardLogger()})
	if err != nil {
		return err
	}
	defer fs.Close()
	m := &measurer{fs: fs, cfg: cfg, disk: map[diskKey]perfdisk.Result{}}
	base, err := m.baseline()
	if err != nil {
		return err
	}
	rep.Baselines = append(rep.Baselines, base)
	fmt.Fprintln(progress, FormatBaseline(base))
	for _, v := range cfg.variants() {
		for _, size := range cfg.EntrySizes {
			for _, w := range cfg.Writers {
				p, err := m.point(v, size, w)
				if err != nil {
					return fmt.Errorf("%s, %d B entries, %d writers: %w", v.Label(), size, w, err)
				}
				rep.Points = append(rep.Points, p)
				fmt.Fprintln(progress, FormatPoint(p))
			}
		}
	}
	return nil
}
