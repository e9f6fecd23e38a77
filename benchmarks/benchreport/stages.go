package main

// The publish path by stage: magnetar_publish_stage_seconds (internal/stage)
// scraped from every server of a deployment before and after a run; the
// difference of the histograms gives each stage's latency in that run.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/magnetar-io/magnetar/internal/stage"
)

// StageLatency is one stage's latency over a run.
type StageLatency struct {
	Stage  string  `json:"stage"`
	Count  float64 `json:"count"`
	MeanMS float64 `json:"meanMs"`
	P50MS  float64 `json:"p50Ms"`
	P99MS  float64 `json:"p99Ms"`
	P999MS float64 `json:"p999Ms"`
}

// stageHist is one stage's cumulative buckets (upper bound -> count), sum
// and count, summed over the servers scraped.
type stageHist struct {
	buckets map[float64]float64
	sum     float64
	count   float64
}

var stageLine = regexp.MustCompile(`^magnetar_publish_stage_seconds_(bucket|sum|count)\{stage="(\w+)"(?:,le="([^"]+)")?\} (\S+)$`)

// scrapeStages reads the stage histograms from the servers' /metrics.
func scrapeStages(ctx context.Context, urls []string) (map[string]*stageHist, error) {
	out := map[string]*stageHist{}
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			cancel()
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("scrape %s: %w", u, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m := stageLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			v, err := strconv.ParseFloat(m[4], 64)
			if err != nil {
				continue
			}
			h := out[m[2]]
			if h == nil {
				h = &stageHist{buckets: map[float64]float64{}}
				out[m[2]] = h
			}
			switch m[1] {
			case "bucket":
				le := math.Inf(1)
				if m[3] != "+Inf" {
					le, _ = strconv.ParseFloat(m[3], 64)
				}
				h.buckets[le] += v
			case "sum":
				h.sum += v
			case "count":
				h.count += v
			}
		}
		resp.Body.Close()
		cancel()
	}
	return out, nil
}

// stageDelta is each stage's latency between two scrapes, in path order;
// stages nothing passed through are left out.
func stageDelta(before, after map[string]*stageHist) []StageLatency {
	var out []StageLatency
	for _, name := range stage.Names() {
		a := after[name]
		if a == nil {
			continue
		}
		b := before[name]
		if b == nil {
			b = &stageHist{buckets: map[float64]float64{}}
		}
		n := a.count - b.count
		if n <= 0 {
			continue
		}
		var les []float64
		for le := range a.buckets {
			les = append(les, le)
		}
		sort.Float64s(les)
		cum := make([]float64, len(les))
		for i, le := range les {
			cum[i] = a.buckets[le] - b.buckets[le]
		}
		q := func(p float64) float64 { return bucketQuantile(les, cum, p) * 1e3 }
		out = append(out, StageLatency{Stage: name, Count: n, MeanMS: (a.sum - b.sum) / n * 1e3,
			P50MS: q(0.5), P99MS: q(0.99), P999MS: q(0.999)})
	}
	return out
}

// bucketQuantile interpolates quantile p within the cumulative buckets (as
// Prometheus's histogram_quantile does); past the last finite bound it
// answers that bound.
func bucketQuantile(les, cum []float64, p float64) float64 {
	if len(cum) == 0 || cum[len(cum)-1] == 0 {
		return 0
	}
	want := p * cum[len(cum)-1]
	lo, below := 0.0, 0.0
	for i, le := range les {
		if cum[i] >= want {
			if math.IsInf(le, 1) {
				return lo
			}
			if cum[i] == below {
				return le
			}
			return lo + (le-lo)*(want-below)/(cum[i]-below)
		}
		lo, below = le, cum[i]
	}
	return lo
}

