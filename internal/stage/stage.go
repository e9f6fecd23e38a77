// Package stage times the publish path stage by stage, so that a latency
// tail can be placed: each layer reports how long its part of an add took
// to a Recorder, which feeds one Prometheus histogram per stage
// (magnetar_publish_stage_seconds{stage=...}). The report (make
// bench-report) and docs/profiling.md read them.
//
// The stages, in the order an add passes them (standalone: all in one
// process; cluster: the bookie ones in the bookie's process):
//
//	broker_to_storage   SEND parsed -> managed-ledger add called (dedup, checks)
//	ml_queue            managed-ledger add -> handed to the ledger writer
//	                    (non-zero while a ledger rolls over)
//	ledger_add          ledger append -> its callback runs (quorum
//	                    acknowledged, then delivered in entry order)
//	bookie_queue        in-process bookie (standalone): add sent -> the
//	                    bookie's add goroutine starts it
//	bookie_add          bookie received an add -> answered it
//	journal_queue       journal add queued -> taken into a group
//	journal_write       group written (and, unpipelined, datasynced)
//	journal_sync        group datasynced (pipelined journals)
//	ledger_deliver      quorum acknowledged -> the append's callback
//	                    runs (the delivery goroutine's wait for a
//	                    processor, and earlier entries' callbacks)
//	storage_add         managed-ledger add -> its callback (all of storage)
//	receipt             SEND parsed -> SEND_RECEIPT handed to the connection
//
// A nil *Recorder records nothing, so layers need no check.
package stage

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stage is one step of the publish path.
type Stage int

// The stages (see the package doc).
const (
	BrokerToStorage Stage = iota
	MLQueue
	LedgerAdd
	BookieQueue
	BookieAdd
	JournalQueue
	JournalWrite
	JournalSync
	LedgerDeliver
	StorageAdd
	Receipt
	numStages
)

var names = [numStages]string{"broker_to_storage", "ml_queue", "ledger_add", "bookie_queue", "bookie_add",
	"journal_queue", "journal_write", "journal_sync", "ledger_deliver", "storage_add", "receipt"}

func (s Stage) String() string { return names[s] }

// Names are the stages' label values, in path order.
func Names() []string { return append([]string(nil), names[:]...) }

// Recorder records stage durations.
type Recorder struct {
	vec *prometheus.HistogramVec
	obs [numStages]prometheus.Observer
}

// Buckets are the histograms' upper bounds: 25 µs to about 1.6 s,
// doubling, fine enough to place a millisecond tail.
var Buckets = prometheus.ExponentialBuckets(25e-6, 2, 17)

// NewRecorder returns a recorder; register Collector() to export it
// (magnetar_publish_stage_seconds).
func NewRecorder() *Recorder {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "magnetar_publish_stage_seconds",
		Help: "time an add spends in each stage of the publish path (internal/stage)", Buckets: Buckets}, []string{"stage"})
	r := &Recorder{vec: vec}
	for i := range numStages {
		r.obs[i] = vec.WithLabelValues(names[i])
	}
	return r
}

// Collector exports the histograms.
func (r *Recorder) Collector() prometheus.Collector { return r.vec }

// Observe records d for s.
func (r *Recorder) Observe(s Stage, d time.Duration) {
	if r == nil {
		return
	}
	r.obs[s].Observe(d.Seconds())
}

// Since records the time since start for s.
func (r *Recorder) Since(s Stage, start time.Time) {
	if r == nil {
		return
	}
	r.obs[s].Observe(time.Since(start).Seconds())
}
