package main

// The geo section's pinned passes (--geo-pinned): each cluster on its own
// core. The unpinned passes (geo.go) run both clusters, their bookies and
// clients on every core of this machine, so replication (A stores and
// forwards each message, B stores it again) competes with A's own
// publishing for the same CPUs: that ratio measures CPU sharing. Here A
// and its producer run on one core and B and its consumer on another
// (taskset -c, set at exec so every thread and child inherits it), which
// emulates two one-core machines (the disk is still shared):
//
//   - baseline: A alone, its producer unthrottled: the single-cluster
//     publish rate of a one-core cluster;
//   - unthrottled: A's producer unthrottled, B's steady-state receive rate
//     and A's replication backlog to B, sampled each second;
//   - at target: A's producer at targetGeoVsPublish of the baseline: B
//     keeps up when it receives what A publishes and the backlog does not
//     grow (geoKeepsUp).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// geoKeepUpRatio is the least fraction of what A published that B
	// must receive over the window to keep up (the two clients' windows
	// are aligned only to within a progress interval).
	geoKeepUpRatio = 0.97
	// geoKeepUpGrowth is the most the replication backlog may grow, per
	// second, as a fraction of the publish rate.
	geoKeepUpGrowth = 0.02
	// geoSampleEvery is how often A's replication backlog is read.
	geoSampleEvery = time.Second
)

// pin runs a process on a CPU list through taskset -c; taskset execs the
// program (same PID), and every thread and child inherits the affinity.
// The zero pin runs the program as is.
type pin struct {
	taskset string // taskset binary
	cpus    string // taskset's CPU list, e.g. "0"
}

// command is bin with args, run under p.
func (p pin) command(bin string, args []string) (string, []string) {
	if p.cpus == "" {
		return bin, args
	}
	return p.taskset, append([]string{"-c", p.cpus, bin}, args...)
}

// twoCores picks the first two CPUs of the allowed set: A's and B's.
func twoCores(allowed []int) (a, b int, err error) {
	if len(allowed) < 2 {
		return 0, 0, fmt.Errorf("%d CPU(s) allowed (%v): pinning needs two", len(allowed), allowed)
	}
	return allowed[0], allowed[1], nil
}

// allowedCPUs is the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var out []int
	for i := 0; i < len(set)*64 && len(out) < set.Count(); i++ {
		if set.IsSet(i) {
			out = append(out, i)
		}
	}
	return out, nil
}

// geoPins are A's and B's pins.
func geoPins() (a, b pin, err error) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return a, b, fmt.Errorf("taskset (util-linux): %w", err)
	}
	cpus, err := allowedCPUs()
	if err != nil {
		return a, b, err
	}
	ca, cb, err := twoCores(cpus)
	if err != nil {
		return a, b, err
	}
	return pin{taskset, itoa(ca)}, pin{taskset, itoa(cb)}, nil
}

// runGeoPinned runs the pinned passes on fresh standalones under dir,
// into d.
func (r *runner) runGeoPinned(ctx context.Context, dir string, d *GeoPinned) error {
	pa, pb, err := geoPins()
	if err != nil {
		return err
	}
	d.CoreA, d.CoreB = pa.cpus, pb.cpus
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	a, err := r.startStandaloneOn(r.o.config, filepath.Join(dir, "bench-a"), pa, "--cluster", "bench-a")
	if err != nil {
		return fmt.Errorf("bench-a on core %s: %w", pa.cpus, err)
	}
	a.name = "bench-a"
	defer a.servers[0].stop()
	base, err := r.perf(ctx, a, "geo pinned baseline: A alone", "produce", "--size", "1024",
		"--topic", "persistent://public/default/geo-pinned-base", "--rate", "0", "--max-pending", itoa(maxWindow))
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	d.Baseline = &base
	b, err := r.startStandaloneOn(r.o.config, filepath.Join(dir, "bench-b"), pb, "--cluster", "bench-b")
	if err != nil {
		return fmt.Errorf("bench-b on core %s: %w", pb.cpus, err)
	}
	b.name = "bench-b"
	defer b.servers[0].stop()
	if err := geoSetup(ctx, a, b); err != nil {
		return fmt.Errorf("pinned clusters: %w", err)
	}
	return r.geoPinnedPasses(ctx, a, b, d)
}

