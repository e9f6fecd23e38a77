package chaos

// The named fault scenarios. Each Inject is bounded: it applies its
// faults for a seeded random time and returns; Run.Execute then heals
// whatever is still broken (links, paused or stopped processes) and
// checks. Sessions are 4 s (brokers and bookies), so pauses and
// partitions of 6 s or more expire them.

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scenario is one named fault.
type Scenario struct {
	Name   string
	Doc    string
	Inject func(r *Run) error
	noMix  bool // not chosen by "random" (it is itself long or a mix)
	// Geo runs also produce to topics replicated to the second cluster
	// (geo.go), which a subscription there must receive in full.
	Geo bool
	// Txn runs also the transaction pipeline (txn.go).
	Txn bool
	// Bound, when set, is the longest unavailability issue 40 allows this
	// scenario: for producers on topics whose write set has a bookie to
	// spare (Qw > Qa) and on those with none (Qw = Qa). With -chaos.bounds
	// (make chaos-smoke) a run past it fails.
	Bound *Bound
}

// Bound is a scenario's allowed unavailability (see Scenario.Bound).
type Bound struct{ Spare, NoSpare time.Duration }

// check returns why v breaks the bound, or "".
func (b *Bound) check(v Verdict) string {
	switch {
	case b == nil:
		return ""
	case v.UnavailableSpare > b.Spare:
		return fmt.Sprintf("unavailable %.1f s on topics with a bookie to spare (Qw > Qa), bound %.1f s", v.UnavailableSpare.Seconds(), b.Spare.Seconds())
	case v.UnavailableNoSpare > b.NoSpare:
		return fmt.Sprintf("unavailable %.1f s on topics without a bookie to spare (Qw = Qa), bound %.1f s", v.UnavailableNoSpare.Seconds(), b.NoSpare.Seconds())
	}
	return ""
}

// Issue 40's bounds. resetBound: a bookie fault its writers hear of at once
// (a reset connection, a bookie turned read-only): nothing with a bookie to
// spare, 2 s without. stallBound: a bookie that stalls: nothing with a spare,
// the add timeout (bookkeeperClientTimeoutInSeconds, 10 s here) and 1 s
// without. brokerBound: broker faults the servers see: the session timeout
// (4 s here) and 2 s more.
var (
	resetBound = &Bound{Spare: time.Second, NoSpare: 2 * time.Second}
	stallBound = &Bound{Spare: time.Second, NoSpare: 11 * time.Second}
)

// brokerBound is issue 40's bound for broker faults the servers see.
var brokerBound = &Bound{Spare: 6 * time.Second, NoSpare: 6 * time.Second}

