// Package perfclient is a pulsar-perf-like client benchmark (magnetar
// perf produce, consume and e2e) built on the official Go client,
// github.com/apache/pulsar-client-go, so that it measures what users of
// that client see.
//
// Every payload starts with its send time (TimestampBytes, unix
// nanoseconds, big endian); the rest is fixed pseudo-random bytes. A
// consumer reads the time to take the end-to-end latency, and in e2e to
// tell which messages the producers measured.
//
// Timing: the run starts all clients at once; the first Warmup is not
// measured. A message is measured if it was sent at or after the window's
// start and before its end (Duration later, or once NumMessages were
// sent). Producers then stop, and the window closes with the last
// acknowledgement of a measured message, so Published/Seconds is the rate
// the server acknowledged at. Consuming alone, the window is what arrives
// between its start and its end (or the NumMessages-th receipt). In e2e
// the consumers count the measured messages they receive, waiting up to
// Drain after the producers stop, so Consumed == Published when nothing
// was lost.
//
// Memory is bounded: latencies go into a fixed set of histograms and
// nothing is kept per message.
package perfclient

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// runner is one run's state, shared by its client goroutines.
type runner struct {
	cfg      Config
	client   pulsar.Client // for transactions
	log      *slog.Logger
	template []byte

	start            time.Time
	windowStart      time.Time
	windowStartNanos int64     // windowStart's wall clock, as payloads carry it
	windowEnd        time.Time // zero when NumMessages ends the window

	sends, receipts *budget // NumMessages, for producers or lone consumers
	pub, e2e        *latencies
	n               counters
	inflight        sync.WaitGroup // messages sent and not yet called back
	draining        atomic.Bool    // producers stopped sending
	warned          sync.Map       // kinds of failure already logged
	txn             txnTimes
	outgoing        *outgoings // reused messages (outgoing.go)
	cpu             windowCPU
}

// txnTimes sums the phases of transactions (TxnPhases), in ns.
type txnTimes struct {
	n, newNs, firstNs, restNs, commitNs atomic.Int64
}

func (t *txnTimes) phases() *TxnPhases {
	n := t.n.Load()
	if n == 0 {
		return nil
	}
	us := func(v *atomic.Int64) float64 { return float64(v.Load()) / float64(n) / 1e3 }
	return &TxnPhases{Transactions: n, NewUs: us(&t.newNs), FirstSendUs: us(&t.firstNs), RestUs: us(&t.restNs), CommitUs: us(&t.commitNs)}
}

// Run runs cfg against the cluster, writing a progress line to live (nil:
// none) every cfg.Progress, and returns what the window measured. A
// canceled ctx ends the run early; the report then covers what ran.
func Run(ctx context.Context, cfg Config, live io.Writer) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{}, fmt.Errorf("perfclient: %w", err)
	}
	if cfg.Partitions > 0 {
		if err := createPartitioned(ctx, cfg.AdminURL, cfg.Topics, cfg.Partitions); err != nil {
			return Report{}, err
		}
	}
	opts := pulsar.ClientOptions{URL: cfg.ServiceURL, Logger: clientLogger(cfg.Logger),
		TLSTrustCertsFilePath: cfg.TLSTrustCertsFile, TLSAllowInsecureConnection: cfg.TLSAllowInsecure}
	if cfg.AuthToken != "" {
		opts.Authentication = pulsar.NewAuthenticationToken(cfg.AuthToken)
	}
	opts.EnableTransaction = cfg.TxnSize > 0
	client, err := pulsar.NewClient(opts)
	if err != nil {
		return Report{}, fmt.Errorf("perfclient: client for %s: %w", cfg.ServiceURL, err)
	}
	defer client.Close()
	r := newRunner(cfg)
	r.client = client
	var consumers []pulsar.Consumer
	if cfg.consuming() {
		if consumers, err = r.subscribe(client); err != nil {
			return Report{}, fmt.Errorf("perfclient: %w", err)
		}
		defer closeConsumers(consumers)
	}
	var producers [][]pulsar.Producer
	if cfg.producing() {
		if producers, err = r.createProducers(client); err != nil {
			return Report{}, fmt.Errorf("perfclient: %w", err)
		}
		defer closeProducers(producers)
	}
	if cfg.StartBarrier != nil {
		if err := cfg.StartBarrier(ctx); err != nil {
			return Report{}, fmt.Errorf("perfclient: start barrier: %w", err)
		}
	}
	if live == nil {
		live = io.Discard
	}
	return r.run(ctx, producers, consumers, live), nil
}

