package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/tools/tracewait"
)

// maxSizes are the message sizes of the maximum-throughput runs.
var maxSizes = [...]int{100, 1024, 64 << 10}

// maxWindow is the producer's window (messages in flight) in every
// unthrottled run, Magnetar's and NATS's alike: the default 1000 leaves
// the client waiting on round trips rather than the server at its limit.
const maxWindow = 10000

// fixedPercents are the fixed rates, in percent of the 1 KiB maximum.
var fixedPercents = [...]int{10, 50, 80}

// startStandalone starts magnetar standalone on dataDir, with extra flags.
func (r *runner) startStandalone(dataDir string, extra ...string) (target, error) {
	return r.startStandaloneConf(r.o.config, dataDir, extra...)
}

// startStandaloneConf is startStandalone with another configuration file.
func (r *runner) startStandaloneConf(config, dataDir string, extra ...string) (target, error) {
	return r.startStandaloneOn(config, dataDir, pin{}, extra...)
}

// startStandaloneOn is startStandaloneConf with the process pinned by p
// (inherited by its threads; clients run against the target are pinned
// the same way).
func (r *runner) startStandaloneOn(config, dataDir string, p pin, extra ...string) (target, error) {
	bin, err1 := freePort()
	web, err2 := freePort()
	if err1 != nil || err2 != nil {
		return target{}, fmt.Errorf("free ports: %v %v", err1, err2)
	}
	args := append([]string{"standalone", "--config", config, "--data-dir", dataDir, "--bind-address", "127.0.0.1",
		"--advertised-address", "127.0.0.1", "--broker-port", itoa(bin), "--web-port", itoa(web)}, extra...)
	exe, args := p.command(r.o.magnetar, args)
	s, err := startServer("standalone", exe, filepath.Join(r.logDir, fmt.Sprintf("%02d-standalone-server.log", r.nextSeq())), args...)
	if err != nil {
		return target{}, err
	}
	if err := s.waitReady(time.Minute); err != nil {
		_ = s.stop()
		return target{}, err
	}
	admin := fmt.Sprintf("http://127.0.0.1:%d", web)
	return target{name: "standalone", service: fmt.Sprintf("pulsar://127.0.0.1:%d", bin),
		admin: admin, servers: []*server{s}, metrics: []string{admin + "/metrics"}, pin: p}, nil
}

// runStandalone runs the standalone scenarios, each on its own fresh
// standalone (fresh.go); only the backlog fill and its catch-up read
// share one data directory, the catch-up restarting on it.
func (r *runner) runStandalone(ctx context.Context) error {
	d := &r.res.Standalone
	d.Ran, d.Setup = true, "one process: broker, bookie (journal and entry logs on the work directory) and metadata; E=Qw=Qa=1; "+
		"a fresh process on an emptied data directory for each run (the catch-up read restarts on the backlog fill's)"
	d.CacheMiB = standaloneCacheMiB(r.o.config)
	start, dir := r.standaloneOn("standalone", r.o.config), filepath.Join(r.o.work, "standalone")
	if err := r.throughputAndLatency(ctx, start, dir, d, true); err != nil {
		return err
	}
	if err := r.manyTopics(ctx, start, dir, d); err != nil {
		return err
	}
	if err := r.backlogAndCatchUp(ctx, start, dir, d); err != nil {
		return err
	}
	if err := r.runTraced(ctx); err != nil {
		return err
	}
	return r.runMemory(ctx)
}

// runCatchUpSection runs the standalone's cold catch-up read alone
// (--only machine,catchup: the catch-up target without the rest of the
// standalone section, which includes it and makes this one a no-op).
func (r *runner) runCatchUpSection(ctx context.Context) error {
	if r.o.only["standalone"] {
		return nil
	}
	d := &r.res.Standalone
	d.Ran, d.Setup = true, "one process: broker, bookie (journal and entry logs on the work directory) and metadata; E=Qw=Qa=1; "+
		"the catch-up read only (--only catchup), on a standalone restarted on its backlog fill's directory"
	d.CacheMiB = standaloneCacheMiB(r.o.config)
	start, dir := r.standaloneOn("catchup", r.o.config), filepath.Join(r.o.work, "catchup")
	return r.backlogAndCatchUp(ctx, start, dir, d)
}

