package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/internal/netlab"
)

var (
	flagRun       = flag.Bool("chaos", false, "run the fault suite (make chaos / make chaos-smoke set it)")
	flagScenarios = flag.String("chaos.scenarios", "all", "comma-separated scenarios, all, or smoke")
	flagSeeds     = flag.Int("chaos.seeds", 1, "seeds per scenario")
	flagFirstSeed = flag.Int64("chaos.first-seed", 1, "first seed")
	flagBudget    = flag.Duration("chaos.budget", 0, "start no run after this much time (0: no limit); the report says so")
	flagReport    = flag.String("chaos.report", "", "write the report here (docs/chaos/REPORT.md)")
	flagBin       = flag.String("chaos.bin", "", "magnetar binary (default: built into the work directory)")
	flagWork      = flag.String("chaos.work", "", "work directory for data and logs (default: a new one under the temp dir)")
	flagTimelines = flag.String("chaos.timelines", "", "TestTimelines: a directory of kept runs (CHAOS_KEEP_LOGS=1) to build the report's 'Where the time went' from")
	flagTestLog   = flag.String("chaos.testlog", "", "TestTimelines: the go test -v log of that invocation, for runs kept without faults.log")
	flagCommand   = flag.String("chaos.command", "make chaos", "the command named in the report")
	flagBounds    = flag.Bool("chaos.bounds", false, "fail a run whose unavailability passes its scenario's bound (make chaos-smoke)")
	flagPart      = flag.String("chaos.part", "", "save this invocation's results here after every run (JSON), for -chaos.merge")
	flagMerge     = flag.String("chaos.merge", "", "run nothing: write -chaos.report from these saved parts (comma-separated), checking -chaos.bounds")
)

