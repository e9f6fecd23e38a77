// Package perfkit holds what the bookie and ledger benchmarks (perfbookie,
// perfledger) and the journal benchmark (perfjournal) measure the same
// way: latency histograms and their summary, the journal's datasyncs and
// bytes counted from below, an in-process bookie on loopback, the load
// phase with its live progress line and measured window, and the shared
// parts of the report's rows. Keeping one copy keeps the tools' numbers
// comparable: a fix to how one counts or times applies to all.
package perfkit

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

// HistMaxUS is the top of perfdisk.NewHist's range; longer latencies are
// clamped to it rather than dropped.
const HistMaxUS = 60_000_000

// Latency holds percentiles in microseconds.
type Latency struct {
	P50   int64 `json:"p50"`
	P95   int64 `json:"p95"`
	P99   int64 `json:"p99"`
	P999  int64 `json:"p999"`
	P9999 int64 `json:"p9999"`
	Max   int64 `json:"max"`
}

// LatencyOf summarises a histogram of microseconds.
func LatencyOf(h *hdrhistogram.Histogram) Latency {
	return Latency{P50: h.ValueAtQuantile(50), P95: h.ValueAtQuantile(95), P99: h.ValueAtQuantile(99),
		P999: h.ValueAtQuantile(99.9), P9999: h.ValueAtQuantile(99.99), Max: h.Max()}
}

// Lat is r's latency, zero when r has none, so a report line can print a
// measurement that was skipped without a nil check at each use.
func Lat(r perfdisk.Result) perfdisk.Latency {
	if r.LatencyUS == nil {
		return perfdisk.Latency{}
	}
	return *r.LatencyUS
}

// Tally is one client's measured results. Completion callbacks record
// into it on the client's own goroutine while the driver waits; the
// driver reads it with Merge after the client drained.
type Tally struct {
	mu       sync.Mutex
	hist     *hdrhistogram.Histogram
	measured int64
}

// NewTally returns an empty tally.
func NewTally() *Tally { return &Tally{hist: perfdisk.NewHist()} }

// Record counts one measured request that took d.
func (t *Tally) Record(d time.Duration) {
	us := min(max(d.Microseconds(), 1), HistMaxUS)
	t.mu.Lock()
	_ = t.hist.RecordValue(us) // in range by the clamp above
	t.measured++
	t.mu.Unlock()
}

// Merge sums tallies into one histogram and count.
func Merge(ts []*Tally) (*hdrhistogram.Histogram, int64) {
	h := perfdisk.NewHist()
	var n int64
	for _, t := range ts {
		t.mu.Lock()
		h.Merge(t.hist)
		n += t.measured
		t.mu.Unlock()
	}
	return h, n
}

// Rates are a measured window's throughput and latency.
type Rates struct {
	Entries       int64
	Seconds       float64
	EntriesPerSec float64
	MiBPerSec     float64
	LatencyUS     Latency
}

// RatesOf sums tallies of size-byte entries measured over elapsed.
func RatesOf(tallies []*Tally, size int, elapsed time.Duration) Rates {
	h, n := Merge(tallies)
	s := elapsed.Seconds()
	return Rates{Entries: n, Seconds: s, EntriesPerSec: float64(n) / s,
		MiBPerSec: float64(n) * float64(size) / s / (1 << 20), LatencyUS: LatencyOf(h)}
}
