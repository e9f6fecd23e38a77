package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// TopicsPerNamespace: per namespace, 2 topics through the brokers directly
// and 1 through the proxy.
const TopicsPerNamespace = 3

// Run is one scenario with one seed on a running cluster.
type Run struct {
	C        *Cluster
	Scenario *Scenario
	Seed     int64
	Rng      *rand.Rand
	Dir      string // the run's workload config, log and results
	Topics   []TopicSpec
	Txn      *TxnSpec // the transaction pipeline (Scenario.Txn)
	Workload *Proc
	Verdict  Verdict
	Err      error // the run could not be carried out (a stall, a process that would not start)
	Took     time.Duration
	logf     func(string, ...any)
	// steps are the run's Logf lines, for its timeline (faults.log);
	// stepsMu guards them (faults of a mix log from goroutines of their own).
	stepsMu sync.Mutex
	steps   []Moment
	// logStart is each server log's size when the run began (keepLogs
	// copies what came after).
	logStart map[string]int64
}

// adopt adds the steps of sub-runs (a mix's faults) to r's, in time order.
func (r *Run) adopt(subs ...*Run) {
	r.stepsMu.Lock()
	defer r.stepsMu.Unlock()
	for _, sub := range subs {
		if sub != nil {
			sub.stepsMu.Lock()
			r.steps = append(r.steps, sub.steps...)
			sub.stepsMu.Unlock()
		}
	}
	slices.SortStableFunc(r.steps, func(a, b Moment) int { return a.At.Compare(b.At) })
}

// Logf logs a line of the run.
func (r *Run) Logf(format string, args ...any) {
	r.stepsMu.Lock()
	r.steps = append(r.steps, Moment{At: time.Now(), Where: "chaos", What: fmt.Sprintf(format, args...)})
	r.stepsMu.Unlock()
	r.logf("[%s seed %d] "+format, append([]any{r.Scenario.Name, r.Seed}, args...)...)
}

// Sleep pauses for a random time in [lo, hi).
func (r *Run) Sleep(lo, hi time.Duration) time.Duration {
	d := lo + time.Duration(r.Rng.Int63n(int64(hi-lo)+1))
	time.Sleep(d)
	return d
}

// Pick returns a random element.
func Pick[T any](r *Run, xs []T) T { return xs[r.Rng.Intn(len(xs))] }

// VictimBroker is the owner of a random topic of the run (or a random
// broker if no lookup answers).
func (r *Run) VictimBroker() *Proc {
	t := Pick(r, r.Topics)
	if o := r.C.Owner(t.Name); o != nil {
		return o
	}
	return Pick(r, r.C.Brokers)
}

// NewRun prepares a run's topics and directory.
func NewRun(c *Cluster, s *Scenario, seed int64, dir string, logf func(string, ...any)) *Run {
	r := &Run{C: c, Scenario: s, Seed: seed, Rng: rand.New(rand.NewSource(seed)),
		Dir: filepath.Join(dir, fmt.Sprintf("%s-%d", s.Name, seed)), logf: logf}
	for _, ns := range Namespaces {
		for i := range TopicsPerNamespace {
			group := "direct"
			if i == TopicsPerNamespace-1 {
				group = "proxy"
			}
			r.Topics = append(r.Topics, TopicSpec{Name: fmt.Sprintf("persistent://%s/%s-%d-t%d", ns.Name, s.Name, seed, i),
				Group: group, Dedup: ns.Dedup, Qw: ns.Qw, Qa: ns.Qa})
		}
	}
	if s.Geo {
		r.Topics = append(r.Topics, geoTopicSpecs(s.Name, seed)...)
	}
	if s.Txn {
		// A is the first topic, in the deduplicating namespace: its
		// producer's retries must not store a message twice.
		src := r.Topics[0].Name
		r.Txn = &TxnSpec{Source: src, SinkB: src + "-sink-b", SinkC: src + "-sink-c", Group: r.Topics[0].Group}
	}
	return r
}

