package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfclient"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
	"github.com/magnetar-io/magnetar/tools/tracewait/tracewaittest"
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

// sectionResults adds the TLS, proxy, metadata and geo sections to the
// sample results.
func sectionResults() *Results {
	res := sampleResults()
	res.Sections = sectionNames
	res.TLS = TLSResult{Ran: true, Setup: "tls setup",
		Plain: []Run{sampleRun("p1", 1024, 0, 100000, 40000), sampleRun("p2", 1024, 0, 90000, 40000)},
		TLS:   []Run{sampleRun("t1", 1024, 0, 80000, 40000), sampleRun("t2", 1024, 0, 70000, 40000)}}
	res.Txn = TxnResult{Ran: true, Setup: "txn setup",
		Plain:       []Run{sampleRun("p1", 1024, 0, 100000, 40000), sampleRun("p2", 1024, 0, 100000, 40000)},
		Txn100:      []Run{sampleRun("x1", 1024, 0, 60000, 40000), sampleRun("x2", 1024, 0, 80000, 40000)},
		Txn100Ahead: []Run{sampleRun("a1", 1024, 0, 85000, 40000), sampleRun("a2", 1024, 0, 95000, 40000)}, OpenAhead: 4}
	directFixed, proxyFixed := sampleRun("df", 1024, 50000, 50000, 3000), sampleRun("pf", 1024, 50000, 50000, 3500)
	res.Proxy = ProxyResult{Ran: true, Setup: "proxy setup",
		DirectMax:   []Run{sampleRun("d1", 1024, 0, 100000, 40000), sampleRun("d2", 1024, 0, 100000, 40000)},
		ProxyMax:    []Run{sampleRun("x1", 1024, 0, 95000, 40000), sampleRun("x2", 1024, 0, 93000, 40000)},
		DirectFixed: &directFixed, ProxyFixed: &proxyFixed, ProxyCPUSeconds: 6, ProxyBytes: 2 << 30}
	ops := []MetaOp{{Op: "create", Count: 1000, PerSec: 5000, Latency: perfkit.Latency{P50: 900, P99: 4000}},
		{Op: "cas-put", Count: 1000, PerSec: 6000}, {Op: "get", Count: 1000, PerSec: 40000}, {Op: "children", Count: 1000, PerSec: 20000}}
	res.Metadata = MetadataResult{Ran: true, Concurrency: 16, ValueBytes: 128, Backends: []MetaBackend{
		{Name: "local", Ops: ops, Topics: 1000, CreateSeconds: 2, ReloadSeconds: 1},
		{Name: "zookeeper", Ops: ops, Topics: 1000, TopicsSkipped: "broker failed\nto start"},
		{Name: "etcd", Skipped: "etcd did not start"}}}
	prod, cons := sampleRun("geo a", 1024, 10000, 10000, 5000), sampleRun("geo b", 1024, 0, 0, 8000)
	cons.Report.ConsumePS, cons.Report.ConsumeMiB = 9990, 9.76
	maxProd, maxCons := sampleRun("geo a max", 1024, 0, 50000, 5000), sampleRun("geo b max", 1024, 0, 0, 8000)
	maxCons.Report.ConsumePS = 30000
	res.Geo = GeoResult{Ran: true, Setup: "geo setup", Producer: &prod, Consumer: &cons, MaxProducer: &maxProd, MaxConsumer: &maxCons}
	return res
}

