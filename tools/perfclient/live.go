package perfclient

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// snapshot is the run's counts at one moment.
type snapshot struct {
	at                        time.Time
	pubOps, pubBytes, pubErrs int64
	conOps, conBytes          int64
}

func (r *runner) snapshot(now time.Time) snapshot {
	return snapshot{at: now, pubOps: r.n.pubOps.Load(), pubBytes: r.n.pubBytes.Load(), pubErrs: r.n.pubErrsAll.Load(),
		conOps: r.n.conOps.Load(), conBytes: r.n.conBytes.Load()}
}

// live writes a progress line to w every cfg.Progress until the returned
// stop is called, which returns one Interval per line written.
func (r *runner) live(w io.Writer) (stop func() []Interval) {
	if r.cfg.Progress <= 0 {
		return func() []Interval { return nil }
	}
	done, finished := make(chan struct{}), make(chan struct{})
	var timeline []Interval
	go func() {
		defer close(finished)
		timeline = r.liveLoop(w, done)
	}()
	return func() []Interval {
		close(done)
		<-finished
		return timeline
	}
}

func (r *runner) liveLoop(w io.Writer, done <-chan struct{}) []Interval {
	tick := time.NewTicker(r.cfg.Progress)
	defer tick.Stop()
	var timeline []Interval
	prev := r.snapshot(r.start)
	for {
		select {
		case <-done:
			return timeline
		case now := <-tick.C:
			cur := r.snapshot(now)
			iv, line := r.interval(prev, cur)
			fmt.Fprintln(w, line)
			timeline = append(timeline, iv)
			prev = cur
		}
	}
}

// interval is what happened between two snapshots, as a timeline point
// and a progress line; it starts the latencies' next interval.
func (r *runner) interval(prev, cur snapshot) (Interval, string) {
	s := cur.at.Sub(prev.at).Seconds()
	iv := Interval{At: cur.at.Sub(r.start).Seconds(), PublishPS: float64(cur.pubOps-prev.pubOps) / s,
		ConsumePS: float64(cur.conOps-prev.conOps) / s}
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s %6.1fs %-9s", r.cfg.Mode, iv.At, r.state(cur.at))
	if r.cfg.producing() {
		pub := r.pub.takeInterval()
		fmt.Fprintf(&b, " | pub %9.0f msg/s %8.2f MiB/s  lat ms p50 %s p99 %s max %s", iv.PublishPS,
			mib(cur.pubBytes-prev.pubBytes, s), ms(quantile(pub, 50)), ms(quantile(pub, 99)), ms(quantile(pub, 100)))
		if errs := cur.pubErrs - prev.pubErrs; errs > 0 {
			fmt.Fprintf(&b, "  errors %d", errs)
		}
	}
	if r.cfg.consuming() {
		e2e := r.e2e.takeInterval()
		fmt.Fprintf(&b, " | con %9.0f msg/s %8.2f MiB/s  e2e ms p99 %s", iv.ConsumePS,
			mib(cur.conBytes-prev.conBytes, s), ms(quantile(e2e, 99)))
	}
	return iv, b.String()
}

func (r *runner) state(now time.Time) string {
	switch {
	case now.Before(r.windowStart):
		return "warm-up"
	case r.draining.Load():
		return "draining" // producers stopped; waiting for acknowledgements or consumers
	}
	return "measuring"
}

// quantile is h's value at q, or -1 when h is empty (printed as "-").
func quantile(h *hdrhistogram.Histogram, q float64) int64 {
	if h.TotalCount() == 0 {
		return -1
	}
	return h.ValueAtQuantile(q)
}

// ms formats microseconds as milliseconds; negative means none.
func ms(us int64) string {
	if us < 0 {
		return fmt.Sprintf("%7s", "-")
	}
	return fmt.Sprintf("%7.3f", float64(us)/1000)
}

func mib(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / seconds / (1 << 20)
}
