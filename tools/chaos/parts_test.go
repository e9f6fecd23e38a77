package chaos

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRun is a finished run of the named scenario, for report tests.
func fakeRun(t *testing.T, scenario string, seed int64, unavailable time.Duration, err error) *Run {
	t.Helper()
	s, lerr := Lookup(scenario)
	if lerr != nil {
		t.Fatal(lerr)
	}
	return &Run{Scenario: s[0], Seed: seed, Dir: "/work/runs/" + scenario, Err: err, Took: 12 * time.Second,
		Verdict: Verdict{Acked: 100, MaxUnavailable: unavailable, UnavailableSpare: unavailable / 2,
			UnavailableNoSpare: unavailable, Drained: true, Gap: Gap{Topic: "t"}}}
}

// Parts saved by two invocations (seeds 1-2 and 3) merge into the report
// one invocation of seeds 1-3 would have written: every run counted once,
// failures kept, each scenario's slowest timeline the slowest of all.
func TestPartsMergeIntoOneReport(t *testing.T) {
	dir := t.TempDir()
	a := &Report{Started: time.Date(2026, 12, 5, 5, 0, 0, 0, time.UTC), Commit: "aaa", Command: "make chaos"}
	for _, r := range []*Run{fakeRun(t, "kill-bookie", 1, 300*time.Millisecond, nil), fakeRun(t, "kill-bookie", 2, 900*time.Millisecond, nil)} {
		a.Add(r)
		a.Slowest = map[string]*Slowest{"kill-bookie": {Seed: r.Seed, Unavailable: r.Verdict.MaxUnavailable}}
	}
	b := &Report{Started: time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC), Commit: "bbb", Command: "make chaos"}
	b.Add(fakeRun(t, "kill-bookie", 3, 400*time.Millisecond, errors.New("the workload did not start")))
	b.Slowest = map[string]*Slowest{"kill-bookie": {Seed: 3, Unavailable: 400 * time.Millisecond}}
	pa, pb := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := a.SavePart(pa); err != nil {
		t.Fatal(err)
	}
	if err := b.SavePart(pb); err != nil {
		t.Fatal(err)
	}
	rep, err := LoadParts([]string{pa, pb})
	if err != nil {
		t.Fatal(err)
	}
	rows := rep.Rows()
	if len(rows) != 1 || rows[0].Runs != 3 || rows[0].Failed != 1 || seedList(rows[0].Seeds) != "1-3" || rows[0].Acked != 300 {
		t.Fatalf("merged rows: %+v", rows[0])
	}
	if rows[0].MaxUnavailable != 900*time.Millisecond {
		t.Errorf("longest unavailability %s, want 900ms", rows[0].MaxUnavailable)
	}
	if s := rep.Slowest["kill-bookie"]; s == nil || s.Seed != 2 {
		t.Errorf("slowest timeline %+v, want seed 2's", s)
	}
	if len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "the workload did not start") {
		t.Errorf("failures %q", rep.Failures)
	}
	md := rep.Markdown()
	for _, want := range []string{"from 2 part(s)", "aaa (seeds 1-2", "bbb (seeds 3"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md[:min(len(md), 600)])
		}
	}
}

// A seed run in two parts would count twice: refused.
func TestPartsRefuseASeedTwice(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{"a.json", "b.json"} {
		rep := &Report{Started: time.Now(), Commit: "c", Command: "make chaos"}
		rep.Add(fakeRun(t, "kill-broker", 7, time.Second, nil))
		p := filepath.Join(dir, name)
		if err := rep.SavePart(p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if _, err := LoadParts(paths); err == nil || !strings.Contains(err.Error(), "kill-broker seed 7") {
		t.Fatalf("merging a seed run twice: %v", err)
	}
}
