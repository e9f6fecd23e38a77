package perfclient

import (
	"fmt"
	"io"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// report is what the window measured.
func (r *runner) report(seconds float64, timeline []Interval) Report {
	c := r.cfg
	rep := Report{System: c.System, Variant: c.Variant, Mode: c.Mode, Topics: len(c.Topics), Partitions: c.Partitions,
		MessageSize: c.Size, TargetRate: c.Rate, Seconds: seconds, Timeline: timeline,
		CPUCores: r.cpu.value()}
	if c.producing() {
		rep.Producers = c.Producers
		rep.Published, rep.PublishErr = r.n.published.Load(), r.n.pubErrs.Load()
		rep.PublishPS, rep.PublishMiB = perSecond(rep.Published, rep.Published*int64(c.Size), seconds)
		h := r.pub.windowHist()
		rep.PublishLatency, rep.PublishCurve = summarise(h)
		rep.PublishHistogram = encodeHist(h)
		rep.Txn = r.txn.phases()
	}
	if c.consuming() {
		rep.Consumers = c.Consumers
		rep.Consumed = r.n.consumed.Load()
		bytes := r.n.conWindowBytes.Load()
		rep.ConsumePS, rep.ConsumeMiB = perSecond(rep.Consumed, bytes, seconds)
		h := r.e2e.windowHist()
		rep.E2ELatency, rep.E2ECurve = summarise(h)
		rep.E2EHistogram = encodeHist(h)
		if !c.producing() && rep.Consumed > 0 {
			rep.MessageSize = int(bytes / rep.Consumed) // what arrived, whatever --size said
		}
	}
	return rep
}

// perSecond is msgs and bytes over seconds as msg/s and MiB/s (zero for
// an empty window).
func perSecond(msgs, bytes int64, seconds float64) (float64, float64) {
	if seconds <= 0 {
		return 0, 0
	}
	return float64(msgs) / seconds, float64(bytes) / seconds / (1 << 20)
}

// summarise is h's percentiles and curve, or nothing if h is empty.
func summarise(h *hdrhistogram.Histogram) (*perfkit.Latency, []CurvePoint) {
	if h.TotalCount() == 0 {
		return nil, nil
	}
	l := perfkit.LatencyOf(h)
	ps := CurvePercentiles()
	curve := make([]CurvePoint, len(ps))
	for i, p := range ps {
		curve[i] = CurvePoint{Percentile: p, Micros: h.ValueAtQuantile(p)}
	}
	return &l, curve
}

// encodeHist is h in HDR's V2 compressed encoding, "" when empty (or, for
// a histogram the encoder refuses, which ours are not: the report still
// has its percentiles).
func encodeHist(h *hdrhistogram.Histogram) string {
	if h.TotalCount() == 0 {
		return ""
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return ""
	}
	return string(b)
}

// Format writes rep for people: what ran, the rates and the latencies in
// milliseconds.
func Format(w io.Writer, rep Report) {
	fmt.Fprintf(w, "%s %s: %d topic(s)", rep.System, rep.Mode, rep.Topics)
	if rep.Partitions > 0 {
		fmt.Fprintf(w, " x %d partitions", rep.Partitions)
	}
	fmt.Fprintf(w, ", %d producer(s) and %d consumer(s) per topic, %d-byte messages, target ",
		rep.Producers, rep.Consumers, rep.MessageSize)
	if rep.TargetRate > 0 {
		fmt.Fprintf(w, "%.0f msg/s", rep.TargetRate)
	} else {
		fmt.Fprint(w, "unthrottled")
	}
	if rep.Variant != "" {
		fmt.Fprintf(w, " [%s]", rep.Variant)
	}
	fmt.Fprintf(w, "\nwindow %.2fs", rep.Seconds)
	if rep.CPUCores > 0 {
		fmt.Fprintf(w, ", client CPU %.2f cores", rep.CPUCores)
	}
	fmt.Fprintln(w)
	if rep.Producers > 0 {
		fmt.Fprintf(w, "published %10d msgs %10.0f msg/s %8.2f MiB/s  errors %d\n",
			rep.Published, rep.PublishPS, rep.PublishMiB, rep.PublishErr)
		formatLatency(w, "publish latency", rep.PublishLatency)
		if t := rep.Txn; t != nil {
			fmt.Fprintf(w, "  %d transactions, mean ms: new %.3f  first send %.3f  other sends %.3f  commit %.3f (in the background)\n",
				t.Transactions, t.NewUs/1e3, t.FirstSendUs/1e3, t.RestUs/1e3, t.CommitUs/1e3)
		}
	}
	if rep.Consumers > 0 {
		fmt.Fprintf(w, "consumed  %10d msgs %10.0f msg/s %8.2f MiB/s\n", rep.Consumed, rep.ConsumePS, rep.ConsumeMiB)
		formatLatency(w, "end-to-end latency", rep.E2ELatency)
	}
}

func formatLatency(w io.Writer, what string, l *perfkit.Latency) {
	if l == nil {
		fmt.Fprintf(w, "  %s: none measured\n", what)
		return
	}
	fmt.Fprintf(w, "  %s ms: p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  p99.99 %.3f  max %.3f\n", what,
		msf(l.P50), msf(l.P95), msf(l.P99), msf(l.P999), msf(l.P9999), msf(l.Max))
}

func msf(us int64) float64 {
	return float64(us) / 1000
}