// Execute runs the workload, the fault, the healing, the drain and the check.
func (r *Run) Execute() {
	start := time.Now()
	r.logStart = map[string]int64{}
	for _, p := range r.C.All() {
		if p != nil {
			if st, err := os.Stat(p.Log); err == nil {
				r.logStart[p.Log] = st.Size()
			}
		}
	}
	defer func() {
		r.Took = time.Since(start)
		r.stepsMu.Lock()
		_ = writeFaults(r.Dir, r.steps) // for the timeline; a run without a directory has none
		r.stepsMu.Unlock()
	}()
	if _, err := r.C.EnsureUp(); err != nil {
		r.Err = fmt.Errorf("before the run: %w", err)
		return
	}
	if err := checkSmallDisk(r.C.tmpfs); err != nil {
		r.Err = fmt.Errorf("before the run: %w", err)
		return
	}
	if r.Scenario.Geo {
		if err := r.C.EnsureRemote(); err != nil {
			r.Err = fmt.Errorf("before the run: %w", err)
			return
		}
	}
	if err := r.startWorkload(); err != nil {
		r.Err = err
		return
	}
	defer r.Workload.Kill()
	if err := r.waitProgress(10, 90*time.Second); err != nil {
		r.Err = fmt.Errorf("before the fault: %w", err)
		return
	}
	r.Logf("workload running; injecting")
	if err := r.Scenario.Inject(r); err != nil {
		r.Err = fmt.Errorf("injecting: %w", err)
	}
	if err := r.C.Heal(); err != nil {
		r.Err = fmt.Errorf("healing: %w", err)
		return
	}
	if err := r.waitProgress(10, 120*time.Second); err != nil && r.Err == nil {
		r.Err = fmt.Errorf("after healing: %w", err)
	}
	res, err := r.stopWorkload()
	if err != nil {
		r.Err = err
		return
	}
	r.Verdict = Check(res)
	if !r.Verdict.Drained && r.Verdict.OK() {
		r.Verdict.problem("the workload did not drain (but nothing acknowledged is missing)")
	}
}

func (r *Run) startWorkload() error {
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return err
	}
	cfg := WorkloadConfig{URLs: r.C.ServiceURLs(), Topics: r.Topics, Status: filepath.Join(r.Dir, "status.json"),
		Results: filepath.Join(r.Dir, "results.json"), SendInterval: 20 * time.Millisecond, DrainTimeout: 90 * time.Second,
		Txn: r.Txn}
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(r.Dir, "workload.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r.Workload = &Proc{Name: "workload", Host: r.C.Client, Prog: exe, Args: []string{path},
		Env: []string{"MAGNETAR_CHAOS_WORKLOAD=1"}, Log: filepath.Join(r.Dir, "workload.log"),
		Ready: func(p *Proc) bool { return strings.Contains(p.Output(), "chaos workload: producing") }}
	if err := r.Workload.Start(); err != nil {
		return err
	}
	return r.Workload.WaitReady(3 * time.Minute)
}

func (r *Run) status() map[string]int {
	out := map[string]int{}
	raw, err := os.ReadFile(filepath.Join(r.Dir, "status.json"))
	if err == nil {
		_ = json.Unmarshal(raw, &out)
	}
	return out
}

// waitProgress waits until every topic's acknowledged count grew by n.
func (r *Run) waitProgress(n int, timeout time.Duration) error {
	from := r.status()
	deadline := time.Now().Add(timeout)
	for {
		cur := r.status()
		var behind []string
		for _, t := range r.Topics {
			if cur[t.Name] < from[t.Name]+n {
				behind = append(behind, t.Name)
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if !r.Workload.Running() {
			return fmt.Errorf("the workload exited; log %s:\n%s", r.Workload.Log, tail(r.Workload.Output(), 3000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no progress in %s on %v", timeout, behind)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *Run) stopWorkload() (*Results, error) {
	r.Workload.Stop(3 * time.Minute)
	raw, err := os.ReadFile(filepath.Join(r.Dir, "results.json"))
	if err != nil {
		return nil, fmt.Errorf("workload results: %w; log %s:\n%s", err, r.Workload.Log, tail(r.Workload.Output(), 3000))
	}
	var res Results
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Failed reports whether the run broke a guarantee or could not finish.
func (r *Run) Failed() bool { return r.Err != nil || !r.Verdict.OK() }
