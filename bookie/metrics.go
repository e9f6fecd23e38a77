package bookie

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// Metrics are a bookie's Prometheus metrics, under BookKeeper's names so
// existing dashboards find them (latencies in seconds).
type Metrics struct {
	requests   map[bkproto.Op]*prometheus.HistogramVec
	journalAdd prometheus.Histogram
	status     prometheus.GaugeFunc
}

var latencyBuckets = []float64{
	50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1, 5,
}

// NewMetrics registers a bookie's metrics with reg. core may be nil until
// the core is open (server status then reads 0).
func NewMetrics(reg prometheus.Registerer, core func() *Core) *Metrics {
	m := &Metrics{requests: make(map[bkproto.Op]*prometheus.HistogramVec)}
	names := map[bkproto.Op]string{
		bkproto.OpAdd:         "bookkeeper_server_ADD_ENTRY_REQUEST",
		bkproto.OpRead:        "bookkeeper_server_READ_ENTRY_REQUEST",
		bkproto.OpReadLAC:     "bookkeeper_server_READ_LAC_REQUEST",
		bkproto.OpWriteLAC:    "bookkeeper_server_WRITE_LAC_REQUEST",
		bkproto.OpForceLedger: "bookkeeper_server_FORCE_LEDGER_REQUEST",
		bkproto.OpInfo:        "bookkeeper_server_GET_BOOKIE_INFO_REQUEST",
		bkproto.OpBatchRead:   "bookkeeper_server_BATCH_READ_ENTRY_REQUEST",
	}
	for op, name := range names {
		m.requests[op] = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    name,
			Help:    "Latency of " + op.String() + " requests from decoding to the answer being queued, by success.",
			Buckets: latencyBuckets,
		}, []string{"success"})
		reg.MustRegister(m.requests[op])
	}
	m.journalAdd = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "bookie_journal_JOURNAL_ADD_ENTRY",
		Help:    "Time from queueing an entry on the journal to it being durable.",
		Buckets: latencyBuckets,
	})
	m.status = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bookie_SERVER_STATUS",
		Help: "1 while the bookie accepts writes, 0 while it is read-only or starting.",
	}, func() float64 {
		c := core()
		if c == nil {
			return 0
		}
		if ro, _ := c.ReadOnly(); ro {
			return 0
		}
		return 1
	})
	reg.MustRegister(m.journalAdd, m.status, diskCollector{core}, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bookie_out_of_space",
		Help: "1 while the bookie is read-only because a disk is full (it turns writable by itself below diskUsageLwmThreshold).",
	}, func() float64 {
		if c := core(); c != nil && c.OutOfSpace() {
			return 1
		}
		return 0
	}))
	return m
}

// diskCollector exports each directory's usage as of the last disk check,
// in percent as BookKeeper's per-directory usage gauges.
type diskCollector struct{ core func() *Core }

var (
	ledgerDirUsage = prometheus.NewDesc("bookie_ledger_dir_usage",
		"Percent of the ledger directory's file system in use (diskUsageThreshold applies to it).", []string{"dir"}, nil)
	journalDirUsage = prometheus.NewDesc("bookie_journal_dir_usage",
		"Percent of the journal directory's file system in use (diskUsageThreshold applies to it).", []string{"dir"}, nil)
)

func (diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ledgerDirUsage
	ch <- journalDirUsage
}

func (d diskCollector) Collect(ch chan<- prometheus.Metric) {
	c := d.core()
	if c == nil {
		return
	}
	for _, u := range c.DirUsages() {
		desc := ledgerDirUsage
		if u.Journal {
			desc = journalDirUsage
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, 100*u.Used, u.Dir)
	}
}

func (m *Metrics) observeRequest(op bkproto.Op, status bkproto.Status, d time.Duration) {
	h := m.requests[op]
	if h == nil {
		return
	}
	success := "true"
	if status != bkproto.StatusOK {
		success = "false"
	}
	h.WithLabelValues(success).Observe(d.Seconds())
}

func (m *Metrics) observeJournalAdd(d time.Duration) {
	if m != nil {
		m.journalAdd.Observe(d.Seconds())
	}
}
