package ownership

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

func planner(now *time.Time) *Service {
	s := &Service{cfg: Config{Now: func() time.Time { return *now }}.withDefaults()}
	s.mu.unloaded = map[string]time.Time{}
	s.mu.pending = map[string]map[string]time.Time{}
	s.mu.heard = map[string]heardReport{}
	return s
}

// Pulsar's UniformLoadShedder: 20% of the difference moves, in the
// busiest bundles that each fit what is left to move plus 1000 msg/s.
func TestShedsBusiestBrokerByRate(t *testing.T) {
	now := time.Unix(1000, 0)
	s := planner(&now)
	s.cfg.LoadBalancer = DefaultLoadBalancerConfig()
	busy := BrokerData{Load: Load{MsgRateIn: 30000, LastStats: map[string]BundleStats{
		"t/ns/a": {MsgRateIn: 20000}, "t/ns/b": {MsgRateIn: 4000}, "t/ns/c": {MsgRateIn: 3000}, "t/ns/d": {MsgRateIn: 2000}, "t/ns/e": {MsgRateIn: 1000}}},
		NumBundles: 5, Bundles: []string{"t/ns/a", "t/ns/b", "t/ns/c", "t/ns/d", "t/ns/e"}}
	idle := BrokerData{Load: Load{MsgRateIn: 10000}, NumBundles: 1, Bundles: []string{"t/ns/z"}}
	// 20% of the 20,000/s difference is 4,000/s: a (20,000) is too big;
	// b (4,000 <= 4,000+1,000) leaves 0; c (3,000 > 0+1,000) is too big;
	// d too; e (1,000 <= 1,000) fits.
	plan := s.sheddingPlan(map[string]BrokerData{"busy": busy, "idle": idle})
	if got := bundlesOf(plan); got != "[t/ns/b t/ns/e]" {
		t.Fatalf("plan %v", plan)
	}
	// Within the grace period the same bundles are not shed again.
	now = now.Add(time.Minute)
	if got := bundlesOf(s.sheddingPlan(map[string]BrokerData{"busy": busy, "idle": idle})); got != "[t/ns/c t/ns/d]" {
		t.Fatalf("plan during the grace period %v", got)
	}
	// Balanced enough: 6,000 vs 4,000 is 50% of the lesser, not more.
	even := BrokerData{Load: Load{MsgRateIn: 6000, LastStats: map[string]BundleStats{"x": {MsgRateIn: 3000}, "y": {MsgRateIn: 3000}}},
		NumBundles: 2, Bundles: []string{"x", "y"}}
	if plan := s.sheddingPlan(map[string]BrokerData{"a": even, "b": {Load: Load{MsgRateIn: 4000}}}); len(plan) != 0 {
		t.Fatalf("shed with a 50%% difference: %v", plan)
	}
	// An imbalance whose fifth is under minUnloadMessage (1,000/s) moves
	// nothing: 900 vs 0 is 90,000% of an idle broker's 1/s, but only
	// 180/s to move.
	small := BrokerData{Load: Load{MsgRateIn: 900, LastStats: map[string]BundleStats{"p": {MsgRateIn: 600}, "q": {MsgRateIn: 300}}},
		NumBundles: 2, Bundles: []string{"p", "q"}}
	if plan := s.sheddingPlan(map[string]BrokerData{"a": small, "b": {}}); len(plan) != 0 {
		t.Fatalf("shed 180 msg/s against minUnloadMessage 1000: %v", plan)
	}
	// With no minimum (the fault suite's setting) the same moves what fits.
	s.cfg.LoadBalancer.MinUnloadMessage = 0
	if got := bundlesOf(s.sheddingPlan(map[string]BrokerData{"a": small, "b": {}})); got != "[p]" {
		t.Fatalf("no minimum: plan %v", got)
	}
	// A broker's only bundle is never shed.
	lone := BrokerData{Load: Load{MsgRateIn: 90000, LastStats: map[string]BundleStats{"z": {MsgRateIn: 90000}}}, NumBundles: 1, Bundles: []string{"z"}}
	if plan := s.sheddingPlan(map[string]BrokerData{"a": lone, "b": {}}); len(plan) != 0 {
		t.Fatalf("shed a broker's only bundle: %v", plan)
	}
}

