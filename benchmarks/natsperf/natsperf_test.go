package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfclient"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// skipNATSIfShort skips t under go test -short: every test that runs a
// nats-server process calls it, and make test-short leaves them to make test.
func skipNATSIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a nats-server process (make nats): skipped under -short; make test runs it")
	}
}

// needServer is the nats-server on PATH. make test installs it
// (scripts/install-nats.sh); without it the tests fail and say why rather
// than skip, as the ZooKeeper tests do.
func needServer(t *testing.T) string {
	t.Helper()
	skipNATSIfShort(t)
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		t.Fatalf("nats-server is not installed (%v); scripts/install-nats.sh installs it (make test runs it)", err)
	}
	return bin
}

// runJSON runs natsperf with --json and a store under a test directory,
// and checks it left nothing there.
func runJSON(t *testing.T, args ...string) (perfclient.Report, string) {
	t.Helper()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args = append(args, "--json", "--dir", dir)
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("natsperf %v: exit %d\n%s", args, code, stderr.String())
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the server's directory was left behind: %v", left)
	}
	var rep perfclient.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout.String())
	}
	return rep, stderr.String()
}

func TestE2EFixedRate(t *testing.T) {
	needServer(t)
	const rate = 2000
	rep, stderr := runJSON(t, "--mode", "e2e", "--rate", "2000", "--size", "1024",
		"--duration", "2s", "--warmup", "500ms", "--progress", "500ms")
	if rep.System != system || rep.Variant != syncDefault || rep.Mode != modeE2E || rep.MessageSize != 1024 {
		t.Errorf("labels: %+v", rep)
	}
	if rep.Published <= 0 || rep.Consumed != rep.Published {
		t.Fatalf("published %d, consumed %d: want consumed == published > 0\n%s", rep.Published, rep.Consumed, stderr)
	}
	// Throttled: a quarter over the target allows for catching up after a
	// stall on a busy machine, not for an unthrottled producer.
	if rep.PublishPS > 1.25*rate {
		t.Errorf("publish rate %.0f msg/s with --rate %d", rep.PublishPS, rate)
	}
	checkLatency(t, "publish", rep.PublishLatency, rep.PublishCurve)
	checkLatency(t, "e2e", rep.E2ELatency, rep.E2ECurve)
	if len(rep.Timeline) < 4 {
		t.Errorf("timeline has %d intervals over 2.5 s at 500 ms", len(rep.Timeline))
	}
	checkRoundTrip(t, rep)
}

func checkLatency(t *testing.T, name string, l *perfkit.Latency, curve []perfclient.CurvePoint) {
	t.Helper()
	if l == nil {
		t.Fatalf("%s latency missing", name)
	}
	ps := []int64{l.P50, l.P95, l.P99, l.P999, l.P9999, l.Max}
	for i := range ps {
		if ps[i] <= 0 || i > 0 && ps[i] < ps[i-1] {
			t.Errorf("%s latency not ordered: %+v", name, *l)
		}
	}
	if len(curve) != len(perfclient.CurvePercentiles()) {
		t.Fatalf("%s curve has %d points", name, len(curve))
	}
	for i := 1; i < len(curve); i++ {
		if curve[i].Micros < curve[i-1].Micros {
			t.Errorf("%s curve not monotone at p%g: %v", name, curve[i].Percentile, curve)
		}
	}
}

func checkRoundTrip(t *testing.T, rep perfclient.Report) {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back perfclient.Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("JSON round trip changed the report:\n%+v\n%+v", rep, back)
	}
}

// TestSyncAlwaysVerified runs the always variant on the 2.10+ server
// scripts/install-nats.sh builds into bin/; the run itself checks /varz,
// the test checks it said so.
func TestSyncAlwaysVerified(t *testing.T) {
	skipNATSIfShort(t)
	bin, err := filepath.Abs("../../bin/nats-server")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSyncIntervalSupport(bin); err != nil {
		t.Fatalf("no nats-server 2.10+ at %s (%v): scripts/install-nats.sh builds one (make test runs it)", bin, err)
	}
	rep, stderr := runJSON(t, "--server-bin", bin, "--sync", "always", "--rate", "200",
		"--duration", "1s", "--warmup", "200ms")
	if rep.Variant != "sync_interval=always" || rep.Published <= 0 {
		t.Errorf("variant %q, published %d", rep.Variant, rep.Published)
	}
	if !strings.Contains(stderr, "sync_always=true") {
		t.Errorf("the run did not report the server's sync_always:\n%s", stderr)
	}
}

func TestBadSyncRejected(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--sync", "sometimes"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--sync") {
		t.Errorf("exit %d, stderr %q: want 2 and a message naming --sync", code, stderr.String())
	}
}

// TestSyncAlwaysOldServer: a server before 2.10 would reject the config,
// and must not be run as "always" under any label.
func TestSyncAlwaysOldServer(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "nats-server")
	script := "#!/bin/sh\necho 'nats-server: v2.9.10'\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--server-bin", fake, "--sync", "always"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "sync_interval") || !strings.Contains(stderr.String(), "2.10") {
		t.Errorf("exit %d, stderr %q: want 1 and why 2.9.10 cannot run always", code, stderr.String())
	}
}

func TestStamp(t *testing.T) {
	b := newPayload(32)
	at := time.Unix(1_700_000_000, 123456789)
	stamp(b, at, true)
	sent, measured, ok := readStamp(b)
	if !ok || !measured || !sent.Equal(at) {
		t.Errorf("readStamp = %v %t %t, want %v true true", sent, measured, ok, at)
	}
	stamp(b, at, false)
	if _, measured, _ := readStamp(b); measured {
		t.Error("unmeasured stamp read as measured")
	}
	if _, _, ok := readStamp(b[:headerBytes-1]); ok {
		t.Error("short message read as stamped")
	}
}

func TestParseVersion(t *testing.T) {
	for s, want := range map[string][2]int{"nats-server: v2.9.10\n": {2, 9}, "nats-server: v2.15.2": {2, 15}} {
		major, minor, ok := parseVersion(s)
		if !ok || major != want[0] || minor != want[1] {
			t.Errorf("parseVersion(%q) = %d.%d %t", s, major, minor, ok)
		}
	}
	if _, _, ok := parseVersion("nats-server"); ok {
		t.Error("parsed a version from none")
	}
}

func TestFlagsValidated(t *testing.T) {
	for _, args := range [][]string{{"--mode", "consume"}, {"--size", "8"}, {"--producers", "0"},
		{"--max-pending", "0"}, {"--rate", "-1"}, {"--duration", "0s"}, {"--progress", "0s"}} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), args[0]) {
			t.Errorf("%v: exit %d, stderr %q: want 2 naming %s", args, code, stderr.String(), args[0])
		}
	}
}

// A throttled run gets the floor, an unthrottled one half the free space:
// never less.
func TestStreamMaxBytes(t *testing.T) {
	dir := t.TempDir()
	slow := Config{Rate: 100, Size: 1024, Duration: 10 * time.Second, Warmup: 2 * time.Second}
	throttled, err := streamMaxBytes(slow, dir)
	if err != nil {
		t.Fatal(err)
	}
	free := slow
	free.Rate = 0
	unthrottled, err := streamMaxBytes(free, dir)
	if err != nil {
		t.Fatal(err)
	}
	if throttled <= 0 || throttled > minMaxBytes || unthrottled < throttled {
		t.Errorf("max bytes: throttled %d, unthrottled %d", throttled, unthrottled)
	}
}
