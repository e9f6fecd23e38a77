package main

import (
	"fmt"
	"io"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/magnetar-io/magnetar/tools/perfclient"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// system is the report's System for every natsperf run.
const system = "nats-jetstream"

// report builds the run's Report and warns on live about errors it counts
// but does not fail on.
func (l *load) report(w window, variant string) *perfclient.Report {
	cfg := l.cfg
	rep := &perfclient.Report{System: system, Variant: variant, Mode: cfg.Mode, Topics: 1,
		Producers: cfg.Producers, MessageSize: cfg.Size, TargetRate: cfg.Rate,
		Seconds: w.elapsed.Seconds(), Timeline: w.timeline}
	tallies := make([]*perfkit.Tally, 0, len(l.producers))
	for _, p := range l.producers {
		tallies = append(tallies, p.tally)
		rep.PublishErr += p.errs.Load()
	}
	h, n := perfkit.Merge(tallies)
	rep.Published = n
	rep.PublishPS, rep.PublishMiB = rates(n, cfg.Size, rep.Seconds)
	rep.PublishLatency, rep.PublishCurve = latencies(h, n)
	if l.cons != nil {
		// Consumed counts the messages sent in the window (so it equals
		// Published once the consumer caught up); the rate is what the
		// consumer received in the window, since one that lags receives
		// the window's messages later.
		h, n := perfkit.Merge([]*perfkit.Tally{l.cons.tally})
		rep.Consumers, rep.Consumed = 1, n
		rep.ConsumePS, rep.ConsumeMiB = rates(w.received, cfg.Size, rep.Seconds)
		rep.E2ELatency, rep.E2ECurve = latencies(h, n)
	}
	return rep
}

// warnings are the errors a run counted without failing, one a line.
func (l *load) warnings() []string {
	var out []string
	for _, p := range l.producers {
		if p.firstErr != nil {
			out = append(out, fmt.Sprintf("producer %d: publish errors, the first: %v", p.id, p.firstErr))
		}
	}
	if l.cons != nil {
		if err := l.cons.firstError(); err != nil {
			out = append(out, fmt.Sprintf("consumer: %d ack errors; first consumer error: %v", l.cons.ackErrs.Load(), err))
		}
	}
	return out
}

func rates(n int64, size int, seconds float64) (perSec, mibPerSec float64) {
	if seconds <= 0 {
		return 0, 0
	}
	perSec = float64(n) / seconds
	return perSec, perSec * float64(size) / (1 << 20)
}

// latencies summarises h; none when nothing was measured, so the JSON
// leaves them out rather than showing zeros as if measured.
func latencies(h *hdrhistogram.Histogram, n int64) (*perfkit.Latency, []perfclient.CurvePoint) {
	if n == 0 {
		return nil, nil
	}
	lat := perfkit.LatencyOf(h)
	var curve []perfclient.CurvePoint
	for _, q := range perfclient.CurvePercentiles() {
		curve = append(curve, perfclient.CurvePoint{Percentile: q, Micros: h.ValueAtQuantile(q)})
	}
	return &lat, curve
}

// formatSummary is the human form of rep.
func formatSummary(w io.Writer, rep *perfclient.Report) {
	rate := "unthrottled"
	if rep.TargetRate > 0 {
		rate = fmt.Sprintf("target %.0f msg/s", rep.TargetRate)
	}
	fmt.Fprintf(w, "%s  %s  %s  %d producer(s)  %d B  %s  %.1f s measured\n", rep.System, rep.Variant,
		rep.Mode, rep.Producers, rep.MessageSize, rate, rep.Seconds)
	fmt.Fprintf(w, "publish  %10d msgs %10.0f msg/s %8.1f MiB/s  errors %d\n",
		rep.Published, rep.PublishPS, rep.PublishMiB, rep.PublishErr)
	formatLatency(w, "publish", rep.PublishLatency)
	if rep.Mode == modeE2E {
		fmt.Fprintf(w, "consume  %10d msgs %10.0f msg/s %8.1f MiB/s\n", rep.Consumed, rep.ConsumePS, rep.ConsumeMiB)
		formatLatency(w, "e2e", rep.E2ELatency)
	}
}

func formatLatency(w io.Writer, name string, l *perfkit.Latency) {
	if l == nil {
		fmt.Fprintf(w, "%-7s latency: nothing measured\n", name)
		return
	}
	fmt.Fprintf(w, "%-7s latency us  p50 %d  p95 %d  p99 %d  p99.9 %d  p99.99 %d  max %d\n",
		name, l.P50, l.P95, l.P99, l.P999, l.P9999, l.Max)
}
