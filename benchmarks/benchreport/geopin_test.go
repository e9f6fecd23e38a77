package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPinCommand: a pin puts taskset -c in front of the command without
// touching the caller's arguments; the zero pin changes nothing.
func TestPinCommand(t *testing.T) {
	args := []string{"standalone", "--cluster", "bench-a"}
	bin, got := pin{}.command("/bin/magnetar", args)
	if bin != "/bin/magnetar" || !slices.Equal(got, args) {
		t.Fatalf("zero pin: %s %v", bin, got)
	}
	bin, got = pin{taskset: "/usr/bin/taskset", cpus: "1"}.command("/bin/magnetar", args)
	want := []string{"-c", "1", "/bin/magnetar", "standalone", "--cluster", "bench-a"}
	if bin != "/usr/bin/taskset" || !slices.Equal(got, want) {
		t.Fatalf("pinned: %s %v, want /usr/bin/taskset %v", bin, got, want)
	}
	if !slices.Equal(args, []string{"standalone", "--cluster", "bench-a"}) {
		t.Fatalf("caller's args changed: %v", args)
	}
}

// TestTwoCores: A and B get the first two allowed CPUs; one CPU is an
// error.
func TestTwoCores(t *testing.T) {
	for _, c := range []struct {
		allowed []int
		a, b    int
	}{{[]int{0, 1}, 0, 1}, {[]int{2, 5, 7}, 2, 5}} {
		a, b, err := twoCores(c.allowed)
		if err != nil || a != c.a || b != c.b {
			t.Errorf("%v: %d %d %v, want %d %d", c.allowed, a, b, err, c.a, c.b)
		}
	}
	if _, _, err := twoCores([]int{3}); err == nil {
		t.Error("one CPU accepted")
	}
}

// TestAllowedCPUs: this process may run somewhere.
func TestAllowedCPUs(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil || len(cpus) == 0 || !slices.IsSorted(cpus) {
		t.Fatalf("%v %v", cpus, err)
	}
}

// TestBacklogGrowth: the slope of the samples inside the window only.
func TestBacklogGrowth(t *testing.T) {
	var s []BacklogSample
	for i := range 30 {
		at := float64(i)
		n := int64(5000) // warm-up: flat
		if at >= 5 {
			n = 5000 + int64(100*(at-5))
		}
		s = append(s, BacklogSample{At: at, Messages: n})
	}
	if g := backlogGrowth(s, 5, 25); g < 99.99 || g > 100.01 {
		t.Errorf("growth %f, want 100", g)
	}
	if g := backlogGrowth(s, 0, 4); g != 0 {
		t.Errorf("flat warm-up: growth %f", g)
	}
	if g := backlogGrowth(s[:1], 0, 30); g != 0 {
		t.Errorf("one sample: growth %f", g)
	}
}