// Scenarios are every scenario, in report order.
var Scenarios = []*Scenario{
	{Name: "kill-bookie", Doc: "kill -9 a bookie, restart it 3-8 s later", Inject: killBookie, Bound: resetBound},
	{Name: "kill-broker", Doc: "kill -9 the broker owning a topic, restart it 2-6 s later", Inject: killBroker, Bound: brokerBound},
	{Name: "kill-zk-leader", Doc: "kill -9 the ZooKeeper leader, restart it 3-8 s later", Inject: killZKLeader},
	{Name: "kill-zk-follower", Doc: "kill -9 a ZooKeeper follower, restart it 3-8 s later", Inject: killZKFollower},
	{Name: "pause-broker", Doc: "SIGSTOP a topic's owner 6-12 s (its session expires, its bundles move), SIGCONT", Inject: pauseBroker},
	{Name: "pause-bookie", Doc: "SIGSTOP a bookie 3-10 s, SIGCONT", Inject: pauseBookie, Bound: stallBound},
	{Name: "partition-broker-zk", Doc: "cut a topic's owner from all of ZooKeeper 6-12 s", Inject: partitionBrokerZK, Bound: brokerBound},
	{Name: "partition-broker-bookies", Doc: "cut a topic's owner from 2 of the 4 bookies 4-10 s", Inject: partitionBrokerBookies},
	// One bookie cut: a write set of Qw > Qa keeps its ack quorum, so
	// issue 40's stall bound applies (with two cut it may not). Kept out
	// of random, whose seeds still pick what they picked before it.
	{Name: "partition-broker-bookie", Doc: "cut a topic's owner from 1 of the 4 bookies 4-10 s", Inject: partitionBrokerBookie,
		Bound: stallBound, noMix: true},
	{Name: "partition-zk-minority", Doc: "cut one ZooKeeper node (the leader half the time) from every other host 5-10 s", Inject: partitionZKMinority},
	{Name: "partition-client-broker", Doc: "cut the client from a topic's owner 4-10 s", Inject: partitionClientBroker},
	{Name: "pause-then-kill", Doc: "SIGSTOP a bookie, kill -9 another, restart it, then SIGCONT the first (JetStream's sequence)", Inject: pauseThenKill},
	{Name: "journal-fsync-error", Doc: "a bookie's journal fsyncs fail with EIO (engine/errorfs, through the bookie's test fault control) for 3-8 s (it turns read-only); then kill -9 and restart it", Inject: journalFsyncError, Bound: resetBound},
	{Name: "disk-full", Doc: "the 2 GiB tmpfs holding bk4's journal and ledgers is filled to 1 MiB free for 4-10 s, then emptied", Inject: diskFull, Bound: resetBound},
	{Name: "unload", Doc: "unload 3-6 random topics or whole namespaces, 0.5-3 s apart", Inject: unload},
	{Name: "split-bundle", Doc: "split the bundle of a topic in two and unload the halves", Inject: splitBundle},
	{Name: "kill-proxy", Doc: "kill -9 the proxy (a third of the topics' clients go through it), restart it 2-6 s later", Inject: killProxy},
	{Name: "cut-remote", Doc: "geo: cut the remote cluster c2 from every broker of c1 5-12 s while c1 replicates to it", Inject: cutRemote, noMix: true, Geo: true},
	{Name: "kill-remote", Doc: "geo: kill -9 the remote cluster c2's broker while c1 replicates to it, restart it 2-6 s later", Inject: killRemote, noMix: true, Geo: true},
	{Name: "txn-pipeline", Doc: "transactions: a consume-transform-produce loop (A to B and C, one transaction per batch) while 2-3 of: kill -9 a broker, kill -9 a bookie, unload pulsar/system (the coordinators move), staggered", Inject: txnFaults, noMix: true, Txn: true},
	{Name: "rolling-restart", Doc: "restart every broker, then every bookie, one at a time (SIGTERM)", Inject: rollingRestart, noMix: true,
		Bound: &Bound{Spare: 2 * time.Second, NoSpare: 2 * time.Second}},
	{Name: "random", Doc: "2-3 of the scenarios above (not rolling-restart) at once, staggered, chosen by the seed", noMix: true},
}

func init() { Scenarios[len(Scenarios)-1].Inject = randomMix }

// SmokeScenarios are what make chaos-smoke runs (1 seed each).
var SmokeScenarios = []string{"kill-broker", "partition-broker-zk", "kill-bookie", "kill-remote"}

// Lookup returns the scenarios named (comma-separated; "all" or "" for
// every one, "smoke" for the smoke set).
func Lookup(names string) ([]*Scenario, error) {
	switch names {
	case "", "all":
		return Scenarios, nil
	case "smoke":
		names = strings.Join(SmokeScenarios, ",")
	}
	var out []*Scenario
	for _, n := range strings.Split(names, ",") {
		i := slices.IndexFunc(Scenarios, func(s *Scenario) bool { return s.Name == strings.TrimSpace(n) })
		if i < 0 {
			return nil, fmt.Errorf("no scenario %q", n)
		}
		out = append(out, Scenarios[i])
	}
	return out, nil
}

func restartAfter(r *Run, p *Proc, lo, hi time.Duration) error {
	d := r.Sleep(lo, hi)
	r.Logf("restarting %s after %s", p.Name, d.Round(time.Millisecond))
	if err := p.Start(); err != nil {
		return err
	}
	return p.WaitReady(90 * time.Second)
}

