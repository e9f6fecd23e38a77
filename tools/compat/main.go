// Command compat runs the official Go client's own test suites against
// `magnetar standalone`, one process per test, and writes a report per
// suite of what passes and what each failure waits on (`make compat`;
// `make compat RUN=regexp` for a subset). The suites are those of
// github.com/apache/pulsar-client-go at the version in go.mod: the client's
// integration tests (package pulsar) and its admin library's tests
// (package pulsaradmin/pkg/admin), which the client's CI runs against the
// same standalone.
//
// For each suite it builds the test binary from the module cache, starts
// the standalone with the client's own integration-tests/conf/standalone.conf
// (certificate and token paths pointed at the module) on a fresh data
// directory, performs the setup of the client's CI with `magnetar admin`,
// then runs each test from the package's directory (the tests use relative
// paths to integration-tests) with a per-test timeout. Tests that start
// their own Pulsar through testcontainers are not run. A standalone that
// dies or stops answering is restarted. Logs go to <out>/logs/<suite>; the
// report to <out>/<suite>.md, and, for a run of a whole suite only, to its
// page under docs/compat.
//
// Nothing imports this package.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

type config struct {
	repo, magnetar, out, run, docs, command, suites string
	timeout                                         time.Duration
}

// suite is one test package of the client module.
type suite struct {
	name   string // as --suites names it
	pkg    string // the package's directory in the module
	report string // its page under the docs directory
	about  string // what the report says the suite is
}

var suites = []suite{
	{name: "pulsar", pkg: "pulsar", report: "pulsar-client-go.md",
		about: "The official Go client's integration tests (package `pulsar`)"},
	{name: "pulsaradmin", pkg: "pulsaradmin/pkg/admin", report: "pulsaradmin.md",
		about: "The tests of the Go client's admin library (package `pulsaradmin/pkg/admin`, which its CI runs against the same standalone)"},
}

// selectSuites resolves --suites, a comma-separated list of suite names.
func selectSuites(list string) ([]suite, error) {
	var out []suite
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(suites, func(s suite) bool { return s.name == name })
		if i < 0 {
			return nil, fmt.Errorf("--suites: no suite %q (have pulsar, pulsaradmin)", name)
		}
		out = append(out, suites[i])
	}
	return out, nil
}

func main() {
	var c config
	flag.StringVar(&c.repo, "repo", ".", "the magnetar repository (its go.mod names the client version)")
	flag.StringVar(&c.magnetar, "magnetar", "bin/magnetar", "the magnetar binary (make build)")
	flag.StringVar(&c.out, "out", ".compat", "results directory: test binaries, logs, <suite>.md, <suite>.json")
	flag.StringVar(&c.run, "run", "", "run only tests matching this regexp (default: every test of each suite)")
	flag.StringVar(&c.suites, "suites", "pulsar,pulsaradmin", "the suites to run, comma-separated: pulsar (the client's integration tests), pulsaradmin (its admin library's tests)")
	flag.StringVar(&c.docs, "docs", "docs/compat", "where a run of a whole suite writes its report page (a subset writes only <out>/<suite>.md)")
	flag.StringVar(&c.command, "command", "make compat", "the command to name in the report")
	flag.DurationVar(&c.timeout, "timeout", 3*time.Minute, "per-test timeout; the test's process group is killed 30s after it")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "compat: unexpected arguments %v\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "compat: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compat: "+format+"\n", args...)
}

// harness is one suite's run.
type harness struct {
	config
	suite
	mod      module
	testBin  string
	testDir  string // the suite's package directory: where each test runs
	logDir   string // one log per test
	tmp      string // config and data; removed at the end
	sa       *standalone
	events   []string
	restarts int
	sources  map[string][]string // suite files by name, as sourceLine read them
}