// TestDecodeBacklog reads the remote's replicator from topic stats.
func TestDecodeBacklog(t *testing.T) {
	js := `{"msgRateIn":5,"replication":{"bench-b":{"connected":true,"replicationBacklog":1234,"replicationDelayInSeconds":2}}}`
	s, err := decodeBacklog(strings.NewReader(js), "bench-b")
	if err != nil || s.Messages != 1234 || s.DelaySeconds != 2 {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := decodeBacklog(strings.NewReader(js), "bench-c"); err == nil {
		t.Error("a missing replicator accepted")
	}
	if _, err := decodeBacklog(strings.NewReader("{"), "bench-b"); err == nil {
		t.Error("bad JSON accepted")
	}
}

// TestSampleBacklog samples a stats endpoint until stopped, skipping
// failed reads (the topic does not exist before the producer connects).
func TestSampleBacklog(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := calls.Add(1)
		if n == 1 {
			http.Error(w, "no topic", http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"replication":{"bench-b":{"replicationBacklog":%d}}}`, n*10)
	}))
	defer srv.Close()
	var out []BacklogSample
	stop := sampleBacklog(context.Background(), srv.URL, "bench-b", 5*time.Millisecond, &out)
	for calls.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	stop()
	if len(out) < 2 || out[0].Messages != 20 || out[1].Messages != 30 || out[1].At <= out[0].At {
		t.Fatalf("samples %+v", out)
	}
}

func geoSamplePass(published, received, growth float64, rate float64) GeoPass {
	prod, cons := sampleRun("a", 1024, rate, published, 5000), sampleRun("b", 1024, 0, 0, 8000)
	cons.Report.ConsumePS = received
	return GeoPass{Producer: &prod, Consumer: &cons, BacklogGrowthPS: growth,
		Backlog: []BacklogSample{{At: 1, Messages: 100}, {At: 2, Messages: 120}}}
}

// TestGeoKeepsUp: B keeps up when it receives what A publishes and the
// backlog does not grow; each failure is named.
func TestGeoKeepsUp(t *testing.T) {
	for _, c := range []struct {
		name      string
		p         GeoPass
		ok        bool
		whyNeedle string
	}{
		{"keeps up", geoSamplePass(40000, 39900, 50, 40000), true, ""},
		{"slow receive", geoSamplePass(40000, 30000, 50, 40000), false, "received 0.75"},
		{"growing backlog", geoSamplePass(40000, 39500, 2000, 40000), false, "backlog grew 2000"},
		{"both", geoSamplePass(40000, 20000, 20000, 40000), false, "; the backlog"},
		{"not measured", GeoPass{}, false, "not measured"},
		// The last report's pass: A's producer, held to 1,000 messages in
		// flight, published 62,947 of 87,520 msg/s; B got all of it, which
		// says nothing about the target rate.
		{"target rate not reached", geoSamplePass(62947, 62986, 0, 87520), false, "A published 0.72 × the target rate"},
	} {
		ok, why := geoKeepsUp(c.p)
		if ok != c.ok || !strings.Contains(why, c.whyNeedle) {
			t.Errorf("%s: %v %q", c.name, ok, why)
		}
	}
}

func samplePinned() *GeoPinned {
	base := sampleRun("base", 1024, 0, 50000, 4000)
	return &GeoPinned{Setup: "pinned setup", CoreA: "0", CoreB: "1", Baseline: &base,
		Max:      geoSamplePass(42000, 36000, 6000, 0),
		AtTarget: geoSamplePass(40000, 39950, 10, 40000)}
}

// TestGeoPinnedTargets: replication throughput against the one-core
// baseline, and the keep-up verdict at 0.8 x it.
func TestGeoPinnedTargets(t *testing.T) {
	rows := geoPinnedTargetRows(samplePinned())
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	if r := rows[0]; r.ratio != "0.72" || r.met || !r.ran || !strings.Contains(r.measured, "36000 vs 50000") {
		t.Errorf("throughput row %+v", r) // 36000 received / 50000 baseline
	}
	if r := rows[1]; r.ratio != "1.00" || !r.met || !strings.Contains(r.measured, "39950 of 40000") {
		t.Errorf("keep-up row %+v", r)
	}
	failed := geoPinnedTargetRows(&GeoPinned{Skipped: "taskset missing"})
	if len(failed) != 2 || failed[0].ran || failed[1].ran {
		t.Errorf("unmeasured rows %+v", failed)
	}
	if geoPinnedTargetRows(nil) != nil {
		t.Error("rows with pinning off")
	}
	res := sectionResults()
	res.Geo.Pinned = samplePinned()
	if rows := sectionTargetRows(res); len(rows) != 8 || !strings.Contains(rows[5].name, "keeps up") {
		t.Errorf("section rows %+v", rows)
	}
}

// TestGeoPinnedReport: the pinned table follows the unpinned rows, with
// the sentence on what pinning emulates; a failure says why.
func TestGeoPinnedReport(t *testing.T) {
	res := sectionResults()
	res.Geo.Pinned = samplePinned()
	var b strings.Builder
	writeGeo(&b, res)
	out := b.String()
	for _, want := range []string{
		"| 10000 | 10000 msg/s | 5.00 ms | 9990 msg/s |", // the unpinned rows stay
		"### Each cluster on its own core", "pinned setup", "each cluster on its own one-core machine",
		"the unpinned rows above are the same-machine figure",
		"| baseline: A alone (core 0) | 50000 msg/s | 4.00 ms |",
		"| unthrottled | 42000 msg/s | 5.00 ms | 36000 msg/s | 0.86 | +6000 msg/s | 120 msg | 2.00 ms | 8.00 ms | 32.00 ms | no |",
		"| 40000 msg/s (0.8 × baseline) | 40000 msg/s |", "| 1.00 | +10 msg/s |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "did not keep up") {
		t.Errorf("a miss reported:\n%s", out)
	}
	res.Geo.Pinned = &GeoPinned{Skipped: "bench-b on core 1: exited"}
	b.Reset()
	writeGeo(&b, res)
	if !strings.Contains(b.String(), "### Each cluster on its own core\n\nNot measured: bench-b on core 1: exited") {
		t.Errorf("failure not shown:\n%s", b.String())
	}
}

// TestGeoPinnedFlag: --geo-pinned=false turns the pinned passes off.
func TestGeoPinnedFlag(t *testing.T) {
	o, err := parseOptions([]string{"--magnetar", "/bin/sh", "--geo-pinned=false"})
	if err != nil || o.geoPinned {
		t.Fatalf("%v %v", o.geoPinned, err)
	}
}