// runTraced runs the durable 50% point again on a fresh standalone with
// the flight recorder on, keeping the traces of publishes over 20 ms (at
// most one a minute) in profiles/flightrec: the stall itself, to read with
// go tool trace. Run apart so the recorder's cost touches no other figure.
func (r *runner) runTraced(ctx context.Context) error {
	half := r.res.Standalone.fixedAt(50)
	if half == nil {
		return nil
	}
	dir := filepath.Join(r.o.out, "profiles", "flightrec")
	_ = os.RemoveAll(dir)
	conf := filepath.Join(r.o.work, "traced.conf")
	if err := withKeys(r.o.config, conf, "flightRecorderDir="+dir, "flightRecorderPublishThresholdMillis=20"); err != nil {
		return err
	}
	var run Run
	err := r.fresh(r.standaloneOn("standalone", conf), filepath.Join(r.o.work, "traced"), nil, func(t target) (err error) {
		run, err = r.perf(ctx, t, "standalone e2e 50% with the flight recorder", "e2e", "--size", "1024",
			"--topic", "persistent://public/default/traced", "--rate", ftoa(half.Report.TargetRate))
		return err
	})
	if err != nil {
		return err
	}
	run.Percent = 50
	tr := &Traced{Run: run}
	files, _ := filepath.Glob(filepath.Join(dir, "publish-*.trace"))
	for _, f := range files {
		if rel, err := filepath.Rel(r.o.out, f); err == nil {
			tr.Traces = append(tr.Traces, rel)
			tr.Waits = append(tr.Waits, traceWaits(f, rel, 5)...)
		}
	}
	r.res.Traced = tr
	return nil
}

// traceWaits is the top of `magnetar trace waits` for one trace (none if
// it cannot be read: the trace is still linked).
func traceWaits(path, name string, top int) []TraceWait {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	rep, err := tracewait.Analyze(f, "")
	if err != nil {
		return nil
	}
	var out []TraceWait
	for _, k := range rep.Kinds[:min(top, len(rep.Kinds))] {
		out = append(out, TraceWait{Trace: name, Kind: k.Kind, N: len(k.Delays), P50Ms: tracewait.Quantile(k.Delays, .5),
			P99Ms: tracewait.Quantile(k.Delays, .99), MaxMs: tracewait.Quantile(k.Delays, 1)})
	}
	return out
}

// throughputAndLatency runs the maximum publish rate per size, then e2e
// latency at fixed fractions of the 1 KiB maximum, each run on a fresh
// deployment from start. With full (the standalone), every size and
// fraction, and the broker's CPU profile during the 1 KiB maximum; without
// (the cluster), 1 KiB and 50% only.
func (r *runner) throughputAndLatency(ctx context.Context, start starter, dir string, d *Deployment, full bool) error {
	sizes := maxSizes[:]
	if !full {
		sizes = []int{1024}
	}
	for _, size := range sizes {
		if err := r.fresh(start, dir, d, func(t target) error {
			return r.maxRun(ctx, t, d, size, full && size == 1024)
		}); err != nil {
			return err
		}
	}
	max := d.maxOf(1024)
	for _, pct := range fixedPercents {
		if !full && pct != 50 {
			continue
		}
		if err := r.fresh(start, dir, d, func(t target) error {
			return r.fixedRun(ctx, t, d, fmt.Sprintf("%s e2e %d%%", t.name, pct), pct, max.Report.PublishPS*float64(pct)/100)
		}); err != nil {
			return err
		}
	}
	return nil
}

// maxRun is the unthrottled publish of size-byte messages, with the
// server's CPU profile over it if profile.
func (r *runner) maxRun(ctx context.Context, t target, d *Deployment, size int, profile bool) error {
	var prof *cpuProfile
	if profile {
		prof = r.startProfile(t, r.o.warmup, r.o.duration)
	}
	before, serr := scrapeStages(ctx, t.metrics)
	run, err := r.perf(ctx, t, fmt.Sprintf("%s max %d B", t.name, size), "produce", "--size", itoa(size),
		"--topic", fmt.Sprintf("persistent://public/default/max-%d", size), "--rate", "0", "--max-pending", itoa(maxWindow))
	if err != nil {
		return err
	}
	// Unthrottled, the window's messages queue at the slowest stage: the
	// stages say where the maximum comes from.
	if after, aerr := scrapeStages(ctx, t.metrics); serr == nil && aerr == nil && size == 1024 {
		run.Stages = stageDelta(before, after)
	}
	d.Max = append(d.Max, run)
	if prof != nil {
		d.Profile = prof.top()
	}
	return nil
}