func killBookie(r *Run) error {
	b := Pick(r, r.C.Bookies)
	r.Logf("kill -9 %s", b.Name)
	b.Kill()
	return restartAfter(r, b, 3*time.Second, 8*time.Second)
}

func killBroker(r *Run) error {
	b := r.VictimBroker()
	r.Logf("kill -9 %s", b.Name)
	b.Kill()
	return restartAfter(r, b, 2*time.Second, 6*time.Second)
}

// killProxy kills the proxy: its clients lose their connections and
// reconnect through it once it is back; nothing the brokers acknowledged
// through it may be lost, and its producers' resends must be deduplicated.
func killProxy(r *Run) error {
	r.Logf("kill -9 %s", r.C.Proxy.Name)
	r.C.Proxy.Kill()
	return restartAfter(r, r.C.Proxy, 2*time.Second, 6*time.Second)
}

func killZKLeader(r *Run) error {
	i := r.C.ZKLeader()
	if i < 0 {
		return fmt.Errorf("no ZooKeeper leader found")
	}
	r.Logf("kill -9 ZooKeeper leader %s", r.C.ZK[i].Name)
	r.C.ZK[i].Kill()
	return restartAfter(r, r.C.ZK[i], 3*time.Second, 8*time.Second)
}

func killZKFollower(r *Run) error {
	leader := r.C.ZKLeader()
	var followers []*Proc
	for i, p := range r.C.ZK {
		if i != leader {
			followers = append(followers, p)
		}
	}
	z := Pick(r, followers)
	r.Logf("kill -9 ZooKeeper follower %s", z.Name)
	z.Kill()
	return restartAfter(r, z, 3*time.Second, 8*time.Second)
}

func pauseFor(r *Run, p *Proc, lo, hi time.Duration) error {
	r.Logf("SIGSTOP %s", p.Name)
	if err := p.Pause(); err != nil {
		return err
	}
	d := r.Sleep(lo, hi)
	r.Logf("SIGCONT %s after %s", p.Name, d.Round(time.Millisecond))
	return p.Resume()
}

