// Package perfdisk measures what the disk under a directory can do through
// each engine backend: write+datasync throughput and latency at several
// block sizes (appending to a fresh file, and overwriting an already
// allocated one), the latency of one datasync, and sequential read
// bandwidth with a cold page cache. It backs `magnetar perf disk`; later
// benchmark suites compare Magnetar against these figures.
package perfdisk

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/magnetar-io/magnetar/engine"
)

// Config chooses what to measure.
type Config struct {
	Dir        string        // directory on the disk to measure (files are removed afterwards)
	Backends   []string      // "uring", "std"
	BlockSizes []int         // write sizes for write+datasync
	Modes      []string      // "append" (fresh file) and/or "overwrite" (allocated, zero-filled file)
	Duration   time.Duration // per write case
	ReadFile   int64         // bytes written then read back for the read test
	ReadBlock  int           // read size
}

// DefaultConfig returns the settings `magnetar perf disk` uses by default.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:        dir,
		Backends:   []string{engine.BackendUring, engine.BackendStd},
		BlockSizes: []int{4 << 10, 64 << 10, 256 << 10, 1 << 20},
		Modes:      []string{"append", "overwrite"},
		Duration:   2 * time.Second,
		ReadFile:   256 << 20,
		ReadBlock:  1 << 20,
	}
}

// Latency holds percentiles in microseconds.
type Latency struct {
	P50  int64 `json:"p50"`
	P95  int64 `json:"p95"`
	P99  int64 `json:"p99"`
	P999 int64 `json:"p999"`
	Max  int64 `json:"max"`
}

// Result is one measured case.
type Result struct {
	Backend   string   `json:"backend"`
	Test      string   `json:"test"` // write+datasync, datasync, seqread
	Mode      string   `json:"mode,omitempty"`
	BlockSize int      `json:"block_size"`
	Ops       int64    `json:"ops"`
	Seconds   float64  `json:"seconds"`
	OpsPerSec float64  `json:"ops_per_sec"`
	MiBPerSec float64  `json:"mib_per_sec"`
	LatencyUS *Latency `json:"latency_us,omitempty"`
}

// Report is the whole run.
type Report struct {
	Dir            string   `json:"dir"`
	FreeBytes      uint64   `json:"free_bytes"`
	DurationPerRun string   `json:"duration_per_case"`
	Results        []Result `json:"results"`
}

// Run measures every case in cfg. progress, if set, gets each result as it
// is measured.
func Run(cfg Config, progress func(Result)) (*Report, error) {
	std := engine.NewStd()
	free, err := std.FreeSpace(cfg.Dir)
	if err != nil {
		return nil, err
	}
	rep := &Report{Dir: cfg.Dir, FreeBytes: free, DurationPerRun: cfg.Duration.String()}
	need := cfg.ReadFile + appendWrap + overwriteSize // the largest files alive at once
	if uint64(need) > free {
		return nil, fmt.Errorf("perf disk: %s has %d MiB free, the run may need about %d MiB", cfg.Dir, free>>20, need>>20)
	}
	for _, name := range cfg.Backends {
		fs, err := engine.New(engine.Options{Backend: name, Logger: discardLogger()})
		if err != nil {
			return nil, err
		}
		results, err := runBackend(fs, cfg, progress)
		fs.Close()
		if err != nil {
			return nil, fmt.Errorf("perf disk (%s): %w", name, err)
		}
		rep.Results = append(rep.Results, results...)
	}
	return rep, nil
}

func runBackend(fs engine.FS, cfg Config, progress func(Result)) ([]Result, error) {
	var out []Result
	add := func(r Result) {
		out = append(out, r)
		if progress != nil {
			progress(r)
		}
	}
	for _, mode := range cfg.Modes {
		for _, size := range cfg.BlockSizes {
			r, err := WriteSync(fs, cfg, mode, size)
			if err != nil {
				return nil, err
			}
			add(r)
		}
	}
	r, err := DatasyncLatency(fs, cfg)
	if err != nil {
		return nil, err
	}
	add(r)
	if r, err = seqRead(fs, cfg); err != nil {
		return nil, err
	}
	add(r)
	return out, nil
}