// fixedRun is 1 KiB e2e at rate msg/s, pct percent of a maximum; the 50%
// point keeps the servers' publish-stage histograms over it.
func (r *runner) fixedRun(ctx context.Context, t target, d *Deployment, label string, pct int, rate float64) error {
	before, serr := scrapeStages(ctx, t.metrics)
	run, err := r.perf(ctx, t, label, "e2e", "--size", "1024",
		"--topic", fmt.Sprintf("persistent://public/default/fixed-%d", pct), "--rate", ftoa(rate))
	if err != nil {
		return err
	}
	run.Percent = pct
	if after, aerr := scrapeStages(ctx, t.metrics); serr == nil && aerr == nil && pct == 50 {
		// Includes the warm-up: the histograms cannot be cut at it.
		run.Stages = stageDelta(before, after)
	}
	d.Fixed = append(d.Fixed, run)
	return nil
}

// manyTopics publishes to N topics with one producer each, at a total
// rate every count can carry (one message per topic per second, at most
// half the 1 KiB maximum), each count on a fresh deployment, the
// producers spread over --topic-clients client processes.
func (r *runner) manyTopics(ctx context.Context, start starter, dir string, d *Deployment) error {
	for _, n := range r.o.topics {
		rate := min(float64(n), d.maxOf(1024).Report.PublishPS/2)
		if err := r.fresh(start, dir, d, func(t target) error {
			run, err := r.manyTopicsRun(ctx, t, n, rate)
			if err == nil {
				d.Topics = append(d.Topics, run)
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// manyTopicsMaxPending is each many-topics producer's MaxPendingMessages.
// The Go client allocates a producer's pending queue and send channel at
// that size up front (24 bytes of pointers per slot): at its default of
// 1,000, 10,000 producers were 240 MB for a client's collector to mark,
// and its marks, not the server, made the tail (TUNING.md). A producer of
// one message a second never has more than a few in flight.
const manyTopicsMaxPending = 16

// manyTopicsRun is n topics at rate msg/s in all, over min(n,
// --topic-clients) client processes, with the servers' publish stages
// over the run.
func (r *runner) manyTopicsRun(ctx context.Context, t target, n int, rate float64) (Run, error) {
	procs := min(n, r.o.topicClients)
	before, serr := scrapeStages(ctx, t.metrics)
	run, err := r.perfSpread(ctx, t, fmt.Sprintf("%s %d topics", t.name, n), "produce", procs, func(i int) []string {
		share := topicShare(n, procs, i)
		return []string{"--size", "1024", "--topic", fmt.Sprintf("persistent://public/default/many-%d-c%d", n, i),
			"--topics", itoa(share), "--rate", ftoa(rate * float64(share) / float64(n)), "--batching=false",
			"--max-pending", itoa(manyTopicsMaxPending)}
	})
	if err != nil {
		return Run{}, err
	}
	if after, aerr := scrapeStages(ctx, t.metrics); serr == nil && aerr == nil {
		run.Stages = stageDelta(before, after) // producer creation included
	}
	return run, nil
}

// topicShare is client i's share of n topics over procs clients: n/procs,
// the first n%procs one more.
func topicShare(n, procs, i int) int {
	share := n / procs
	if i < n%procs {
		share++
	}
	return share
}

const backlogTopic = "persistent://public/default/backlog"

// warmBacklogTopic is the second backlog, read after backlogTopic by the
// same process. A process started for the catch-up grows its heap to its
// working size during the first backlog's read, and this VM charges the
// first touch of each page (11 us per 4 KiB, TUNING.md): with a 1 GiB
// backlog that growth was more than half of the server's CPU. The second
// read is what a broker that has been serving pays.
const warmBacklogTopic = "persistent://public/default/backlog-2"

// backlogAndCatchUp fills a backlog on a fresh standalone, stops it, drops
// its files from the page cache and reads the backlog on a standalone
// restarted on the same directory: every entry comes from disk.
func (r *runner) backlogAndCatchUp(ctx context.Context, start starter, dir string, d *Deployment) error {
	return inEmptyDir(dir, func() error {
		if err := r.session(start, dir, d, func(t target) error { return r.fillBacklog(ctx, t, d) }); err != nil {
			return err
		}
		if err := dropPageCache(dir); err != nil {
			return err
		}
		return r.session(start, dir, d, func(t target) error { return r.catchUp(ctx, t, d) })
	})
}

// fillBacklog writes BacklogMB of 1 KiB messages behind a subscription
// nobody reads yet, on each of the two backlog topics.
func (r *runner) fillBacklog(ctx context.Context, t target, d *Deployment) error {
	n := r.o.backlogMB << 10
	for i, topic := range []string{backlogTopic, warmBacklogTopic} {
		path := "/admin/v2/" + strings.Replace(topic, "://", "/", 1)
		for _, p := range []string{path, path + "/subscription/catchup"} {
			if err := httpPut(ctx, t.admin+p); err != nil {
				return fmt.Errorf("backlog topic: %w", err)
			}
		}
		run, err := r.perf(ctx, t, fmt.Sprintf("standalone backlog fill %d of 2", i+1), "produce", "--size", "1024",
			"--topic", topic, "--rate", "0", "--num-messages", itoa(n), "--warmup", "0s")
		if err != nil {
			return err
		}
		if i == 0 {
			d.BacklogMiB = float64(run.Report.Published) / 1024
		}
	}
	return nil
}

// catchUp reads the backlog from the start on t, restarted on the fill's
// data with its files out of the page cache, then the second backlog on
// the same process (CatchUpWarm).
func (r *runner) catchUp(ctx context.Context, t target, d *Deployment) error {
	n := int64(d.BacklogMiB * 1024)
	for _, c := range []struct {
		label, topic string
		run          **Run
	}{{"standalone catch-up read", backlogTopic, &d.CatchUp}, {"standalone catch-up read, warm broker", warmBacklogTopic, &d.CatchUpWarm}} {
		run, err := r.perf(ctx, t, c.label, "consume", "--topic", c.topic,
			"--subscription", "catchup", "--num-messages", fmt.Sprint(n), "--warmup", "0s", "--duration", "30m")
		if err != nil {
			return err
		}
		*c.run = &run
	}
	return nil
}

// peakRSS is the peak resident memory (VmHWM) of t's processes, summed.
func peakRSS(t target) float64 {
	var sum float64
	for _, s := range t.servers {
		if v, err := s.peakRSSMiB(); err == nil {
			sum += v
		}
	}
	return sum
}

func httpPut(ctx context.Context, url string) error { return httpSend(ctx, http.MethodPut, url, "") }

// httpSend sends an admin request with a JSON body (none if empty); a
// conflict (already exists) counts as success.
func httpSend(ctx context.Context, method, url, body string) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("%s %s: %s %s", method, url, resp.Status, msg)
	}
	return nil
}

// dropPageCache evicts every file under dir from the page cache (after
// writing back what is dirty), so the next reads come from the disk.
func dropPageCache(dir string) error {
	return filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("drop page cache: %s: %w", path, err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("drop page cache: %s: %w", path, err)
		}
		return nil
	})
}

// standaloneCacheMiB sums the caches the configuration sets (entry cache,
// the bookie's write and read-ahead caches), with the defaults for keys
// it leaves out.
func standaloneCacheMiB(config string) float64 {
	keys := map[string]float64{"managedLedgerCacheSizeMB": managedledger.DefaultCacheSize >> 20,
		"dbStorage_writeCacheMaxSizeMb":     entrylog.DefaultWriteCacheMaxSize >> 20,
		"dbStorage_readAheadCacheMaxSizeMb": entrylog.DefaultReadCacheMaxSize >> 20}
	var sum float64
	for k, def := range keys {
		if v := confFloat(config, k); v > 0 {
			def = v
		}
		sum += def
	}
	return sum
}

// confFloat is key's number in config, 0 when absent or not a number.
func confFloat(config, key string) float64 {
	b, err := os.ReadFile(config)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		var f float64
		if ok && k == key {
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return 0
}

// cpuProfile is a CPU profile of a server being fetched over HTTP.
type cpuProfile struct {
	path, bin string
	done      chan error
}

// startProfile fetches a CPU profile of t's first server from after the
// warm-up to the end of the window.
func (r *runner) startProfile(t target, after, window time.Duration) *cpuProfile {
	p := &cpuProfile{path: filepath.Join(r.o.out, "profiles", "standalone-max-1k.cpu.pprof"), bin: r.o.magnetar,
		done: make(chan error, 1)}
	go func() {
		time.Sleep(after + 2*time.Second) // the client connects, then warms up
		secs := max(1, int(window.Seconds())-3)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.admin, secs))
		if err != nil {
			p.done <- err
			return
		}
		defer resp.Body.Close()
		if err := os.MkdirAll(filepath.Dir(p.path), 0o755); err != nil {
			p.done <- err
			return
		}
		f, err := os.Create(p.path)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			err = errorsJoin(err, f.Close())
		}
		p.done <- err
	}()
	return p
}

// top is the profile's hottest functions (go tool pprof -top), or why
// there is none.
func (p *cpuProfile) top() string {
	if err := <-p.done; err != nil {
		return "no profile: " + err.Error()
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", p.bin, p.path).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("profile in %s (go tool pprof failed: %v)", p.path, err)
	}
	return string(out)
}