func run(ctx context.Context, c config) error {
	filter, err := regexp.Compile(c.run)
	if err != nil {
		return fmt.Errorf("RUN %q is not a regexp: %w", c.run, err)
	}
	chosen, err := selectSuites(c.suites)
	if err != nil {
		return err
	}
	if c.magnetar, err = filepath.Abs(c.magnetar); err != nil {
		return err
	}
	if st, err := os.Stat(c.magnetar); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("no magnetar binary at %s (run make build, or pass --magnetar)", c.magnetar)
	}
	mod, err := findModule(ctx, c.repo)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	// The results directory is scratch: keep it out of git without touching .gitignore.
	if err := os.WriteFile(filepath.Join(c.out, ".gitignore"), []byte("*\n"), 0o644); err != nil {
		return err
	}
	var errs []error
	ran := 0
	for _, s := range chosen {
		h := &harness{config: c, suite: s, mod: mod}
		n, err := h.runSuite(ctx, filter)
		ran += n
		if err != nil {
			errs = append(errs, fmt.Errorf("suite %s: %w", s.name, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if ran == 0 && len(errs) == 0 {
		return fmt.Errorf("RUN %q matches no test of the suites %s", c.run, c.suites)
	}
	return errors.Join(errs...)
}

// runSuite runs the suite's tests that match filter (none matching is
// not an error: RUN may name another suite's tests) and writes its
// reports; it returns how many tests it selected.
func (h *harness) runSuite(ctx context.Context, filter *regexp.Regexp) (int, error) {
	if err := portsFree(); err != nil {
		return 0, err
	}
	h.testDir = filepath.Join(h.mod.Dir, h.pkg)
	h.logDir = filepath.Join(h.out, "logs", h.name)
	if err := os.MkdirAll(h.logDir, 0o755); err != nil {
		return 0, err
	}
	var err error
	if h.testBin, err = filepath.Abs(filepath.Join(h.out, h.name+".test")); err != nil {
		return 0, err
	}
	if err := buildTestBinary(ctx, h.mod, h.pkg, h.testBin, logf); err != nil {
		return 0, err
	}
	all, err := listTests(ctx, h.testBin, h.testDir)
	if err != nil {
		return 0, err
	}
	var selected []string
	for _, t := range all {
		if filter.MatchString(t) {
			selected = append(selected, t)
		}
	}
	if len(selected) == 0 {
		logf("suite %s: no test matches RUN %q", h.name, h.run)
		return 0, nil
	}
	src, err := parseSuiteDir(h.testDir)
	if err != nil {
		return 0, fmt.Errorf("reading the suite's source in %s: %w", h.testDir, err)
	}
	if h.tmp, err = os.MkdirTemp("", "magnetar-compat-"); err != nil {
		return 0, err
	}
	defer os.RemoveAll(h.tmp)
	defer func() {
		if h.sa != nil {
			h.sa.stop()
		}
	}()
	if err := h.startStandalone(ctx, true); err != nil {
		return 0, err
	}
	results, interrupted := h.runTests(ctx, selected, src)
	h.sa.stop()
	return len(selected), h.writeReports(results, len(all), interrupted)
}

// startStandalone starts a standalone on a fresh data directory (fresh)
// or the current one, and performs the suite's setup on a fresh one.
func (h *harness) startStandalone(ctx context.Context, fresh bool) error {
	if h.sa == nil {
		conf, err := os.ReadFile(filepath.Join(h.mod.Dir, "integration-tests", "conf", "standalone.conf"))
		if err != nil {
			return fmt.Errorf("the suite's standalone.conf: %w", err)
		}
		confPath := filepath.Join(h.tmp, "standalone.conf")
		if err := os.WriteFile(confPath, suiteConf(conf, h.mod.Dir), 0o644); err != nil {
			return err
		}
		h.sa = &standalone{bin: h.magnetar, conf: confPath, logPath: filepath.Join(h.out, h.name+"-standalone.log")}
		_ = os.Remove(h.sa.logPath)
	}
	if fresh {
		h.sa.dataDir = filepath.Join(h.tmp, fmt.Sprintf("data-%d", h.restarts))
		_ = os.RemoveAll(h.sa.dataDir)
	}
	logf("starting %s standalone (data %s, log %s)", h.magnetar, h.sa.dataDir, h.sa.logPath)
	if err := h.sa.start(ctx); err != nil {
		return err
	}
	if fresh {
		for _, f := range setup(ctx, h.magnetar, h.mod.Dir, logf) {
			h.event(f)
		}
	}
	return nil
}

func (h *harness) event(msg string) {
	for _, e := range h.events {
		if e == msg {
			return
		}
	}
	h.events = append(h.events, msg)
}

// restart brings a dead or unresponsive standalone back: on its data
// first, on a fresh data directory if that fails.
func (h *harness) restart(ctx context.Context, why string) error {
	h.restarts++
	h.events = append(h.events, why+"; restarted it")
	logf("%s; restarting it", why)
	h.sa.stop()
	if err := h.sa.start(ctx); err == nil {
		return nil
	} else if ctx.Err() != nil {
		return err
	} else {
		logf("restart on the same data failed: %v; trying a fresh data directory", err)
	}
	if err := h.startStandalone(ctx, true); err != nil {
		return fmt.Errorf("%w: %v", errStandaloneDown, err)
	}
	h.events[len(h.events)-1] += " (on a fresh data directory)"
	return nil
}

// runTests runs the selected tests in order; it stops early on an
// interrupt or a standalone that cannot be restarted.
func (h *harness) runTests(ctx context.Context, tests []string, src suiteSource) ([]testResult, bool) {
	var results []testResult
	for i, name := range tests {
		if ctx.Err() != nil {
			return results, true
		}
		n := src.needsOf(name)
		if n.Docker {
			results = append(results, notRunnable(name))
			logf("%s [%d/%d] %s: not run (docker)", h.name, i+1, len(tests), name)
			continue
		}
		if !h.sa.healthy(ctx) {
			if err := h.restart(ctx, "the standalone was not answering before "+name); err != nil {
				h.events = append(h.events, err.Error())
				return results, true
			}
		}
		start := time.Now()
		o, err := runTest(ctx, h.testBin, h.testDir, name, filepath.Join(h.logDir, name+".log"), h.timeout)
		if err != nil {
			o = outcome{ExitCode: -1, Killed: "harness error: " + err.Error()}
		}
		r := classify(name, n, o, h.sourceLine)
		r.Seconds = time.Since(start).Round(100 * time.Millisecond).Seconds()
		if ctx.Err() == nil && !h.sa.alive() {
			why := fmt.Sprintf("the standalone died during %s (%v)", name, h.sa.exited)
			r.Cause = strings.TrimPrefix(r.Cause+"; "+why, "; ")
			if err := h.restart(ctx, why); err != nil {
				results = append(results, r)
				h.events = append(h.events, err.Error())
				return results, true
			}
		}
		if o.Killed == "interrupted" {
			return results, true
		}
		results = append(results, r)
		logf("%s [%d/%d] %s: %s %.1fs %s", h.name, i+1, len(tests), name, r.Result, r.Seconds, r.Cause)
	}
	return results, false
}

// sourceLine is line n of one of the suite's files, or "".
func (h *harness) sourceLine(file string, n int) string {
	if h.sources == nil {
		h.sources = map[string][]string{}
	}
	lines, ok := h.sources[file]
	if !ok {
		b, _ := os.ReadFile(filepath.Join(h.testDir, filepath.Base(file)))
		lines = strings.Split(string(b), "\n")
		h.sources[file] = lines
	}
	if n < 1 || n > len(lines) {
		return ""
	}
	return lines[n-1]
}

// writeReports writes <out>/<suite>.md and <suite>.json, and the suite's
// documentation page for a complete run of the whole suite.
func (h *harness) writeReports(results []testResult, listed int, interrupted bool) error {
	info := runInfo{
		Suite: h.name, About: h.about, Package: h.pkg, ClientModule: h.mod.Path, ClientVersion: h.mod.Version,
		Date: time.Now().UTC().Format("2006-01-02"), Machine: machine(), Command: h.command,
		Filter: h.run, Listed: listed, PerTest: h.timeout.String(), Interrupted: interrupted,
		Events: h.events, UnusedKeys: unusedKeys(tailFile(h.sa.logPath, 1<<20)),
	}
	if h.run != "" {
		info.Command += " RUN='" + h.run + "'"
	}
	paths := []string{filepath.Join(h.out, h.name+".md")}
	page := filepath.Join(h.docs, h.report)
	if h.run == "" && !interrupted {
		paths = append(paths, page)
	} else {
		logf("a subset or an interrupted run: the report goes to %s only, %s is left as it is", paths[0], page)
	}
	for _, p := range paths {
		if err := writeReportFile(p, info, results); err != nil {
			return err
		}
	}
	j, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.out, h.name+".json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	t := count(results)
	logf("%s: passed %d, failed %d, skipped %d, not runnable %d; report %s", h.name, t.Pass, t.Fail, t.Skip, t.NotRunnable, strings.Join(paths, " and "))
	if interrupted {
		return errors.New("interrupted before every selected test ran")
	}
	return nil
}

func writeReportFile(path string, info runInfo, results []testResult) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := renderReport(f, info, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// machine describes this host: OS/arch, CPU model and count.
func machine() string {
	s := fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				return s + " (" + strings.TrimSpace(v) + ")"
			}
		}
	}
	return s
}