// geoPinnedPasses runs the pass at the target fraction of the baseline,
// then the unthrottled pass (whose backlog would still be replicating
// during a pass after it).
func (r *runner) geoPinnedPasses(ctx context.Context, a, b target, d *GeoPinned) error {
	rate := targetGeoVsPublish * d.Baseline.Report.PublishPS
	if rate < 1 {
		return fmt.Errorf("pinned baseline published %.0f msg/s", d.Baseline.Report.PublishPS)
	}
	d.Setup = fmt.Sprintf("fresh durable standalones bench-a on core %s and bench-b on core %s (taskset -c at exec; GOMAXPROCS "+
		"follows the affinity), A's clients on A's core and B's on B's; the baseline is A alone with its producer "+
		"unthrottled; then the same replicated namespace as above, A's producer at %.0f msg/s (%.1f × the baseline), "+
		"then unthrottled (in that order, so no backlog left by the unthrottled pass is still replicating during the other); "+
		"A's replication backlog to B (its topic stats) read every %s", d.CoreA, d.CoreB, rate, targetGeoVsPublish, geoSampleEvery)
	var err error
	if d.AtTarget, err = r.geoWatchedPass(ctx, a, b, geoTopic+"-pinned-target", rate); err != nil {
		return fmt.Errorf("pinned at %.0f msg/s: %w", rate, err)
	}
	if d.Max, err = r.geoWatchedPass(ctx, a, b, geoTopic+"-pinned-max", 0); err != nil {
		return fmt.Errorf("pinned unthrottled: %w", err)
	}
	return nil
}

// geoWatchedPass is geoPass with A's replication backlog to B sampled
// while A's producer runs.
func (r *runner) geoWatchedPass(ctx context.Context, a, b target, topic string, rate float64) (GeoPass, error) {
	var p GeoPass
	statsURL := a.admin + "/admin/v2/" + strings.Replace(topic, "://", "/", 1) + "/stats"
	watch := func() func() {
		return sampleBacklog(ctx, statsURL, b.name, geoSampleEvery, &p.Backlog)
	}
	prod, cons, err := r.geoPass(ctx, a, b, topic, rate, watch)
	if err != nil {
		return p, err
	}
	p.Producer, p.Consumer = &prod, &cons
	from := r.o.warmup.Seconds()
	p.BacklogGrowthPS = backlogGrowth(p.Backlog, from, from+r.o.duration.Seconds())
	return p, nil
}