// Appends wrap around at appendWrap bytes to bound disk use; overwrite mode
// rewrites a zero-filled file of overwriteSize bytes.
const (
	appendWrap    = 1 << 30
	overwriteSize = 256 << 20
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// NewHist returns a histogram of microseconds from 1 µs to 60 s at three
// significant digits, the range every perf tool records latencies in.
func NewHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

// LatencyOf reads the reported percentiles out of a NewHist histogram.
func LatencyOf(h *hdrhistogram.Histogram) *Latency {
	return &Latency{P50: h.ValueAtQuantile(50), P95: h.ValueAtQuantile(95), P99: h.ValueAtQuantile(99),
		P999: h.ValueAtQuantile(99.9), Max: h.Max()}
}

func finish(r Result, h *hdrhistogram.Histogram, elapsed time.Duration, bytes int64) Result {
	r.Seconds = elapsed.Seconds()
	r.OpsPerSec = float64(r.Ops) / r.Seconds
	r.MiBPerSec = float64(bytes) / r.Seconds / (1 << 20)
	if h != nil {
		r.LatencyUS = LatencyOf(h)
	}
	return r
}

// prepare creates the test file; for overwrite mode it is filled with zeros
// and synced first, so the timed writes land on allocated, written blocks.
func prepare(fs engine.FS, cfg Config, mode string, size int) (engine.File, int64, error) {
	name := filepath.Join(cfg.Dir, fmt.Sprintf("magnetar-perfdisk-%s-%s-%d", fs.Backend(), mode, size))
	f, err := fs.Create(name)
	if err != nil {
		return nil, 0, err
	}
	limit := int64(appendWrap)
	if mode == "overwrite" {
		limit = overwriteSize
		zero := make([]byte, 1<<20)
		for off := int64(0); off < limit; off += int64(len(zero)) {
			if _, err := f.WriteAt([][]byte{zero}, off); err != nil {
				return nil, 0, closeRemove(fs, f, err)
			}
		}
		if err := f.Datasync(); err != nil {
			return nil, 0, closeRemove(fs, f, err)
		}
	}
	return f, limit, nil
}

func closeRemove(fs engine.FS, f engine.File, err error) error {
	return errors.Join(err, f.Close(), fs.Remove(f.Name()))
}

// WriteSync measures write+datasync of size-byte blocks, one at a time, for
// cfg.Duration in a file under cfg.Dir, in mode "append" or "overwrite".
// Exported so other measurements (perf journal) can take the disk's limit
// at their own block size, in the same run and directory.
func WriteSync(fs engine.FS, cfg Config, mode string, size int) (Result, error) {
	f, limit, err := prepare(fs, cfg, mode, size)
	if err != nil {
		return Result{}, err
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	h := NewHist()
	r := Result{Backend: fs.Backend(), Test: "write+datasync", Mode: mode, BlockSize: size}
	start := time.Now()
	var off int64
	for time.Since(start) < cfg.Duration {
		t0 := time.Now()
		if _, err := f.WriteAtSync([][]byte{buf}, off); err != nil {
			return Result{}, closeRemove(fs, f, err)
		}
		_ = h.RecordValue(time.Since(t0).Microseconds())
		r.Ops++
		if off += int64(size); off+int64(size) > limit {
			off = 0
		}
	}
	elapsed := time.Since(start)
	return finish(r, h, elapsed, r.Ops*int64(size)), closeRemove(fs, f, nil)
}

// DatasyncLatency times fdatasync alone after a 4 KiB append, the cost a
// journal pays per group beyond the write itself, for cfg.Duration.
func DatasyncLatency(fs engine.FS, cfg Config) (Result, error) {
	f, _, err := prepare(fs, cfg, "datasync", 4096)
	if err != nil {
		return Result{}, err
	}
	buf := make([]byte, 4096)
	h := NewHist()
	r := Result{Backend: fs.Backend(), Test: "datasync", Mode: "append", BlockSize: 4096}
	start := time.Now()
	var busy time.Duration
	for time.Since(start) < cfg.Duration {
		if _, err := f.Append([][]byte{buf}); err != nil {
			return Result{}, closeRemove(fs, f, err)
		}
		t0 := time.Now()
		if err := f.Datasync(); err != nil {
			return Result{}, closeRemove(fs, f, err)
		}
		d := time.Since(t0)
		busy += d
		_ = h.RecordValue(d.Microseconds())
		r.Ops++
	}
	return finish(r, h, busy, 0), closeRemove(fs, f, nil)
}

// seqRead writes cfg.ReadFile bytes, evicts them from the page cache and
// reads them back in order.
func seqRead(fs engine.FS, cfg Config) (Result, error) {
	f, _, err := prepare(fs, cfg, "read", cfg.ReadBlock)
	if err != nil {
		return Result{}, err
	}
	buf := make([]byte, cfg.ReadBlock)
	for off := int64(0); off < cfg.ReadFile; off += int64(len(buf)) {
		if _, err := f.WriteAt([][]byte{buf}, off); err != nil {
			return Result{}, closeRemove(fs, f, err)
		}
	}
	if err := f.Datasync(); err != nil {
		return Result{}, closeRemove(fs, f, err)
	}
	if err := f.DropCache(); err != nil {
		return Result{}, closeRemove(fs, f, err)
	}
	h := NewHist()
	r := Result{Backend: fs.Backend(), Test: "seqread", BlockSize: cfg.ReadBlock}
	start := time.Now()
	var total int64
	for off := int64(0); off < cfg.ReadFile; off += int64(len(buf)) {
		t0 := time.Now()
		n, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return Result{}, closeRemove(fs, f, err)
		}
		_ = h.RecordValue(time.Since(t0).Microseconds())
		total += int64(n)
		r.Ops++
	}
	return finish(r, h, time.Since(start), total), closeRemove(fs, f, nil)
}

// Format writes the report as a table for people.
func Format(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "disk under %s (%d MiB free), %s per write case\n", rep.Dir, rep.FreeBytes>>20, rep.DurationPerRun)
	fmt.Fprintf(w, "%-7s %-15s %-9s %8s %10s %9s %8s %8s %8s %8s\n",
		"backend", "test", "mode", "block", "ops/s", "MiB/s", "p50us", "p99us", "p999us", "maxus")
	for _, r := range rep.Results {
		fmt.Fprintln(w, FormatResult(r))
	}
}

// FormatResult renders one result as a table row.
func FormatResult(r Result) string {
	lat := Latency{}
	if r.LatencyUS != nil {
		lat = *r.LatencyUS
	}
	return fmt.Sprintf("%-7s %-15s %-9s %8s %10.0f %9.1f %8d %8d %8d %8d", r.Backend, r.Test, r.Mode,
		SizeName(r.BlockSize), r.OpsPerSec, r.MiBPerSec, lat.P50, lat.P99, lat.P999, lat.Max)
}

// SizeName writes a byte count as perf tables show it: 4KiB, 1MiB, 100B.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