// TestSectionTargets: the TLS and proxy targets follow from the medians
// and the fixed-rate p99s.
func TestSectionTargets(t *testing.T) {
	rows := sectionTargetRows(sectionResults())
	want := []struct {
		key, ratio string
		met        bool
	}{
		{"TLS", "0.79", false},                                     // median 75000 / 95000
		{"through one proxy", "0.94", true},                        // 94000 / 100000
		{"added by the proxy", "0.50", true},                       // 3.5 ms - 3 ms over 1 ms
		{"replication throughput", "0.30", false},                  // 30000 received in B / the standalone's 100000 (sampleResults)
		{"100-message transactions, one at a time", "0.70", true},  // median 70000 / 100000
		{"100-message transactions, 4 opened ahead", "0.90", true}, // median 90000 / 100000
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	for i, w := range want {
		r := rows[i]
		if !strings.Contains(r.name, w.key) || r.ratio != w.ratio || r.met != w.met || !r.ran {
			t.Errorf("row %d %q: ratio %s met %v ran %v, want %s %s %v", i, r.name, r.ratio, r.met, r.ran, w.key, w.ratio, w.met)
		}
	}
	// Selected but not measured: the rows say so.
	res := sampleResults()
	res.Sections = []string{"tls", "proxy"}
	rows = sectionTargetRows(res)
	if len(rows) != 3 || rows[0].ran || rows[1].ran || rows[2].ran {
		t.Fatalf("unmeasured rows: %+v", rows)
	}
	// A run that failed: its row and the section say why.
	failed := sectionResults()
	failed.Proxy.ProxyFixed, failed.Proxy.Skipped = nil, "proxy e2e at 50%: exit status 1 (log: 92-proxy.log)"
	var md strings.Builder
	writeReport(&md, failed, nil)
	for _, want := range []string{
		"- *publish p99 added by the proxy at 50% of the direct maximum ≤ 1 ms not measured:* proxy e2e at 50%: exit status 1 (log: 92-proxy.log)",
		"Not measured through the proxy: proxy e2e at 50%: exit status 1 (log: 92-proxy.log)",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Not selected: no rows.
	res.Sections = []string{"metadata"}
	if rows := sectionTargetRows(res); len(rows) != 0 {
		t.Fatalf("rows for unselected sections: %+v", rows)
	}
}

// TestSectionsReport: each section prints its tables and numbers; a
// report of only these sections leaves out the standalone's tables.
func TestSectionsReport(t *testing.T) {
	var md strings.Builder
	writeReport(&md, sectionResults(), nil)
	out := md.String()
	for _, want := range []string{
		"## TLS: 1 KiB publish over pulsar+ssl:// vs pulsar://", "| TLS | 2 | 70000 |", "TLS at **0.79 ×** plaintext",
		"## Proxy: 1 KiB through one magnetar proxy", "| proxy | 1 | 95000 |", "**0.94 ×** direct", "| proxy | 50000 | 50000 | 875 µs | 3.50 ms |",
		"**3.0 CPU seconds per GiB**",
		"## Metadata backends", "| local | create | 1000 | 5000 | 900 µs | 4.00 ms |", "| zookeeper | children |",
		"| etcd | - | - | - | - | - | - | - | not measured: etcd did not start |",
		"| local | 1000 | 2.00 s | 500 | 1.00 s | 1000 |", "| zookeeper | 1000 | not measured: broker failed to start |",
		"## Geo-replication", "| 10000 | 10000 msg/s | 5.00 ms | 9990 msg/s | 9.8 | 2.00 ms | 8.00 ms |",
		"TLS 1 KiB publish ≥ 0.8 × plaintext (medians, same standalone) missed:*",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	only := sectionResults()
	only.Sections = []string{"tls", "proxy", "metadata", "geo"}
	only.Standalone, only.Memory, only.NATS, only.Disk = Deployment{}, Deployment{}, NATS{}, Disk{}
	md.Reset()
	writeReport(&md, only, nil)
	out = md.String()
	for _, absent := range []string{"Maximum durable publish", "Latency at fixed rates", "## Memory", "write + datasync", "NATS JetStream default"} {
		if strings.Contains(out, absent) {
			t.Errorf("report of the issue sections has %q", absent)
		}
	}
	if !strings.Contains(out, "Sections run (--only): tls, proxy, metadata, geo.") {
		t.Errorf("report does not say which sections ran")
	}
}

func TestMetricValue(t *testing.T) {
	text := "# HELP pulsar_proxy_binary_bytes bytes\n# TYPE pulsar_proxy_binary_bytes counter\n" +
		"pulsar_proxy_binary_bytes 1.5e+06\npulsar_proxy_binary_bytes_in 7\n" +
		"pulsar_proxy_binary_bytes_total{dir=\"a b\"} 2 1700000000\n"
	v, err := metricValue(strings.NewReader(text), "pulsar_proxy_binary_bytes")
	if err != nil || v != 1.5e6+2 {
		t.Fatalf("%v %v", v, err)
	}
	if _, err := metricValue(strings.NewReader(text), "pulsar_proxy_missing"); err == nil {
		t.Fatal("a missing metric read as 0")
	}
}

func TestMedianPS(t *testing.T) {
	runs := func(ps ...float64) []Run {
		var out []Run
		for _, p := range ps {
			out = append(out, Run{Report: perfclient.Report{PublishPS: p}})
		}
		return out
	}
	for _, c := range []struct {
		runs []Run
		want float64
	}{{nil, 0}, {runs(5), 5}, {runs(9, 1), 5}, {runs(9, 1, 4), 4}} {
		if got := medianPS(c.runs); got != c.want {
			t.Errorf("%v: %v, want %v", c.runs, got, c.want)
		}
	}
}

// TestMetaOps runs the metadata load on the in-memory store.
func TestMetaOps(t *testing.T) {
	ops, err := metaOps(t.Context(), "memory:", 300)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != len(metaOpKinds) {
		t.Fatalf("%+v", ops)
	}
	for i, o := range ops {
		if o.Op != metaOpKinds[i] || o.Count != 300 || o.Errors != 0 || o.PerSec <= 0 || o.Latency.Max <= 0 {
			t.Errorf("%+v", o)
		}
	}
}

func TestParseSections(t *testing.T) {
	only, err := parseSections("tls, geo")
	if err != nil || len(only) != 2 || !only["tls"] || !only["geo"] {
		t.Fatalf("%v %v", only, err)
	}
	if all, err := parseSections(""); err != nil || len(all) != len(sectionNames) {
		t.Fatalf("%v %v", all, err)
	}
	if _, err := parseSections("tls,bogus"); err == nil {
		t.Fatal("unknown section accepted")
	}
}

// The syncgeo section shows every pass and the p50 the round trip added
// (medians of the passes' p50s); a section that did not run says why.
func TestSyncGeoSection(t *testing.T) {
	res := &Results{SyncGeo: SyncGeoResult{Ran: true, Setup: "stretched", RTTMillis: 5,
		Local:  []Run{sampleRun("l1", 1024, 500, 500, 4000), sampleRun("l2", 1024, 500, 500, 8000)},
		Remote: []Run{sampleRun("r1", 1024, 500, 500, 24000), sampleRun("r2", 1024, 500, 500, 28000)}}}
	var b strings.Builder
	writeSyncGeo(&b, res)
	for _, want := range []string{"## Synchronous geo-replication: publish latency with a 5 ms inter-region round trip",
		"| none | 1 | 500 msg/s | 1.00 ms | 4.00 ms |", "| 5 ms | 2 | 500 msg/s | 7.00 ms | 28.00 ms |",
		"Median publish p50: 1.00 ms without, 6.00 ms with the round trip: **+5.00 ms**"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	b.Reset()
	writeSyncGeo(&b, &Results{SyncGeo: SyncGeoResult{Skipped: "zookeeper did not start"}})
	if !strings.Contains(b.String(), "Not measured: zookeeper did not start") {
		t.Errorf("skipped section: %q", b.String())
	}
}

// TestNATSDefaultBaseline: the target compares with the higher of
// natsperf's and natscli's default-sync figures and says which it is.
func TestNATSDefaultBaseline(t *testing.T) {
	perf := sampleRun("nats", 1024, 0, 80000, 20000)
	cli := func(ps float64) *NATSCLI { return &NATSCLI{Run: natscliResult(2_000_000, ps, 1.2)} }
	for _, c := range []struct {
		name string
		n    NATS
		ps   float64
		from string
	}{
		{"none", NATS{}, 0, ""},
		{"natsperf only", NATS{Default: &perf, CLI: &NATSCLI{Skipped: "not run"}}, 80000, "natsperf; nats bench did not run"},
		{"natscli only", NATS{CLI: cli(70000)}, 70000, "nats bench; natsperf did not run"},
		{"natscli higher", NATS{Default: &perf, CLI: cli(90000)}, 90000, "nats bench, the higher; natsperf 80000"},
		{"natsperf higher", NATS{Default: &perf, CLI: cli(70000)}, 80000, "natsperf, the higher; nats bench 70000"},
	} {
		got := natsDefaultBaseline(c.n)
		if got.ps != c.ps || got.from != c.from {
			t.Errorf("%s: %+v, want %v %q", c.name, got, c.ps, c.from)
		}
	}
}

// TestNATSCLIInReport: natscli's figure sits beside natsperf's in the
// maximum table and, being higher, decides the target; a natscli that did
// not run is noted.
func TestNATSCLIInReport(t *testing.T) {
	res := sampleResults()
	res.NATS.CLI = &NATSCLI{Version: "v0.5.0", Command: "nats bench js pub async x --size 1024",
		Summary: "NATS JetStream asynchronous publisher stats: 90,000 msgs/sec", Run: natscliResult(2_250_000, 90000, 1.1)}
	var md strings.Builder
	writeReport(&md, res, nil)
	out := md.String()
	for _, want := range []string{"| NATS JetStream, default sync, by `nats bench` (natscli) | 1 KiB | 90000 | 87.9 | - |",
		"natscli v0.5.0", "2250000 messages of 1 KiB", "in 25.0 s", "nats bench js pub async x --size 1024",
		"| 100000 vs 90000 msg/s (NATS: nats bench, the higher; natsperf 80000) | 1.11 | **missed** |"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	res.NATS.CLI = &NATSCLI{Skipped: "not run: stat bin/nats: no such file or directory (make nats builds bin/nats)"}
	md.Reset()
	writeReport(&md, res, nil)
	out = md.String()
	for _, want := range []string{"NATS `nats bench` (natscli): not run: stat bin/nats", "(NATS: natsperf; nats bench did not run) | 1.25 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestTailCatchUpAndTopicsTargets: the durable tail against in-memory plus
// two datasyncs, the catch-up read against the disk, and 10,000 topics'
// p99 each get a row whose verdict follows from the numbers.
func TestTailCatchUpAndTopicsTargets(t *testing.T) {
	res := sampleResults()
	res.Disk.SyncP99Micros = 500 // limit: 1 ms (in-memory p99) + 2 × 0.5 ms = 2 ms; durable p99 is 3 ms
	catchUp := sampleRun("catch-up", 1024, 0, 400000, 1000)
	catchUp.Report.ConsumeMiB = 240 // of a 600 MiB/s disk
	res.Standalone.CatchUp = &catchUp
	topics := sampleRun("10000 topics", 1024, 10000, 10000, 15000)
	topics.Report.Topics = 10000
	topics.Stages = []StageLatency{{Stage: "receipt", P99MS: 12}}
	small := sampleRun("1000 topics", 1024, 1000, 1000, 90000)
	small.Report.Topics = 1000 // no target at 1,000
	res.Standalone.Topics = []Run{small, topics}
	want := map[string]struct {
		ratio string
		met   bool
	}{
		"in-memory p99 + 2":   {"1.50", false},
		"cold catch-up":       {"0.40", false},
		"10000 topics, one p": {"0.75", true},
	}
	found := 0
	for _, r := range targetRows(res) {
		for key, w := range want {
			if strings.Contains(r.name, key) {
				found++
				if r.ratio != w.ratio || r.met != w.met || !r.ran {
					t.Errorf("%s: ratio %s met %v ran %v, want %s %v", r.name, r.ratio, r.met, r.ran, w.ratio, w.met)
				}
				if !w.met && r.why == "" {
					t.Errorf("%s: missed without a why", r.name)
				}
			}
		}
	}
	if found != len(want) {
		t.Fatalf("matched %d of %d targets", found, len(want))
	}
}

// A flight-recorder trace written during the traced run is summarized by
// trace waits in the report, next to its link.
func TestTracedWaitsInReport(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "publish-1-29ms.trace")
	tracewaittest.WriteTrace(t, file)
	waits := traceWaits(file, "profiles/flightrec/publish-1-29ms.trace", 3)
	if len(waits) == 0 || len(waits) > 3 {
		t.Fatalf("%d rows from a trace, want 1 to 3", len(waits))
	}
	if traceWaits(filepath.Join(dir, "none"), "x", 3) != nil {
		t.Fatal("rows from a missing trace")
	}
	res := sampleResults()
	res.Traced = &Traced{Traces: []string{"profiles/flightrec/publish-1-29ms.trace"}, Waits: waits}
	var md strings.Builder
	writeReport(&md, res, nil)
	want := fmt.Sprintf("| publish-1-29ms.trace | `%s` | %d |", waits[0].Kind, waits[0].N)
	if out := md.String(); !strings.Contains(out, want) || !strings.Contains(out, "magnetar trace waits") {
		t.Fatalf("report lacks the trace's waits %q:\n%s", want, out[strings.Index(out, "## Traces"):])
	}
}

func TestParseProcStatBusy(t *testing.T) {
	busy, err := parseProcStatBusy("cpu  100 20 30 4000 50 6 7 800 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	if err != nil || busy != (100+20+30+6+7)/100.0 {
		t.Fatalf("busy %v, %v; want user+nice+system+irq+softirq = 1.63 s", busy, err)
	}
	if _, err := parseProcStatBusy("intr 1 2 3\n"); err == nil {
		t.Fatal("no error for a /proc/stat without its cpu line")
	}
}

// A throughput miss on a machine busy as a whole says so, with the
// server's share and the rest.
func TestCPUWhyMachineBusy(t *testing.T) {
	why := cpuWhy(&Run{ServerCores: 0.6, MachineCores: 1.95}, 2)
	if !strings.Contains(why, "busy 1.95") || !strings.Contains(why, "the other 1.35") || !strings.Contains(why, "CPU-bound") {
		t.Fatalf("why: %s", why)
	}
	if why := cpuWhy(&Run{ServerCores: 0.6, MachineCores: 1.1}, 2); !strings.Contains(why, "not CPU alone (the machine was busy 1.10 cores)") {
		t.Fatalf("why: %s", why)
	}
}

// A throughput miss names the stages where the unthrottled window queued.
func TestThroughputWhyHasStages(t *testing.T) {
	res := sampleResults()
	run := &Run{ServerCores: 0.6, MachineCores: 1.4, Stages: []StageLatency{{Stage: "receipt", P50MS: 51.2},
		{Stage: "journal_queue", P50MS: 12.8}, {Stage: "journal_write", P50MS: 25.6}}}
	why := throughputWhy(res, run)
	if !strings.Contains(why, "by stage at p50: receipt 51.20 ms, journal_queue 12.80 ms, journal_write 25.60 ms") {
		t.Fatalf("why: %s", why)
	}
}

// The cluster's publish p99 at 50% of its own maximum is held to twice the
// standalone's at 50% of its maximum.
func TestClusterTailTarget(t *testing.T) {
	res := sampleResults() // standalone 50%: p99 3 ms
	half := sampleRun("cluster e2e 50%", 1024, 25000, 25000, 7000)
	half.Percent = 50
	res.Cluster = Deployment{Ran: true, Fixed: []Run{half}}
	found := false
	for _, r := range targetRows(res) {
		if !strings.HasPrefix(r.name, "cluster E3/Qw2/Qa2 publish p99") {
			continue
		}
		found = true
		if !r.ran || r.met || r.ratio != "1.17" || !strings.Contains(r.measured, "p99 7.00 ms vs 2 × 3.00 ms") ||
			!strings.Contains(r.why, "25000 msg/s against the standalone's 50000") {
			t.Fatalf("cluster tail row: %+v", r)
		}
	}
	if !found {
		t.Fatal("no cluster tail target")
	}
}

// A fixed-rate run that fell short of its rate measured a queue: the
// latency targets taken from it say so (the 50% row of 4 Dec ran at 72,909
// of the 143,484 msg/s asked, and its p99 stood for the 50% point).
func TestLatencyTargetsSayWhenTheRunFellShort(t *testing.T) {
	res := sampleResults()
	res.Disk.SyncP99Micros = 600                     // for the durable-tail target
	res.Standalone.Fixed[0].Report.PublishPS = 25000 // of 50000 asked
	var short []string
	for _, r := range targetRows(res) {
		if strings.Contains(r.why, "reached only 25000 of the 50000 msg/s asked") {
			short = append(short, r.name)
		}
	}
	if len(short) != 3 {
		t.Fatalf("targets that say the run fell short: %q, want the publish, end-to-end and durable-tail ones", short)
	}
	res = sampleResults()
	res.Disk.SyncP99Micros = 600
	for _, r := range targetRows(res) {
		if strings.Contains(r.why, "reached only") {
			t.Fatalf("%q says a run that kept its rate fell short: %s", r.name, r.why)
		}
	}
}

// TestCatchUpOfAWarmBroker: the second backlog's read gets a row of its
// own, judged on its own numbers, and the first row says what the two
// reads cost the broker per GiB.
func TestCatchUpOfAWarmBroker(t *testing.T) {
	res := sampleResults()
	first := sampleRun("catch-up", 1024, 0, 230000, 1000)
	first.Report.ConsumeMiB, first.Report.Seconds, first.ServerCores = 240, 4, 0.75 // 3.00 CPU s per GiB
	warm := sampleRun("catch-up, warm", 1024, 0, 330000, 1000)
	warm.Report.ConsumeMiB, warm.Report.Seconds, warm.ServerCores = 330, 3, 0.45 // 1.35 CPU s per GiB
	res.Standalone.CatchUp, res.Standalone.CatchUpWarm, res.Standalone.BacklogMiB = &first, &warm, 1024
	var rows []targetRow
	for _, r := range targetRows(res) {
		if strings.Contains(r.name, "catch-up") {
			rows = append(rows, r)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("%d catch-up rows, want 2: %+v", len(rows), rows)
	}
	if rows[0].ratio != "0.40" || rows[0].met || !strings.Contains(rows[0].why, "3.00 CPU s per GiB here and 1.35") {
		t.Errorf("first read's row: %+v", rows[0])
	}
	if !strings.Contains(rows[1].name, "read before") || rows[1].ratio != "0.55" || !rows[1].met {
		t.Errorf("warm read's row: %+v", rows[1])
	}
	var b strings.Builder
	writeCatchUp(&b, res)
	if out := b.String(); !strings.Contains(out, "second backlog") || !strings.Contains(out, "330.0 MiB/s") {
		t.Errorf("catch-up section: %s", out)
	}
	res.Standalone.CatchUpWarm = nil // a results.json of before: one row, as it was
	n := 0
	for _, r := range targetRows(res) {
		if strings.Contains(r.name, "catch-up") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d catch-up rows without the warm read, want 1", n)
	}
}
