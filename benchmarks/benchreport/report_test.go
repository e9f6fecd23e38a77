package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/internal/perfkit"
	"github.com/magnetar-io/magnetar/tools/perfclient"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

func sampleRun(label string, size int, rate, ps float64, p99us int64) Run {
	l := &perfkit.Latency{P50: p99us / 4, P95: p99us / 2, P99: p99us, P999: p99us * 2, P9999: p99us * 3, Max: p99us * 4}
	var curve []perfclient.CurvePoint
	for i, p := range perfclient.CurvePercentiles() {
		curve = append(curve, perfclient.CurvePoint{Percentile: p, Micros: int64(100 * (i + 1))})
	}
	return Run{Label: label, ServerCores: 1.8, Report: perfclient.Report{MessageSize: size, TargetRate: rate,
		PublishPS: ps, PublishMiB: ps * float64(size) / (1 << 20), Published: 1000, Consumed: 1000,
		PublishLatency: l, E2ELatency: l, PublishCurve: curve, E2ECurve: curve,
		Timeline: []perfclient.Interval{{At: 5, PublishPS: ps}, {At: 10, PublishPS: ps}}}}
}

func sampleResults() *Results {
	res := &Results{Started: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), Machine: Machine{CPUs: 2},
		Disk: Disk{GroupBytes: journalGroupBytes, SyncMiBPerSec: 400, ColdReadMiBSec: 600}}
	half := sampleRun("half", 1024, 50000, 50000, 3000)
	half.Percent = 50
	res.Standalone = Deployment{Ran: true, CacheMiB: 384, PeakRSSMiB: 900,
		Max: []Run{sampleRun("max", 1024, 0, 100000, 50000)}, Fixed: []Run{half}}
	memHalf := sampleRun("mem", 1024, 50000, 50000, 1000)
	memHalf.Percent = 50
	res.Memory = Deployment{Ran: true, Max: []Run{sampleRun("mem max", 1024, 0, 200000, 9000)}, Fixed: []Run{memHalf}}
	nats := sampleRun("nats", 1024, 0, 80000, 20000)
	res.NATS = NATS{Default: &nats}
	return res
}

// TestTargets: each target's ratio and verdict follow from the numbers.
func TestTargets(t *testing.T) {
	rows := targetRows(sampleResults())
	want := map[string]struct {
		ratio string
		met   bool
	}{
		"NATS":        {"1.25", false}, // 100000 / 80000 < 1.5
		"bandwidth":   {"0.24", false}, // 97.7 MiB/s / 400
		"publish p99": {"0.60", true},  // 3 ms / 5 ms
		"end-to-end":  {"0.30", true},  // 3 ms / 10 ms
		"standalone":  {"1.32", false}, // 900 / (384 + 300)
	}
	found := 0
	for _, r := range rows {
		for key, w := range want {
			if strings.Contains(r.name, key) {
				found++
				if r.ratio != w.ratio || r.met != w.met || !r.ran {
					t.Errorf("%s: ratio %s met %v ran %v, want %s %v", r.name, r.ratio, r.met, r.ran, w.ratio, w.met)
				}
			}
		}
	}
	if found != len(want) {
		t.Fatalf("matched %d of %d targets in %+v", found, len(want), rows)
	}
}

// TestReportAndCharts: the report names every system that ran, explains
// each miss and links charts that were written.
func TestReportAndCharts(t *testing.T) {
	dir := t.TempDir()
	res := sampleResults()
	charts, err := writeCharts(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) < 3 {
		t.Fatalf("charts: %+v", charts)
	}
	for _, c := range charts {
		if b, err := os.ReadFile(filepath.Join(dir, c.File)); err != nil || !strings.HasPrefix(string(b), "<svg") && !strings.HasPrefix(string(b), "<?xml") {
			t.Fatalf("chart %s: %v %.40q", c.File, err, b)
		}
	}
	var md strings.Builder
	writeReport(&md, res, charts)
	out := md.String()
	for _, want := range []string{"Magnetar standalone", "in-memory storage", "NATS JetStream, default sync",
		"**missed**", "**met**", "publish.svg", "durable 1 KiB publish ≥ 1.5 × NATS JetStream default (not fsynced) async publish missed:*"} {
		if want == "publish.svg" {
			want = charts[0].File
		}
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestDiskOf picks the best backend at the group size and the lowest
// datasync latency.
func TestDiskOf(t *testing.T) {
	rep := perfdisk.Report{Results: []perfdisk.Result{
		{Backend: "std", Test: "write+datasync", BlockSize: journalGroupBytes, MiBPerSec: 300},
		{Backend: "uring", Test: "write+datasync", BlockSize: journalGroupBytes, MiBPerSec: 350},
		{Backend: "uring", Test: "write+datasync", BlockSize: 4096, MiBPerSec: 900},
		{Backend: "std", Test: "datasync", LatencyUS: &perfdisk.Latency{P50: 400, P99: 900}},
		{Backend: "uring", Test: "datasync", LatencyUS: &perfdisk.Latency{P50: 300, P99: 800}},
		{Backend: "std", Test: "seqread", MiBPerSec: 610},
	}}
	d := diskOf(rep)
	if d.SyncMiBPerSec != 350 || d.SyncBackend != "uring" || d.SyncP50Micros != 300 || d.SyncP99Micros != 800 || d.ColdReadMiBSec != 610 {
		t.Fatalf("%+v", d)
	}
}

func TestParseOptionsRejectsBadValues(t *testing.T) {
	for _, args := range [][]string{{"--topics", "10,x"}, {"--duration", "0s"}, {"--magnetar", "/nonexistent/magnetar"}, {"extra"}} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