// When message rates are even but bytes are not (big messages on one
// broker), throughput past loadBalancerMsgThroughputMultiplierDifference-
// ShedderThreshold times the least sheds by bytes, with
// minUnloadMessageThroughput; maxUnloadBundleNumPerShedding caps a pass.
func TestShedsByThroughputWhenRatesAreEven(t *testing.T) {
	now := time.Unix(1000, 0)
	s := planner(&now)
	s.cfg.LoadBalancer = DefaultLoadBalancerConfig()
	const mib = 1 << 20
	heavy := BrokerData{Load: Load{MsgRateIn: 1000, MsgThroughputIn: 50 * mib, LastStats: map[string]BundleStats{
		"h1": {MsgRateIn: 500, MsgThroughputIn: 40 * mib}, "h2": {MsgRateIn: 250, MsgThroughputIn: 6 * mib}, "h3": {MsgRateIn: 250, MsgThroughputIn: 4 * mib}}},
		NumBundles: 3, Bundles: []string{"h1", "h2", "h3"}}
	light := BrokerData{Load: Load{MsgRateIn: 1000, MsgThroughputIn: 10 * mib}, NumBundles: 1, Bundles: []string{"l1"}}
	// 50 MiB/s is 5 x 10: 20% of the 40 MiB/s difference is 8 MiB/s; h1 is
	// too big, h2 fits and leaves 2 MiB/s, h3 (4 MiB/s) does not fit.
	if got := bundlesOf(s.sheddingPlan(map[string]BrokerData{"heavy": heavy, "light": light})); got != "[h2]" {
		t.Fatalf("plan %v", got)
	}
	now = now.Add(time.Hour)
	s.cfg.LoadBalancer.MaxUnloadPercentage = 1
	s.cfg.LoadBalancer.MaxUnloadBundlesPerShedding = 1
	if got := bundlesOf(s.sheddingPlan(map[string]BrokerData{"heavy": heavy, "light": light})); got != "[h1]" {
		t.Fatalf("a whole difference to move, one bundle per pass: plan %v", got)
	}
	now = now.Add(time.Hour)
	s.cfg.LoadBalancer.MaxUnloadBundlesPerShedding = 0 // as Pulsar: none
	if plan := s.sheddingPlan(map[string]BrokerData{"heavy": heavy, "light": light}); len(plan) != 0 {
		t.Fatalf("maxUnloadBundleNumPerShedding 0: %v", plan)
	}
	s.cfg.LoadBalancer.MaxUnloadBundlesPerShedding = -1
	s.cfg.LoadBalancer.MsgThroughputMultiplierThreshold = 0
	if plan := s.sheddingPlan(map[string]BrokerData{"heavy": heavy, "light": light}); len(plan) != 0 {
		t.Fatalf("shedding by throughput turned off: %v", plan)
	}
	// Big messages at under 1 msg/s are still shed by throughput.
	s.cfg.LoadBalancer.MsgThroughputMultiplierThreshold = 4
	slow := heavy
	slow.MsgRateIn, slow.LastStats = 0.5, map[string]BundleStats{
		"h1": {MsgRateIn: 0.3, MsgThroughputIn: 40 * mib}, "h2": {MsgRateIn: 0.1, MsgThroughputIn: 6 * mib}, "h3": {MsgRateIn: 0.1, MsgThroughputIn: 4 * mib}}
	if got := bundlesOf(s.sheddingPlan(map[string]BrokerData{"heavy": slow, "light": {Load: Load{MsgThroughputIn: 10 * mib}, NumBundles: 1}})); got == "[]" {
		t.Fatal("throughput imbalance at under 1 msg/s: nothing shed")
	}
}

func bundlesOf(plan []shedBundle) string {
	var names []string
	for _, sb := range plan {
		names = append(names, sb.bundle)
	}
	return fmt.Sprint(names)
}

func TestShedsByBundleCountWhenIdle(t *testing.T) {
	now := time.Unix(1000, 0)
	s := planner(&now)
	full := BrokerData{NumBundles: 4, Bundles: []string{"t/ns/a", "t/ns/b", "t/ns/c", "t/ns/d"}}
	plan := s.sheddingPlan(map[string]BrokerData{"full": full, "new": {}})
	if len(plan) != 1 || plan[0].broker != "full" {
		t.Fatalf("plan %v", plan)
	}
	if plan := s.sheddingPlan(map[string]BrokerData{"a": {NumBundles: 2}, "b": {NumBundles: 1}}); len(plan) != 0 {
		t.Fatalf("shed for a difference of one bundle: %v", plan)
	}
}