// writeStages shows each deployment's 50% run stage by stage.
func writeStages(w io.Writer, res *Results) {
	deps := []struct {
		name string
		d    *Deployment
	}{{"Magnetar standalone", &res.Standalone}, {"Magnetar cluster", &res.Cluster}, {"in-memory storage", &res.Memory}}
	wrote := false
	for _, dep := range deps {
		run := dep.d.fixedAt(50)
		if run == nil || len(run.Stages) == 0 {
			continue
		}
		if !wrote {
			fmt.Fprintf(w, "## Where a publish waits, stage by stage (1 KiB at 50%% of the maximum)\n\n"+
				"From `magnetar_publish_stage_seconds` (docs/profiling.md), the servers' histograms before and after the "+
				"run (so including its warm-up); percentiles interpolated within doubling buckets. `receipt` is the "+
				"broker's whole part of a publish; the client's publish latency adds its batching, the network and "+
				"its own scheduling.\n\n")
			wrote = true
		}
		fmt.Fprintf(w, "%s:\n\n| stage | adds | mean | p50 | p99 | p99.9 |\n|---|---|---|---|---|---|\n", dep.name)
		for _, s := range run.Stages {
			fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s |\n", s.Stage, s.Count, msf(s.MeanMS), msf(s.P50MS), msf(s.P99MS), msf(s.P999MS))
		}
		fmt.Fprintln(w)
	}
}

// writeCPUPerMessage shows server CPU per message at the 1 KiB maximum.
func writeCPUPerMessage(w io.Writer, res *Results) {
	type row struct {
		name string
		run  *Run
	}
	var rows []row
	for _, r := range []row{{"standalone, durable", res.Standalone.maxOf(1024)},
		{"cluster E3/Qw2/Qa2 (broker + 3 bookies)", res.Cluster.maxOf(1024)},
		{"standalone, in-memory storage", res.Memory.maxOf(1024)}} {
		if r.run != nil && r.run.Report.PublishPS > 0 && r.run.ServerCores > 0 {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Server CPU per message (1 KiB, unthrottled)\n\n| deployment | msg/s | server cores | CPU µs per message |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %.1f |\n", r.name, r.run.Report.PublishPS, r.run.ServerCores, r.run.ServerCores*1e6/r.run.Report.PublishPS)
	}
	fmt.Fprintln(w)
}

func msf(ms float64) string {
	if ms < 1 {
		return fmt.Sprintf("%.0f µs", ms*1e3)
	}
	return fmt.Sprintf("%.2f ms", ms)
}

// writeTraced lists the flight-recorder traces of slow publishes.
func writeTraced(w io.Writer, res *Results) {
	tr := res.Traced
	if tr == nil {
		return
	}
	rep := tr.Run.Report
	var p99, p999 int64
	if l := rep.PublishLatency; l != nil {
		p99, p999 = l.P99, l.P999
	}
	fmt.Fprintf(w, "## Traces of slow publishes\n\nThe durable standalone's 50%% point again (%.0f msg/s), on a fresh standalone with "+
		"`flightRecorderDir` set: publish p99 %s, p99.9 %s. Each publish whose receipt took over 20 ms wrote the last "+
		"seconds of Go execution trace (at most one a minute): %d trace(s).", rep.TargetRate, us(p99), us(p999), len(tr.Traces))
	if len(tr.Traces) > 0 {
		fmt.Fprintf(w, " Read one with `go tool trace FILE`, or `go tool trace -pprof=syscall FILE > s.pprof; go tool pprof -top s.pprof` "+
			"for where goroutines were blocked (docs/profiling.md):\n\n")
		for _, f := range tr.Traces {
			fmt.Fprintf(w, "- [%s](%s)\n", f, f)
		}
	}
	if len(tr.Waits) > 0 {
		fmt.Fprintf(w, "\nWhich goroutines waited to run in them, and how long once runnable (`magnetar trace waits`, the "+
			"kinds with the most waiting; docs/profiling.md):\n\n| trace | started in | n | p50 | p99 | max |\n|---|---|---|---|---|---|\n")
		for _, x := range tr.Waits {
			fmt.Fprintf(w, "| %s | `%s` | %d | %.3f ms | %.3f ms | %.3f ms |\n", filepath.Base(x.Trace), x.Kind, x.N, x.P50Ms, x.P99Ms, x.MaxMs)
		}
	}
	fmt.Fprintf(w, "\n\n")
}
