package perfclient

import "github.com/magnetar-io/magnetar/tools/perfkit"

// Report is what one run of a client benchmark measured, printed with
// --json. benchmarks/ reads it, for Magnetar (magnetar perf produce,
// consume, e2e) and for NATS JetStream (benchmarks/natsperf) alike, so
// the two systems' numbers land in one table and one chart.
type Report struct {
	System      string  `json:"system"`      // "magnetar", "nats-jetstream"
	Variant     string  `json:"variant"`     // free text: "sync_interval=always", "batching=on"
	Mode        string  `json:"mode"`        // produce, consume, e2e
	Topics      int     `json:"topics"`      // topics (NATS: subjects of one stream)
	Producers   int     `json:"producers"`   // per topic
	Consumers   int     `json:"consumers"`   // per topic
	MessageSize int     `json:"messageSize"` // payload bytes
	TargetRate  float64 `json:"targetRate"`  // msg/s over all producers, 0 = unthrottled
	Seconds     float64 `json:"seconds"`     // measured window (warm-up excluded)
	// CPUCores is the client process's CPU (user + system, all threads)
	// over the window, per second of it: near 1 per core the process may
	// use, the client was the limit. Merged reports sum it. 0: not measured.
	CPUCores float64 `json:"cpuCores,omitempty"`

	Published  int64   `json:"published"` // messages acknowledged by the server in the window
	PublishErr int64   `json:"publishErrors"`
	PublishPS  float64 `json:"publishPerSec"`
	PublishMiB float64 `json:"publishMiBPerSec"`
	Consumed   int64   `json:"consumed"`
	ConsumePS  float64 `json:"consumePerSec"`
	ConsumeMiB float64 `json:"consumeMiBPerSec"`

	// Latencies in microseconds. Publish: send call to the server's
	// acknowledgement. End to end: the producer's send time (carried in the
	// message) to the consumer's receipt, both clocks on one machine.
	PublishLatency *perfkit.Latency `json:"publishLatencyUs,omitempty"`
	E2ELatency     *perfkit.Latency `json:"e2eLatencyUs,omitempty"`

	// Curves for charts: latency at percentiles 0..99.999 and rates per
	// interval over the whole run.
	PublishCurve []CurvePoint `json:"publishCurve,omitempty"`
	E2ECurve     []CurvePoint `json:"e2eCurve,omitempty"`
	Timeline     []Interval   `json:"timeline,omitempty"`

	// Partitions per topic, when the run made them partitioned.
	Partitions int `json:"partitions,omitempty"`

	// The window's histograms, HDR's V2 compressed encoding (base64):
	// runs of several client processes are summed exactly from these
	// (MergeReports), as percentiles cannot be.
	PublishHistogram string `json:"publishHistogram,omitempty"`
	E2EHistogram     string `json:"e2eHistogram,omitempty"`

	// Txn is where a producer's time per transaction went (TxnSize > 0).
	Txn *TxnPhases `json:"txn,omitempty"`
}

// TxnPhases are a run's mean times per transaction, in microseconds, over
// every transaction of the run (warm-up included). A producer waits for
// New and FirstSend before it can fill the transaction; Commit runs in the
// background while the next one fills.
type TxnPhases struct {
	Transactions int64   `json:"transactions"`
	NewUs        float64 `json:"newUs"`       // NewTransaction
	FirstSendUs  float64 `json:"firstSendUs"` // the first SendAsync: the Go client adds the partition to the transaction there, waiting for the coordinator
	RestUs       float64 `json:"restUs"`      // the other sends
	CommitUs     float64 `json:"commitUs"`    // Commit (waits for the sends' receipts, then the coordinator)
}

// mergeTxn is the transaction-weighted mean of a and b.
func mergeTxn(a, b *TxnPhases) *TxnPhases {
	if a == nil || b == nil {
		return firstNonNil(a, b)
	}
	n := a.Transactions + b.Transactions
	if n == 0 {
		return a
	}
	w := func(x, y float64) float64 {
		return (x*float64(a.Transactions) + y*float64(b.Transactions)) / float64(n)
	}
	return &TxnPhases{Transactions: n, NewUs: w(a.NewUs, b.NewUs), FirstSendUs: w(a.FirstSendUs, b.FirstSendUs),
		RestUs: w(a.RestUs, b.RestUs), CommitUs: w(a.CommitUs, b.CommitUs)}
}

func firstNonNil(a, b *TxnPhases) *TxnPhases {
	if a != nil {
		return a
	}
	return b
}

// CurvePoint is the latency (µs) at one percentile.
type CurvePoint struct {
	Percentile float64 `json:"p"`
	Micros     int64   `json:"us"`
}

// Interval is one progress interval: seconds since the start and the rates in it.
type Interval struct {
	At        float64 `json:"t"`
	PublishPS float64 `json:"publishPerSec"`
	ConsumePS float64 `json:"consumePerSec"`
}

// CurvePercentiles are the points a latency curve is drawn through.
func CurvePercentiles() []float64 {
	return []float64{0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999, 100}
}