func TestPlacementAvoidsOverloadedAndCountsPending(t *testing.T) {
	brokers := map[string]BrokerData{
		"hot":  {Load: Load{CPU: ResourceUsage{Usage: 95, Limit: 100}}},
		"cool": {NumBundles: 5},
		"warm": {NumBundles: 4},
	}
	if got := pickLeastLoaded(brokers, nil, 85); got != "warm" {
		t.Fatalf("picked %s", got)
	}
	pending := map[string]map[string]time.Time{"warm": {"x": {}, "y": {}}}
	if got := pickLeastLoaded(brokers, pending, 85); got != "cool" {
		t.Fatalf("picked %s with two bundles pending on warm", got)
	}
	all := map[string]BrokerData{"a": {Load: Load{CPU: ResourceUsage{Usage: 99, Limit: 100}}, NumBundles: 3},
		"b": {Load: Load{CPU: ResourceUsage{Usage: 90, Limit: 100}}, NumBundles: 1}}
	if got := pickLeastLoaded(all, nil, 85); got != "b" {
		t.Fatalf("all overloaded: picked %s", got)
	}
}

// TestLeaderSplitsBundleWithTooManyTopics runs the leader's split pass end
// to end: the owner's report names a bundle over the topic limit, the
// owner splits it in the policies and unloads it, and its topics land in
// the halves.
// TestPlacementSkipsABrokerWhoseReportsStopped: a broker cut from the
// metadata store keeps its registration until its session expires, and
// its last report (light, and soon older than its real load) made it the
// least loaded: the chaos suite's partition-broker-zk saw a shed bundle
// assigned to the cut broker again and again, its producer refused for
// 5.5 s until the session ended. A broker whose report has not changed for
// two report intervals takes no new bundle, loses the ones pending on it,
// and is no shedding target.
func TestPlacementSkipsABrokerWhoseReportsStopped(t *testing.T) {
	now := time.Unix(1000, 0)
	s := planner(&now)
	s.cfg.ReportInterval = time.Second
	busy := BrokerData{Load: Load{MsgRateIn: 900, LastStats: map[string]BundleStats{"t/ns/a": {MsgRateIn: 600}, "t/ns/b": {MsgRateIn: 300}}},
		NumBundles: 2, Bundles: []string{"t/ns/a", "t/ns/b"}, LastUpdate: 1}
	cut := BrokerData{NumBundles: 0, LastUpdate: 1}
	brokers := func() map[string]BrokerData { return map[string]BrokerData{"busy": busy, "cut": cut} }
	if got := s.placeLocked(brokers(), "t/ns/x"); got != "cut" {
		t.Fatalf("both reporting: placed on %s", got)
	}
	now, busy.LastUpdate = now.Add(1500*time.Millisecond), 2
	if got := s.placeLocked(brokers(), "t/ns/x"); got != "cut" {
		t.Fatalf("one report interval late: placed on %s (a pending bundle stays where it went)", got)
	}
	now, busy.LastUpdate = now.Add(time.Second), 3
	if got := s.placeLocked(brokers(), "t/ns/x"); got != "busy" {
		t.Fatalf("no report from cut for 2.5 s: pending bundle left on %s", got)
	}
	if got := s.placeLocked(brokers(), "t/ns/y"); got != "busy" {
		t.Fatalf("no report from cut for 2.5 s: new bundle placed on %s", got)
	}
	if plan := s.sheddingPlan(s.liveLocked(brokers())); len(plan) != 0 {
		t.Fatalf("shed toward a broker that stopped reporting: %v", plan)
	}
	now, cut.LastUpdate = now.Add(100*time.Millisecond), 4
	if got := s.placeLocked(brokers(), "t/ns/z"); got != "cut" {
		t.Fatalf("cut reports again: new bundle placed on %s", got)
	}
	// Every broker silent (the leader's own view may be what is stale):
	// placement goes on among all of them rather than refusing.
	now = now.Add(time.Minute)
	if got := s.placeLocked(brokers(), "t/ns/w"); got == "" {
		t.Fatal("no broker reporting: nothing placed")
	}
}

