// Package flightrec keeps Go's flight recorder (runtime/trace) running and
// writes its window to a file when a publish is slow, so that a latency
// tail can be read afterwards in `go tool trace` (docs/profiling.md).
//
// Behaviour:
//   - Off unless a directory is configured (flightRecorderDir): the
//     recorder costs the runtime's tracing overhead (a few percent of
//     CPU), so it is for investigations.
//   - Observe(d) with d over Threshold (flightRecorderPublishThresholdMillis,
//     default 20 ms) writes the last seconds of execution trace to
//     DIR/publish-<unix ms>-<d ms>ms.trace, on a goroutine, at most once
//     per MinInterval (default 1 min) and keeping the newest Keep files
//     (default 10): a storm of slow publishes costs one trace a minute.
//   - One log line per trace written, naming the file and the latency.
package flightrec

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/trace"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Recorder.
type Config struct {
	Dir         string
	Threshold   time.Duration // default 20 ms
	MinInterval time.Duration // default 1 min
	Keep        int           // default 10
	Logger      *slog.Logger
}

// Recorder dumps the flight recorder's window on slow publishes. A nil
// *Recorder does nothing.
type Recorder struct {
	cfg  Config
	fr   *trace.FlightRecorder
	last atomic.Int64 // unix nanoseconds of the last dump
	mu   sync.Mutex   // one dump at a time
	wg   sync.WaitGroup
}

// Start starts the flight recorder.
func Start(cfg Config) (*Recorder, error) {
	if cfg.Threshold <= 0 {
		cfg.Threshold = 20 * time.Millisecond
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = time.Minute
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("flightRecorderDir: %w", err)
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 5 * time.Second, MaxBytes: 32 << 20})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("flight recorder: %w", err)
	}
	return &Recorder{cfg: cfg, fr: fr}, nil
}

// Observe notes one publish's latency and dumps a trace if it was slow.
func (r *Recorder) Observe(d time.Duration) {
	if r == nil || d < r.cfg.Threshold {
		return
	}
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(r.cfg.MinInterval) || !r.last.CompareAndSwap(last, now) {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.dump(d)
	}()
}

func (r *Recorder) dump(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := filepath.Join(r.cfg.Dir, fmt.Sprintf("publish-%d-%dms.trace", time.Now().UnixMilli(), d.Milliseconds()))
	f, err := os.Create(name)
	if err == nil {
		_, err = r.fr.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		r.cfg.Logger.Warn("flight recorder: trace not written", "file", name, "err", err)
		_ = os.Remove(name)
		return
	}
	r.cfg.Logger.Info("slow publish: flight-recorder trace written", "file", name, "latency", d)
	r.prune()
}

// prune keeps the newest Keep traces.
func (r *Recorder) prune() {
	files, _ := filepath.Glob(filepath.Join(r.cfg.Dir, "publish-*.trace"))
	if len(files) <= r.cfg.Keep {
		return
	}
	sort.Strings(files) // the unix-millisecond prefix orders them
	for _, f := range files[:len(files)-r.cfg.Keep] {
		_ = os.Remove(f)
	}
}

// Stop waits for a dump in progress and stops the recorder.
func (r *Recorder) Stop() {
	if r == nil {
		return
	}
	r.wg.Wait()
	r.fr.Stop()
}
