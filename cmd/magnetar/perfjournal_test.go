package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestPerfJournalJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"perf", "journal", "--json", "--dir", t.TempDir(), "--backends", "uring,std",
		"--sizes", "1k", "--writers", "1,64", "--pipeline", "on", "--max-group-wait", "0,1ms",
		"--duration", "150ms", "--warmup", "10ms", "--disk-duration", "30ms", "--max-file-size", "8m"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut.String())
	}
	var rep struct {
		Points []struct {
			Backend        string
			EntriesPerSec  float64 `json:"entries_per_sec"`
			MaxGroupWaitUS int64   `json:"max_group_wait_us"`
		}
		Targets []struct {
			Backend   string
			RateRatio float64 `json:"rate_ratio"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	// 2 backends x 2 group waits x 2 writer counts; a target per backend and wait.
	if len(rep.Points) != 8 || len(rep.Targets) != 4 {
		t.Fatalf("%d points and %d targets, want 8 and 4", len(rep.Points), len(rep.Targets))
	}
	// Points are short: under a loaded CI machine one datasync may outlast
	// a point, so only require that every backend measured something.
	measured := map[string]bool{}
	for _, p := range rep.Points {
		if p.EntriesPerSec < 0 || (p.MaxGroupWaitUS != 0 && p.MaxGroupWaitUS != 1000) {
			t.Fatalf("point %+v", p)
		}
		measured[p.Backend] = measured[p.Backend] || p.EntriesPerSec > 0
	}
	if !measured["uring"] || !measured["std"] {
		t.Fatalf("a backend measured nothing: %v", measured)
	}
	if !strings.Contains(errOut.String(), "entries/s") {
		t.Fatalf("progress table not on stderr: %q", errOut.String())
	}
}

func TestPerfJournalBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--sizes", "1q"}, {"--writers", "0"}, {"--pipeline", "maybe"}, {"--reuse", "yes"},
		{"--max-group-wait", "-1ms"}, {"--max-file-size", "1m,2m"},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"perf", "journal"}, args...), &out, &errOut); code != 2 ||
			!strings.Contains(errOut.String(), args[0]) {
			t.Fatalf("%v: code %d err %q", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"perf", "journal", "--backends", "spdk", "--dir", t.TempDir()}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), `unknown io backend "spdk"`) {
		t.Fatalf("code %d err %q", code, errOut.String())
	}
}