func TestLeaderSplitsBundleWithTooManyTopics(t *testing.T) {
	c := newCluster(t, 0, LoadBalancerConfig{})
	lb := LoadBalancerConfig{AutoBundleSplitEnabled: true, SplitInterval: 20 * time.Millisecond,
		NamespaceBundleMaxTopics: 10}
	svc := c.add(t, 0, lb)
	topic := "persistent://t/ns/split"
	c.resolve(t, svc, "t/ns", topic)
	b, _ := svc.OwnedBundleOf("t/ns", topic)
	c.setLoad(svc, Load{LastStats: map[string]BundleStats{b.String(): {Topics: 11}}})
	if err := svc.ReportNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.bounds["t/ns"]) == 6 })
	c.setLoad(svc, Load{})
	waitFor(t, func() bool { return !svc.OwnsTopic("t/ns", topic) })
	c.resolve(t, svc, "t/ns", topic)
	nb, _ := svc.OwnedBundleOf("t/ns", topic)
	if nb.Upper-nb.Lower != (b.Upper-b.Lower)/2 && nb.Upper-nb.Lower != (b.Upper-b.Lower)/2+1 {
		t.Fatalf("after the split the topic is in %s (was %s)", nb, b)
	}
}

func TestRegistrationSurvivesStaleNode(t *testing.T) {
	srv := metadata.NewMemoryServer()
	old := srv.NewSession()
	if _, _, err := old.Create(context.Background(), brokersRoot+"/b:8080", []byte(`{}`), metadata.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Config{Store: srv.NewSession(), BrokerID: "b:8080",
		WebServiceURL: "http://b:8080", PulsarServiceURL: "pulsar://b:6650",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	brokers, err := s.Brokers(context.Background())
	if err != nil || brokers["b:8080"].PulsarServiceURL != "pulsar://b:6650" {
		t.Fatalf("%v %v", brokers, err)
	}
}

// A broker cut from the metadata store at 25.44 s still had its last report
// (written just before) in the store when the leader's shedding pass ran at
// 27.09 s. The leader had not looked at the reports since its previous pass,
// 6 s earlier, so that report was new to it: "still reporting", and the
// least loaded. The pass unloaded a bundle from a healthy broker, placement
// sent it to the cut broker, and its producers were refused for 6.1 s until
// the session ended (chaos partition-broker-zk, CI of 6 Dec 17:28; the
// bound is the session timeout + 2 s). A pass must not shed while a
// broker's report is older than a report interval and some slack, by the
// report's own time.
func TestSheddingWaitsWhileAReportIsLate(t *testing.T) {
	now := time.Unix(1000, 0)
	s := planner(&now)
	s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	s.cfg.ReportInterval = time.Second
	// The chaos suite's shedder: no minimum imbalance, one bundle a pass.
	s.cfg.LoadBalancer = DefaultLoadBalancerConfig()
	s.cfg.LoadBalancer.MinUnloadMessage, s.cfg.LoadBalancer.MaxUnloadBundlesPerShedding = 0, 1
	at := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	busy := BrokerData{Load: Load{MsgRateIn: 900, LastStats: map[string]BundleStats{"t/ns/a": {MsgRateIn: 600}, "t/ns/b": {MsgRateIn: 300}}},
		NumBundles: 2, Bundles: []string{"t/ns/a", "t/ns/b"}}
	quiet := BrokerData{}
	brokers := func() map[string]BrokerData { return map[string]BrokerData{"busy": busy, "quiet": quiet} }
	busy.LastUpdate, quiet.LastUpdate = at(100*time.Millisecond), at(300*time.Millisecond)
	if plan := s.shedPass(brokers()); len(plan) == 0 {
		t.Fatal("both reports current: nothing shed from the busy broker")
	}
	now = now.Add(6 * time.Second) // the next pass; the leader has not looked since
	busy.LastUpdate, quiet.LastUpdate = at(100*time.Millisecond), at(1650*time.Millisecond)
	s.mu.unloaded = map[string]time.Time{}
	if plan := s.shedPass(brokers()); len(plan) != 0 {
		t.Fatalf("shed while the quiet broker's report is 1.65 s old (interval 1 s): %v", plan)
	}
	quiet.LastUpdate = at(200 * time.Millisecond) // it reports again
	if plan := s.shedPass(brokers()); len(plan) == 0 {
		t.Fatal("reports current again: nothing shed")
	}
	// A report without its time (LastUpdate 0) does not hold shedding up.
	s.mu.unloaded = map[string]time.Time{}
	untimed := brokers()
	untimed["untimed"] = BrokerData{NumBundles: 1, Bundles: []string{"t/ns/u"}}
	if plan := s.shedPass(untimed); len(plan) == 0 {
		t.Fatal("a report without a time stopped shedding")
	}
}