// pauseBroker pauses a topic owner past its session, and checks that once
// resumed it gives its bundles up (it logs so and stops) instead of going
// on writing: the old owner must not write after losing ownership (Pulsar
// #20094). The checker then proves nothing it wrote meanwhile was lost.
func pauseBroker(r *Run) error {
	b := r.VictimBroker()
	if err := pauseFor(r, b, 6*time.Second, 12*time.Second); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for b.Running() && !strings.Contains(b.Output(), "no longer owns any bundle") {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was paused past its session and still serves its bundles 15 s after resuming", b.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.Logf("%s gave its bundles up after resuming", b.Name)
	return nil
}

func pauseBookie(r *Run) error {
	return pauseFor(r, Pick(r, r.C.Bookies), 3*time.Second, 10*time.Second)
}

// cutFor cuts a from each of bs, waits, and heals those links.
func cutFor(r *Run, a *Proc, bs []*Proc, lo, hi time.Duration) error {
	var names []string
	for _, b := range bs {
		if err := r.C.Lab.Cut(a.Host.Name, b.Host.Name); err != nil {
			return err
		}
		names = append(names, b.Name)
	}
	r.Logf("cut %s from %v", a.Host.Name, names)
	d := r.Sleep(lo, hi)
	r.Logf("healing after %s", d.Round(time.Millisecond))
	for _, b := range bs {
		if err := r.C.Lab.Heal(a.Host.Name, b.Host.Name); err != nil {
			return err
		}
	}
	return nil
}

func partitionBrokerZK(r *Run) error {
	return cutFor(r, r.VictimBroker(), r.C.ZK, 6*time.Second, 12*time.Second)
}

func partitionBrokerBookies(r *Run) error { return cutFromBookies(r, 2) }

func partitionBrokerBookie(r *Run) error { return cutFromBookies(r, 1) }

// cutFromBookies cuts a topic's owner from n random bookies for 4-10 s.
func cutFromBookies(r *Run, n int) error {
	bs := slices.Clone(r.C.Bookies)
	r.Rng.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
	return cutFor(r, r.VictimBroker(), bs[:n], 4*time.Second, 10*time.Second)
}

func partitionZKMinority(r *Run) error {
	z := Pick(r, r.C.ZK)
	if l := r.C.ZKLeader(); l >= 0 && r.Rng.Intn(2) == 0 {
		z = r.C.ZK[l]
	}
	var others []*Proc
	for _, p := range r.C.All() {
		if p != z {
			others = append(others, p)
		}
	}
	return cutFor(r, z, others, 5*time.Second, 10*time.Second)
}

func partitionClientBroker(r *Run) error {
	b := r.VictimBroker()
	if err := r.C.Lab.Cut(r.C.Client.Name, b.Host.Name); err != nil {
		return err
	}
	r.Logf("cut the client from %s", b.Name)
	d := r.Sleep(4*time.Second, 10*time.Second)
	r.Logf("healing after %s", d.Round(time.Millisecond))
	return r.C.Lab.Heal(r.C.Client.Name, b.Host.Name)
}

func pauseThenKill(r *Run) error {
	bs := slices.Clone(r.C.Bookies)
	r.Rng.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
	paused, killed := bs[0], bs[1]
	r.Logf("SIGSTOP %s", paused.Name)
	if err := paused.Pause(); err != nil {
		return err
	}
	r.Sleep(time.Second, 4*time.Second)
	r.Logf("kill -9 %s", killed.Name)
	killed.Kill()
	if err := restartAfter(r, killed, time.Second, 4*time.Second); err != nil {
		return err
	}
	r.Sleep(0, 3*time.Second)
	r.Logf("SIGCONT %s", paused.Name)
	return paused.Resume()
}

func unload(r *Run) error {
	n := 3 + r.Rng.Intn(4)
	for range n {
		var path string
		if r.Rng.Intn(3) == 0 {
			path = "/admin/v2/namespaces/" + Pick(r, Namespaces).Name + "/unload"
		} else {
			path = "/admin/v2/" + strings.Replace(Pick(r, r.Topics).Name, "persistent://", "persistent/", 1) + "/unload"
		}
		r.Logf("PUT %s", path)
		if err := r.C.httpPut(path); err != nil {
			r.Logf("unload: %v", err) // a bundle moving already: not a failure of the system
		}
		r.Sleep(500*time.Millisecond, 3*time.Second)
	}
	return nil
}

// bundleOf finds the bundle range holding topic's hash, from the
// namespace's boundaries, by asking the broker (the topic's bundle is in
// its lookup-independent admin path .../{topic}/bundle).
func bundleOf(r *Run, topic string) (ns, bundle string, err error) {
	rest := strings.TrimPrefix(topic, "persistent://")
	parts := strings.Split(rest, "/")
	ns = parts[0] + "/" + parts[1]
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(r.C.adminURL() + "/admin/v2/namespaces/" + ns + "/bundles")
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var b struct{ Boundaries []string }
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || len(b.Boundaries) < 2 {
		return "", "", fmt.Errorf("bundles of %s: %v %v", ns, err, b.Boundaries)
	}
	i := r.Rng.Intn(len(b.Boundaries) - 1)
	return ns, b.Boundaries[i] + "_" + b.Boundaries[i+1], nil
}

func splitBundle(r *Run) error {
	ns, bundle, err := bundleOf(r, Pick(r, r.Topics).Name)
	if err != nil {
		return err
	}
	path := "/admin/v2/namespaces/" + ns + "/" + bundle + "/split?unload=true"
	r.Logf("PUT %s", path)
	if err := r.C.httpPut(path); err != nil {
		r.Logf("split: %v", err)
	}
	r.Sleep(2*time.Second, 5*time.Second)
	return nil
}

func rollingRestart(r *Run) error {
	for _, group := range [][]*Proc{r.C.Brokers, r.C.Bookies} {
		for _, p := range group {
			r.Logf("restarting %s (SIGTERM)", p.Name)
			p.Stop(30 * time.Second)
			if err := p.Start(); err != nil {
				return err
			}
			if err := p.WaitReady(90 * time.Second); err != nil {
				return err
			}
			r.Sleep(time.Second, 3*time.Second)
		}
	}
	return nil
}

func randomMix(r *Run) error {
	var pool []*Scenario
	for _, s := range Scenarios {
		if !s.noMix {
			pool = append(pool, s)
		}
	}
	r.Rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	pool = pool[:2+r.Rng.Intn(2)]
	var wg sync.WaitGroup
	errs := make([]error, len(pool))
	subs := make([]*Run, len(pool))
	defer func() { r.adopt(subs...) }() // the mixed faults' steps are the run's, for its timeline
	for i, s := range pool {
		sub := &Run{C: r.C, Scenario: s, Seed: r.Seed*100 + int64(i), Dir: r.Dir, Topics: r.Topics, logf: r.logf}
		subs[i] = sub
		sub.Rng = rand.New(rand.NewSource(sub.Seed))
		delay := time.Duration(r.Rng.Int63n(int64(3 * time.Second)))
		r.Logf("mixing %s (sub-seed %d) after %s", s.Name, sub.Seed, delay.Round(time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			errs[i] = s.Inject(sub)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			// Faults of a mix can collide (a pause of a broker another
			// one killed); healing restores everything either way.
			r.Logf("%s in the mix: %v", pool[i].Name, err)
		}
	}
	return nil
}

// txnFaults is txn-pipeline's mix: 2-3 of killing a broker, killing a
// bookie and moving the coordinators (unloading pulsar/system), staggered.
func txnFaults(r *Run) error {
	faults := []struct {
		name string
		do   func(*Run) error
	}{{"kill-broker", killBroker}, {"kill-bookie", killBookie}, {"move-coordinators", moveCoordinators}}
	r.Rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	faults = faults[:2+r.Rng.Intn(2)]
	var wg sync.WaitGroup
	subs := make([]*Run, len(faults))
	defer func() { r.adopt(subs...) }()
	for i, f := range faults {
		delay := time.Duration(r.Rng.Int63n(int64(3 * time.Second)))
		sub := &Run{C: r.C, Scenario: r.Scenario, Seed: r.Seed*100 + int64(i), Dir: r.Dir, Topics: r.Topics, logf: r.logf}
		subs[i] = sub
		sub.Rng = rand.New(rand.NewSource(sub.Seed))
		r.Logf("%s after %s", f.name, delay.Round(time.Millisecond))
		wg.Go(func() {
			time.Sleep(delay)
			if err := f.do(sub); err != nil {
				r.Logf("%s: %v", f.name, err)
			}
		})
	}
	wg.Wait()
	return nil
}

// moveCoordinators unloads pulsar/system: every transaction coordinator
// is closed where it is and loads from its log where the client looks it
// up next.
func moveCoordinators(r *Run) error {
	r.Logf("PUT /admin/v2/namespaces/pulsar/system/unload")
	if err := r.C.httpPut("/admin/v2/namespaces/pulsar/system/unload"); err != nil {
		r.Logf("unload pulsar/system: %v", err)
	}
	return nil
}

func journalFsyncError(r *Run) error {
	b := Pick(r, r.C.Bookies)
	r.Logf("journal fsyncs of %s fail", b.Name)
	if err := setFault(r.C.bookieDir(b), "journal-sync"); err != nil {
		return err
	}
	d := r.Sleep(3*time.Second, 8*time.Second)
	r.Logf("journal of %s good again after %s; kill -9 and restart it (a failed journal keeps it read-only until then)", b.Name, d.Round(time.Millisecond))
	if err := setFault(r.C.bookieDir(b), ""); err != nil {
		return err
	}
	b.Kill()
	return restartAfter(r, b, 0, time.Second)
}

func diskFull(r *Run) error {
	dir := r.C.tmpfs
	path, err := fill(dir, 1<<20)
	if err != nil {
		_ = os.Remove(path)
		return err
	}
	r.Logf("filled %s", dir)
	d := r.Sleep(4*time.Second, 10*time.Second)
	r.Logf("emptying %s after %s", dir, d.Round(time.Millisecond))
	return os.Remove(path)
}
