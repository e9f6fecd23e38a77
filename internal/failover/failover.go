// Package failover times the steps a cluster takes to recover from a
// fault, so an operator can see where a stall went (issue 40: time to
// detect, to re-place, to re-acquire a bundle): each layer reports how
// long its step took to a Recorder, which feeds one Prometheus histogram
// per step (magnetar_failover_seconds{step=...}).
//
// The steps:
//
//	bookie_failure_detect  a write to a bookie sent -> the bookie declared
//	                       failed (an error or the add timeout): how long
//	                       a writer waited on it before knowing (ledger)
//	ensemble_change        a bookie declared failed -> the new ensemble
//	                       stored, the pending adds re-sent (ledger)
//	dead_owner_wait        a lookup held while the bundle's owner refused
//	                       connections and its node was still there
//	                       (broker/ownership)
//	bundle_acquire         a lookup of a bundle without an owner -> this
//	                       broker holds it (broker/ownership)
//
// Each histogram's count is also how often the step happened (the
// ensemble_change count is BookKeeper's NUM_ENSEMBLE_CHANGE).
// A nil *Recorder records nothing, so layers need no check.
package failover

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Step is one failover step.
type Step int

// The steps (see the package doc).
const (
	BookieFailureDetect Step = iota
	EnsembleChange
	DeadOwnerWait
	BundleAcquire
	numSteps
)

var names = [numSteps]string{"bookie_failure_detect", "ensemble_change", "dead_owner_wait", "bundle_acquire"}

func (s Step) String() string { return names[s] }

// Recorder records step durations.
type Recorder struct {
	vec    *prometheus.HistogramVec
	obs    [numSteps]prometheus.Observer
	counts [numSteps]atomic.Uint64
}

// Buckets: 1 ms to about 65 s, doubling: failovers take from
// milliseconds (a refused connection) to a session timeout and more.
var Buckets = prometheus.ExponentialBuckets(1e-3, 2, 17)

// NewRecorder returns a recorder; register Collector() to export it.
func NewRecorder() *Recorder {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "magnetar_failover_seconds",
		Help: "time each failover step took (internal/failover)", Buckets: Buckets}, []string{"step"})
	r := &Recorder{vec: vec}
	for i := range numSteps {
		r.obs[i] = vec.WithLabelValues(names[i])
	}
	return r
}

// Collector exports the histograms.
func (r *Recorder) Collector() prometheus.Collector { return r.vec }

// Observe records d for s.
func (r *Recorder) Observe(s Step, d time.Duration) {
	if r == nil {
		return
	}
	r.obs[s].Observe(d.Seconds())
	r.counts[s].Add(1)
}

// Count is how many times s was recorded.
func (r *Recorder) Count(s Step) uint64 {
	if r == nil {
		return 0
	}
	return r.counts[s].Load()
}

// Since records the time since start for s.
func (r *Recorder) Since(s Step, start time.Time) {
	r.Observe(s, time.Since(start))
}