func newRunner(cfg Config) *runner {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &runner{cfg: cfg, log: logger, template: newTemplate(cfg.Size),
		sends: newBudget(cfg.NumMessages), receipts: newBudget(cfg.NumMessages),
		pub: newLatencies(len(cfg.Topics) * cfg.Producers), e2e: newLatencies(len(cfg.Topics) * cfg.Consumers)}
	r.outgoing = newOutgoings(r)
	return r
}

// clientLogger passes the client's log to l (nil: nowhere); l's level
// decides what is printed.
func clientLogger(l *slog.Logger) plog.Logger {
	if l == nil {
		return plog.DefaultNopLogger()
	}
	return plog.NewLoggerWithSlog(l)
}

// run drives the clients through warm-up, window and drain.
func (r *runner) run(ctx context.Context, producers [][]pulsar.Producer, consumers []pulsar.Consumer, live io.Writer) Report {
	r.begin(time.Now())
	stopConsumers := r.startConsumers(consumers)
	stopLive := r.live(live)
	var seconds float64
	if len(producers) > 0 {
		r.produce(producers, ctx.Done())
		r.cpu.stop()
		seconds = r.producedSeconds(time.Now())
		if len(consumers) > 0 {
			r.drain(ctx)
		}
	} else {
		seconds = r.awaitWindow(ctx)
		r.cpu.stop()
	}
	timeline := stopLive()
	stopConsumers()
	return r.report(seconds, timeline)
}

// begin fixes the run's start and its window.
func (r *runner) begin(now time.Time) {
	r.start = now
	r.windowStart = now.Add(r.cfg.Warmup)
	r.windowStartNanos = r.windowStart.UnixNano()
	r.cpu.startAt(r.windowStart)
	if r.cfg.NumMessages == 0 {
		r.windowEnd = r.windowStart.Add(r.cfg.Duration)
	}
}

// pastWindow says whether now is at or after a timed window's end.
func (r *runner) pastWindow(now time.Time) bool {
	return !r.windowEnd.IsZero() && !now.Before(r.windowEnd)
}

// producedSeconds is the producing window's length: from its start to
// the last acknowledgement of a measured message, or to sendEnd if none
// came.
func (r *runner) producedSeconds(sendEnd time.Time) float64 {
	warm := r.windowStart.Sub(r.start)
	if last := time.Duration(r.n.lastAck.Load()); last > warm {
		return (last - warm).Seconds()
	}
	return max(sendEnd.Sub(r.windowStart), 0).Seconds()
}

// drain waits, up to cfg.Drain, for the consumers to receive every
// measured message the producers published.
func (r *runner) drain(ctx context.Context) {
	deadline := time.Now().Add(r.cfg.Drain)
	for r.n.consumed.Load() < r.n.published.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitWindow waits out a consuming window and returns its length.
func (r *runner) awaitWindow(ctx context.Context) float64 {
	var timeout <-chan time.Time
	if !r.windowEnd.IsZero() {
		t := time.NewTimer(time.Until(r.windowEnd))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-r.receipts.done:
	case <-ctx.Done():
	}
	end := time.Now()
	if r.pastWindow(end) {
		end = r.windowEnd
	}
	return max(end.Sub(r.windowStart), 0).Seconds()
}

// warnOnce logs the first failure of each kind; the report counts them.
func (r *runner) warnOnce(kind string, err error) {
	if _, seen := r.warned.LoadOrStore(kind, true); !seen {
		r.log.Warn("perf: first "+kind+" failure (later ones are not logged)", "err", err)
	}
}

// closed reports, without blocking, whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