// sampleBacklog reads remote's replication backlog from statsURL every
// period into out until the returned stop is called (which
// waits for the sampler). Failed reads are skipped: the topic and its
// replicator appear only once the producer is connected.
func sampleBacklog(ctx context.Context, statsURL, remote string, every time.Duration, out *[]BacklogSample) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if s, err := readBacklog(ctx, statsURL, remote); err == nil {
				s.At = time.Since(start).Seconds()
				*out = append(*out, s)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// readBacklog is remote's entry in a topic's stats.replication.
func readBacklog(ctx context.Context, statsURL, remote string) (BacklogSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return BacklogSample{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return BacklogSample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return BacklogSample{}, fmt.Errorf("GET %s: %s", statsURL, resp.Status)
	}
	return decodeBacklog(resp.Body, remote)
}

// decodeBacklog reads remote's replication backlog and delay from topic
// stats JSON (Pulsar's TopicStats.replication).
func decodeBacklog(rd io.Reader, remote string) (BacklogSample, error) {
	var st struct {
		Replication map[string]struct {
			Backlog int64 `json:"replicationBacklog"`
			Delay   int64 `json:"replicationDelayInSeconds"`
		} `json:"replication"`
	}
	if err := json.NewDecoder(rd).Decode(&st); err != nil {
		return BacklogSample{}, fmt.Errorf("topic stats: %w", err)
	}
	rs, ok := st.Replication[remote]
	if !ok {
		return BacklogSample{}, fmt.Errorf("topic stats: no replicator to %s", remote)
	}
	return BacklogSample{Messages: rs.Backlog, DelaySeconds: rs.Delay}, nil
}

// backlogGrowth is the least-squares slope (messages per second) of the
// samples taken in [from, to]; 0 with fewer than two.
func backlogGrowth(samples []BacklogSample, from, to float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, s := range samples {
		if s.At < from || s.At > to {
			continue
		}
		x, y := s.At, float64(s.Messages)
		n, sx, sy, sxx, sxy = n+1, sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	den := n*sxx - sx*sx
	if n < 2 || den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// geoKeepsUp says whether B kept up with A in pass p: A published at
// least geoKeepUpRatio of its target rate (a paced pass that fell short
// does not test that rate), B received at least geoKeepUpRatio of what A
// published per second, and the backlog grew by at most geoKeepUpGrowth
// of the publish rate per second. why names what failed.
func geoKeepsUp(p GeoPass) (ok bool, why string) {
	if p.Producer == nil || p.Consumer == nil || p.Producer.Report.PublishPS <= 0 {
		return false, "not measured"
	}
	pub, got := p.Producer.Report.PublishPS, p.Consumer.Report.ConsumePS
	var fails []string
	if target := p.Producer.Report.TargetRate; target > 0 && pub < geoKeepUpRatio*target {
		fails = append(fails, fmt.Sprintf("A published %.2f × the target rate (at least %.2f needed)", pub/target, geoKeepUpRatio))
	}
	if got < geoKeepUpRatio*pub {
		fails = append(fails, fmt.Sprintf("B received %.2f × what A published (at least %.2f needed)", got/pub, geoKeepUpRatio))
	}
	if p.BacklogGrowthPS > geoKeepUpGrowth*pub {
		fails = append(fails, fmt.Sprintf("the backlog grew %.0f msg/s (at most %.0f)", p.BacklogGrowthPS, geoKeepUpGrowth*pub))
	}
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ")
	}
	return true, ""
}

// writeGeoPinned is the pinned part of the geo section.
func writeGeoPinned(w io.Writer, d *GeoPinned) {
	if d == nil {
		return
	}
	if d.Baseline == nil || d.Max.Consumer == nil || d.AtTarget.Consumer == nil {
		fmt.Fprintf(w, "### Each cluster on its own core\n\nNot measured: %s\n\n", orUnknown(d.Skipped))
		return
	}
	fmt.Fprintf(w, "### Each cluster on its own core\n\n%s. Pinning emulates each cluster on its own one-core machine (the disk is still shared); "+
		"the unpinned rows above are the same-machine figure, both clusters sharing every core. The baseline is what one "+
		"such cluster publishes alone. Backlog growth: the least-squares slope of A's replication backlog to B over the "+
		"measured window (positive: B falls further behind).\n\n"+
		"| pass | published in A | A publish p99 | received in B | received / published | backlog growth | backlog at end | "+
		"replication p50 | p99 | max | B keeps up |\n|---|---|---|---|---|---|---|---|---|---|---|\n", d.Setup)
	bp := d.Baseline.Report
	fmt.Fprintf(w, "| baseline: A alone (core %s) | %.0f msg/s | %s | - | - | - | - | - | - | - | - |\n",
		d.CoreA, bp.PublishPS, us(lat(bp.PublishLatency).P99))
	geoPinnedRow(w, "unthrottled", d.Max)
	geoPinnedRow(w, fmt.Sprintf("%.0f msg/s (%.1f × baseline)", d.AtTarget.Producer.Report.TargetRate, targetGeoVsPublish), d.AtTarget)
	fmt.Fprintln(w)
	if ok, why := geoKeepsUp(d.AtTarget); !ok {
		fmt.Fprintf(w, "At %.1f × the pinned baseline B did not keep up: %s.\n\n", targetGeoVsPublish, why)
	}
}

func geoPinnedRow(w io.Writer, name string, p GeoPass) {
	pr, cr := p.Producer.Report, p.Consumer.Report
	l := lat(cr.E2ELatency)
	var end string
	if n := len(p.Backlog); n > 0 {
		end = fmt.Sprintf("%d msg", p.Backlog[n-1].Messages)
	}
	keeps := "no"
	if ok, _ := geoKeepsUp(p); ok {
		keeps = "yes"
	}
	fmt.Fprintf(w, "| %s | %.0f msg/s | %s | %.0f msg/s | %.2f | %+.0f msg/s | %s | %s | %s | %s | %s |\n", name,
		pr.PublishPS, us(lat(pr.PublishLatency).P99), cr.ConsumePS, ratioOf(cr.ConsumePS, pr.PublishPS),
		p.BacklogGrowthPS, orUnknown(end), us(l.P50), us(l.P99), us(l.Max), keeps)
}

// geoPinnedTargetRows are the pinned passes' targets: replication
// throughput against the one-core baseline, and B keeping up at the
// target fraction of it.
func geoPinnedTargetRows(d *GeoPinned) []targetRow {
	if d == nil {
		return nil
	}
	thr := fmt.Sprintf("replication throughput, each cluster on its own core ≥ %.1f × one-core single-cluster publish", targetGeoVsPublish)
	keep := fmt.Sprintf("each cluster on its own core: B keeps up with A publishing at %.1f × one-core single-cluster publish", targetGeoVsPublish)
	if d.Baseline == nil || d.Max.Consumer == nil || d.AtTarget.Consumer == nil {
		return []targetRow{{name: thr}, {name: keep}}
	}
	base, got := d.Baseline.Report.PublishPS, d.Max.Consumer.Report.ConsumePS
	ratio := ratioOf(got, base)
	rows := []targetRow{{name: thr, measured: fmt.Sprintf("%.0f vs %.0f msg/s (A published %.0f while replicating)", got, base,
		d.Max.Producer.Report.PublishPS), ratio: fmt.Sprintf("%.2f", ratio), met: ratio >= targetGeoVsPublish, ran: true,
		why: "A's core also reads and forwards every message it stores, so A publishes less than alone; the pass at the target rate says whether replication keeps up."}}
	p := d.AtTarget
	ok, why := geoKeepsUp(p)
	pub, rcv := p.Producer.Report.PublishPS, p.Consumer.Report.ConsumePS
	return append(rows, targetRow{name: keep, ran: true, met: ok, why: why, ratio: fmt.Sprintf("%.2f", ratioOf(rcv, pub)),
		measured: fmt.Sprintf("%.0f of %.0f msg/s received, backlog %+.0f msg/s, replication p99 %s", rcv, pub,
			p.BacklogGrowthPS, us(lat(p.Consumer.Report.E2ELatency).P99))})
}

func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func orUnknown(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