// TestMain lets a run start this test binary as the workload process.
func TestMain(m *testing.M) {
	if os.Getenv("MAGNETAR_CHAOS_WORKLOAD") == "1" {
		os.Exit(RunWorkload(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestChaos runs the selected scenarios with the selected seeds on one
// cluster, seed by seed (so a budget cuts every scenario evenly), and
// writes the report. Work directories of failing runs are kept.
func TestChaos(t *testing.T) {
	if !*flagRun {
		t.Skip("the fault suite: make chaos or make chaos-smoke (-chaos)")
	}
	if *flagMerge != "" {
		mergeParts(t, strings.Split(*flagMerge, ","))
		return
	}
	if err := netlab.Available(); err != nil {
		t.Fatal(err)
	}
	scenarios, err := Lookup(*flagScenarios)
	if err != nil {
		t.Fatal(err)
	}
	work := *flagWork
	if work == "" {
		work, err = os.MkdirTemp("", "magnetar-chaos-")
		if err != nil {
			t.Fatal(err)
		}
	}
	bin := *flagBin
	if bin == "" {
		bin = buildMagnetar(t, work)
	}
	logf := func(format string, args ...any) {
		t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	rep := &Report{Started: time.Now(), Commit: gitCommit(), Command: *flagCommand, LogsDir: work}
	c, err := StartCluster(Options{Bin: bin, Dir: filepath.Join(work, "cluster"), Logf: logf})
	if err != nil {
		t.Fatalf("starting the cluster (logs in %s): %v", work, err)
	}
	defer c.Close()
	logf("cluster up in %s", time.Since(rep.Started).Round(time.Millisecond))
	runs := filepath.Join(work, "runs")
	total := *flagSeeds * len(scenarios)
	// slowestDirs: per scenario, the logs kept only because the run was
	// its slowest so far (the report's timeline points at them); replaced
	// by the next slower run's.
	slowestDirs := map[string]string{}
	// failures are repeated after the report: CI shows an output's tail.
	var failures []string
	for i := range *flagSeeds {
		seed := *flagFirstSeed + int64(i)
		for _, s := range scenarios {
			if *flagBudget > 0 && time.Since(rep.Started) > *flagBudget {
				rep.Budget = fmt.Sprintf("The time budget (%s) ended the invocation after %d of %d planned runs (%d seeds x %d scenarios).",
					*flagBudget, len(rep.Runs), total, *flagSeeds, len(scenarios))
				break
			}
			r := NewRun(c, s, seed, runs, logf)
			r.Execute()
			rep.Add(r)
			v := r.Verdict
			logf("%s seed %d: %d acked, %d lost, %d dup, %d reordered, %d phantom, %d reader mismatch, unavailable %.1f s "+
				"(Qw>Qa %.1f s, Qw=Qa %.1f s, without a delivery %.1f s), took %s, err %v",
				s.Name, seed, v.Acked, v.Lost, v.Duplicated, v.Reordered, v.Phantom, v.ReaderMismatch,
				v.MaxUnavailable.Seconds(), v.UnavailableSpare.Seconds(), v.UnavailableNoSpare.Seconds(), v.MaxUndelivered.Seconds(),
				r.Took.Round(time.Second), r.Err)
			over := ""
			if *flagBounds {
				over = s.Bound.check(v)
			}
			slowest := rep.Slower(r)
			if slowest { // its timeline reads the servers' logs
				keepLogs(c, r)
				rep.NoteSlowest(r)
				if prev := slowestDirs[s.Name]; prev != "" {
					_ = os.RemoveAll(prev) // no longer the slowest
					delete(slowestDirs, s.Name)
				}
			}
			if *flagPart != "" {
				if err := rep.SavePart(*flagPart); err != nil {
					t.Errorf("saving the results to %s: %v", *flagPart, err)
				}
			}
			switch {
			case r.Failed():
				keepLogs(c, r)
				failures = append(failures, fmt.Sprintf("%s seed %d failed (logs %s): %v %s", s.Name, seed, r.Dir, r.Err, strings.Join(v.Problems, "\n")))
				t.Error(failures[len(failures)-1])
			case over != "":
				keepLogs(c, r)
				failures = append(failures, fmt.Sprintf("%s seed %d: %s (logs %s)", s.Name, seed, over, r.Dir))
				t.Error(failures[len(failures)-1])
			case v.MaxUnavailable > SlowRun || os.Getenv("CHAOS_KEEP_LOGS") != "":
				keepLogs(c, r)
				logf("%s seed %d: unavailable %.1f s; logs kept in %s", s.Name, seed, v.MaxUnavailable.Seconds(), r.Dir)
			case slowest:
				slowestDirs[s.Name] = r.Dir
			default:
				_ = os.RemoveAll(r.Dir)
			}
		}
		if rep.Budget != "" {
			break
		}
	}
	rep.Took = time.Since(rep.Started)
	if *flagPart != "" {
		if err := rep.SavePart(*flagPart); err != nil {
			t.Errorf("saving the results to %s: %v", *flagPart, err)
		}
	}
	writeReport(t, rep)
	for _, f := range failures {
		t.Log("FAILED: " + f)
	}
	if !t.Failed() && *flagWork == "" {
		c.Close()
		_ = os.RemoveAll(work)
	}
}

// mergeParts writes the report of saved parts and fails on every run
// that failed or, with -chaos.bounds, passed its scenario's bound.
func mergeParts(t *testing.T, paths []string) {
	rep, err := LoadParts(paths)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		switch {
		case r.Failed():
			t.Errorf("%s seed %d failed (logs %s): %v %s", r.Scenario.Name, r.Seed, r.Dir, r.Err, strings.Join(r.Verdict.Problems, "\n"))
		case *flagBounds && r.Scenario.Bound.check(r.Verdict) != "":
			t.Errorf("%s seed %d: %s", r.Scenario.Name, r.Seed, r.Scenario.Bound.check(r.Verdict))
		}
	}
	writeReport(t, rep)
}

// writeReport writes the report to -chaos.report and the test log.
func writeReport(t *testing.T, rep *Report) {
	md := rep.Markdown()
	if *flagReport != "" {
		if err := os.MkdirAll(filepath.Dir(*flagReport), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*flagReport, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("\n%s", md)
}

// keepLogs copies every server's log next to a failing run's results.
// keepLogs copies into the run's directory what each server logged since
// the run began. Whole logs, copied
// for every run with CHAOS_KEEP_LOGS, grew with the square of the runs and
// filled the disk (5 Dec: 49 GB by run 220, every bookie read-only).
func keepLogs(c *Cluster, r *Run) {
	for _, p := range c.All() {
		if b, err := os.ReadFile(p.Log); err == nil {
			if off := r.logStart[p.Log]; off > 0 && off <= int64(len(b)) {
				b = b[off:]
			}
			_ = os.WriteFile(filepath.Join(r.Dir, p.Name+".log"), b, 0o644)
		}
	}
}

func buildMagnetar(t *testing.T, work string) string {
	t.Helper()
	bin := filepath.Join(work, "magnetar")
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/magnetar")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// TestTimelines prints the report's "Where the time went" section for a
// directory of kept runs (-chaos.timelines; see docs/testing.md).
func TestTimelines(t *testing.T) {
	if *flagTimelines == "" {
		t.Skip("needs -chaos.timelines")
	}
	md, err := Timelines(*flagTimelines, *flagTestLog)
	if err != nil {
		t.Fatal(err)
	}
	if *flagReport != "" {
		if err := os.WriteFile(*flagReport, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("\n%s", md)
}
