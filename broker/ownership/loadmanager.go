package ownership

// The leader's load manager.
//
// Placement (leastLoaded): among brokers still reporting (a broker whose
// report has not changed for two report intervals is most likely cut
// from the metadata store: liveLocked) and not overloaded (highest resource
// use under loadBalancerBrokerOverloadedThresholdPercentage, unless all
// are), the one with the lowest score
//
//	msgRateIn + msgRateOut + bundles * max(average message rate per bundle, 1)
//
// where bundles counts those it reported plus those the leader assigned
// to it since (Pulsar's preallocated bundles): without them every
// assignment between two reports would go to the same broker. In an idle
// cluster the score is the bundle count, so bundles spread evenly.
//
// Shedding (shedLoad, every loadBalancerSheddingIntervalMinutes, among
// brokers still reporting) is Pulsar's UniformLoadShedder: when the
// busiest broker's message rate exceeds the least busy one's by more than
// loadBalancerMsgRateDifferenceShedderThreshold percent of the latter (an
// idle broker counts as 1 msg/s), maxUnloadPercentage of the difference
// is to move, and only if that is at least minUnloadMessage msg/s; the
// busiest broker's bundles, busiest first, are unloaded when each is at
// most what is still to move plus 1000 msg/s (so under light load, with
// no minimum, every bundle qualifies: maxUnloadBundleNumPerShedding then
// keeps a pass small). Otherwise, when its throughput is more than
// loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold times the
// least one's, the same by bytes (minUnloadMessageThroughput). At most
// maxUnloadBundleNumPerShedding bundles per pass, never a broker's last
// one. When rates are all negligible, a broker holding two or more
// bundles more than the emptiest one gives one up (ours: so a broker that
// joins an idle cluster gets work too). A shed bundle is not shed again
// for loadBalancerSheddingGracePeriodMinutes. A pass sheds nothing while a
// broker's report is late by its own time (lateReport: more than a report
// interval and a half old): that broker may be cut from the metadata
// store, and would take the shed bundle without being able to serve it.
//
// Splitting (splitBundles): a bundle with more topics, sessions, message
// rate or bandwidth than the loadBalancerNamespaceBundleMax* thresholds
// is split in half by its owner, up to loadBalancerNamespaceMaximumBundles
// per namespace.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// LoadBalancerConfig carries Pulsar's loadBalancer* settings.
type LoadBalancerConfig struct {
	SheddingEnabled     bool          // loadBalancerSheddingEnabled (true)
	SheddingInterval    time.Duration // loadBalancerSheddingIntervalMinutes (1 min)
	SheddingGracePeriod time.Duration // loadBalancerSheddingGracePeriodMinutes (30 min)
	// loadBalancerMsgRateDifferenceShedderThreshold (50 %; 0 turns
	// shedding by message rate off).
	MsgRateDifferenceThreshold float64
	// loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold (4;
	// 0 turns shedding by throughput off).
	MsgThroughputMultiplierThreshold float64
	MaxUnloadPercentage              float64 // maxUnloadPercentage (0.2)
	// minUnloadMessage (1000 msg/s) and minUnloadMessageThroughput
	// (1 MiB/s): a smaller imbalance moves nothing. Zero is no minimum.
	MinUnloadMessage           float64
	MinUnloadMessageThroughput float64
	// maxUnloadBundleNumPerShedding (-1: no limit; 0 unloads nothing).
	// The shedder's settings have Pulsar's defaults in
	// DefaultLoadBalancerConfig; zero is a setting of its own.
	MaxUnloadBundlesPerShedding    int
	BrokerOverloadedThreshold      float64       // loadBalancerBrokerOverloadedThresholdPercentage (85 %)
	AutoBundleSplitEnabled         bool          // loadBalancerAutoBundleSplitEnabled (true)
	SplitInterval                  time.Duration // loadBalancerSplitIntervalMinutes (1 min)
	NamespaceBundleMaxTopics       int           // loadBalancerNamespaceBundleMaxTopics (1000)
	NamespaceBundleMaxSessions     int           // loadBalancerNamespaceBundleMaxSessions (1000)
	NamespaceBundleMaxMsgRate      float64       // loadBalancerNamespaceBundleMaxMsgRate (30000)
	NamespaceBundleMaxBandwidthMiB float64       // loadBalancerNamespaceBundleMaxBandwidthMbytes (100)
	NamespaceMaximumBundles        int           // loadBalancerNamespaceMaximumBundles (128)
}

// DefaultLoadBalancerConfig is Pulsar's defaults.
func DefaultLoadBalancerConfig() LoadBalancerConfig {
	return LoadBalancerConfig{SheddingEnabled: true, AutoBundleSplitEnabled: true, MsgRateDifferenceThreshold: 50,
		MsgThroughputMultiplierThreshold: 4, MaxUnloadPercentage: 0.2, MinUnloadMessage: 1000, MinUnloadMessageThroughput: 1 << 20,
		MaxUnloadBundlesPerShedding: -1}.withDefaults()
}

func (c LoadBalancerConfig) withDefaults() LoadBalancerConfig {
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDur(&c.SheddingInterval, time.Minute)
	setDur(&c.SheddingGracePeriod, 30*time.Minute)
	setDur(&c.SplitInterval, time.Minute)
	setF := func(f *float64, v float64) {
		if *f <= 0 {
			*f = v
		}
	}
	setF(&c.BrokerOverloadedThreshold, 85)
	setF(&c.NamespaceBundleMaxMsgRate, 30000)
	setF(&c.NamespaceBundleMaxBandwidthMiB, 100)
	if c.NamespaceBundleMaxTopics <= 0 {
		c.NamespaceBundleMaxTopics = 1000
	}
	if c.NamespaceBundleMaxSessions <= 0 {
		c.NamespaceBundleMaxSessions = 1000
	}
	if c.NamespaceMaximumBundles <= 0 {
		c.NamespaceMaximumBundles = 128
	}
	return c
}

// leastLoaded picks the broker that should take bundle b, and records
// the assignment as pending until that broker reports it. A bundle
// already pending goes to the same broker again: it is asked about again
// when a second lookup comes before the owner's create reached the
// cache, and choosing anew would count it pending on two brokers.
func (s *Service) leastLoaded(ctx context.Context, b Bundle) (string, BrokerData, error) {
	brokers, err := s.Brokers(ctx)
	if err != nil {
		return "", BrokerData{}, fmt.Errorf("list brokers: %w", err)
	}
	if len(brokers) == 0 {
		return "", BrokerData{}, errors.New("no broker is registered")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.placeLocked(brokers, b.String())
	return id, brokers[id], nil
}

// placeLocked is leastLoaded's decision among the brokers still
// reporting (liveLocked).
func (s *Service) placeLocked(brokers map[string]BrokerData, bundle string) string {
	live := s.liveLocked(brokers)
	s.prunePendingLocked(live)
	if id, ok := pendingOwner(s.mu.pending, bundle); ok {
		return id
	}
	id := pickLeastLoaded(live, s.mu.pending, s.cfg.LoadBalancer.BrokerOverloadedThreshold)
	if s.mu.pending[id] == nil {
		s.mu.pending[id] = map[string]time.Time{}
	}
	s.mu.pending[id][bundle] = s.cfg.Now()
	return id
}

// heardReport is when the leader last saw a broker's report change, by
// the leader's own clock (so clock skew between brokers does not matter).
type heardReport struct {
	lastUpdate int64
	at         time.Time
}

// reportSilence is how long a broker's report may stay unchanged before
// the leader stops placing bundles on it: two report intervals (reports
// are written every interval whether or not anything changed), at least
// 2 s so a loaded host's late write does not count.
func (s *Service) reportSilence() time.Duration {
	return max(2*s.cfg.ReportInterval, 2*time.Second)
}

// reportLate is the age, by a report's own time, past which shedding
// waits for it (lateReport): a report interval and half of one more, at
// least 500 ms of slack for a loaded host's late write.
func (s *Service) reportLate() time.Duration {
	return s.cfg.ReportInterval + max(s.cfg.ReportInterval/2, 500*time.Millisecond)
}

// liveLocked returns the brokers whose reports still change. A broker cut
// from the metadata store keeps its registration until its session
// expires, with a last report that soon understates its load: placed
// there, a bundle cannot be acquired, and its clients are refused until
// the session ends. When no broker looks live (the leader itself may be
// the one cut off) it returns them all.
func (s *Service) liveLocked(brokers map[string]BrokerData) map[string]BrokerData {
	now := s.cfg.Now()
	for id := range s.mu.heard {
		if _, ok := brokers[id]; !ok {
			delete(s.mu.heard, id)
		}
	}
	live := make(map[string]BrokerData, len(brokers))
	for id, d := range brokers {
		h, ok := s.mu.heard[id]
		if !ok || h.lastUpdate != d.LastUpdate {
			h = heardReport{lastUpdate: d.LastUpdate, at: now}
			s.mu.heard[id] = h
		}
		if now.Sub(h.at) <= s.reportSilence() {
			live[id] = d
		}
	}
	if len(live) == 0 {
		return brokers
	}
	return live
}

// prunePendingLocked drops pending assignments a broker has reported (or
// that are too old to matter: the broker never took them).
func (s *Service) prunePendingLocked(brokers map[string]BrokerData) {
	// At least a second: with short report intervals (and a loaded host)
	// an assignment would otherwise be forgotten before the broker that
	// took it reported it, and placement would pile bundles on one broker.
	horizon := s.cfg.Now().Add(-max(3*s.cfg.ReportInterval, time.Second))
	for id, bundles := range s.mu.pending {
		data, ok := brokers[id]
		if !ok {
			delete(s.mu.pending, id)
			continue
		}
		for name, at := range bundles {
			if at.Before(horizon) || slices.Contains(data.Bundles, name) {
				delete(bundles, name)
			}
		}
	}
}

// pendingOwner is the broker bundle is pending on, if any (after
// prunePendingLocked, every broker named is registered).
func pendingOwner(pending map[string]map[string]time.Time, bundle string) (string, bool) {
	for id, bundles := range pending {
		if _, ok := bundles[bundle]; ok {
			return id, true
		}
	}
	return "", false
}

// pickLeastLoaded is the placement rule (see the file comment); ties go
// to the smallest id, so placement is deterministic.
func pickLeastLoaded(brokers map[string]BrokerData, pending map[string]map[string]time.Time, overloaded float64) string {
	ids := make([]string, 0, len(brokers))
	totalRate, totalBundles := 0.0, 0
	for id, d := range brokers {
		ids = append(ids, id)
		totalRate += d.msgRate()
		totalBundles += d.NumBundles
	}
	sort.Strings(ids)
	perBundle := 1.0
	if totalBundles > 0 {
		perBundle = max(totalRate/float64(totalBundles), 1)
	}
	best, bestScore := "", math.Inf(1)
	for _, allowOverloaded := range []bool{false, true} {
		for _, id := range ids {
			d := brokers[id]
			if !allowOverloaded && d.maxUsage() > overloaded {
				continue
			}
			score := d.msgRate() + float64(d.NumBundles+len(pending[id]))*perBundle
			if score < bestScore {
				best, bestScore = id, score
			}
		}
		if best != "" {
			return best
		}
	}
	return ids[0]
}

// negligibleRate is the message rate under which shedding balances bundle
// counts instead of rates.
const negligibleRate = 1.0

// shedLoad runs one shedding pass (see the file comment).
func (s *Service) shedLoad(ctx context.Context) {
	brokers, err := s.Brokers(ctx)
	if err != nil {
		return
	}
	for _, sb := range s.shedPass(brokers) {
		owner := brokers[sb.broker]
		if err := s.unloadAt(ctx, owner, sb.bundle, "unload"); err != nil {
			s.log.Warn("load shedding: unload failed", "bundle", sb.bundle, "broker", sb.broker, "err", err)
			continue
		}
		s.log.Info("load shedding: bundle unloaded", "bundle", sb.bundle, "from", sb.broker, "reason", sb.reason)
	}
}

type shedBundle struct{ broker, bundle, reason string }

// shedPass is one shedding pass's plan over the registered brokers:
// nothing when fewer than two still report, or while one's report is late
// (lateReport).
func (s *Service) shedPass(brokers map[string]BrokerData) []shedBundle {
	s.mu.Lock()
	live := s.liveLocked(brokers)
	s.mu.Unlock()
	if len(live) < 2 {
		return nil
	}
	if id, age, late := s.lateReport(live); late {
		s.log.Info("load shedding skipped: a broker's load report is late, and it may be cut off from the metadata store",
			"broker", id, "report_age", age.Round(time.Millisecond), "report_interval", s.cfg.ReportInterval)
		return nil
	}
	return s.sheddingPlan(live)
}

// lateReport finds a broker whose report is older, by its own time, than
// reportLate. Shedding
// waits then: a broker cut from the metadata store still looks live for
// two intervals after the leader last saw its report change (liveLocked),
// and longer when the leader had not looked for a while, with a report
// that soon understates its load; a pass then unloads a healthy broker's
// bundle, placement sends it to the cut one, and its clients are refused
// until that broker's session ends. The report's own time is the broker's
// clock: skew beyond the slack delays shedding (which the log line says),
// never placement.
func (s *Service) lateReport(brokers map[string]BrokerData) (string, time.Duration, bool) {
	limit, now := s.reportLate(), s.cfg.Now()
	for _, id := range slices.Sorted(maps.Keys(brokers)) {
		if brokers[id].LastUpdate == 0 {
			continue // a report without its time: nothing to judge by
		}
		if age := now.Sub(time.UnixMilli(brokers[id].LastUpdate)); age > limit {
			return id, age, true
		}
	}
	return "", 0, false
}

// sheddingPlan decides which bundles to unload; it records them for the
// grace period.
func (s *Service) sheddingPlan(brokers map[string]BrokerData) []shedBundle {
	busiest, _ := extremes(brokers, BrokerData.msgRate)
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, at := range s.mu.unloaded {
		if now.Sub(at) > s.cfg.LoadBalancer.SheddingGracePeriod {
			delete(s.mu.unloaded, name)
		}
	}
	plan := s.uniformPlanLocked(brokers)
	if len(plan) == 0 && brokers[busiest].msgRate() < negligibleRate {
		plan = s.countPlanLocked(brokers)
	}
	for _, sb := range plan {
		s.mu.unloaded[sb.bundle] = now
	}
	return plan
}

// countPlanLocked balances bundle counts in an idle cluster: one bundle
// from a broker with two or more than the emptiest.
func (s *Service) countPlanLocked(brokers map[string]BrokerData) []shedBundle {
	maxID, minID := extremes(brokers, func(d BrokerData) float64 { return float64(d.NumBundles) })
	if brokers[maxID].NumBundles-brokers[minID].NumBundles < 2 {
		return nil
	}
	for _, name := range brokers[maxID].Bundles {
		if _, recent := s.mu.unloaded[name]; !recent {
			return []shedBundle{{maxID, name, fmt.Sprintf("%d bundles vs %d on %s", brokers[maxID].NumBundles, brokers[minID].NumBundles, minID)}}
		}
	}
	return nil
}

// sheddingMetric is what the uniform shedder balances: a broker's total
// and each of its bundles'.
type sheddingMetric struct {
	name     string
	broker   func(BrokerData) float64
	bundle   func(BundleStats) float64
	exceeded func(lb LoadBalancerConfig, maxV, minV float64) bool
	minimum  func(lb LoadBalancerConfig) float64
	unit     string
}

var (
	byMsgRate = sheddingMetric{
		name:   "message rate",
		broker: BrokerData.msgRate,
		bundle: func(st BundleStats) float64 { return st.MsgRateIn + st.MsgRateOut },
		exceeded: func(lb LoadBalancerConfig, maxV, minV float64) bool {
			return lb.MsgRateDifferenceThreshold > 0 && 100*(maxV-minV)/minV > lb.MsgRateDifferenceThreshold
		},
		minimum: func(lb LoadBalancerConfig) float64 { return lb.MinUnloadMessage },
		unit:    "/s",
	}
	byThroughput = sheddingMetric{
		name:   "throughput",
		broker: func(d BrokerData) float64 { return d.MsgThroughputIn + d.MsgThroughputOut },
		bundle: func(st BundleStats) float64 { return st.MsgThroughputIn + st.MsgThroughputOut },
		exceeded: func(lb LoadBalancerConfig, maxV, minV float64) bool {
			return lb.MsgThroughputMultiplierThreshold > 0 && maxV/minV > lb.MsgThroughputMultiplierThreshold
		},
		minimum: func(lb LoadBalancerConfig) float64 { return lb.MinUnloadMessageThroughput },
		unit:    " B/s",
	}
)

// uniformPlanLocked is Pulsar's UniformLoadShedder (see the file
// comment): by message rate when that imbalance is past its threshold,
// else by throughput.
func (s *Service) uniformPlanLocked(brokers map[string]BrokerData) []shedBundle {
	lb := s.cfg.LoadBalancer
	for _, m := range []sheddingMetric{byMsgRate, byThroughput} {
		maxID, minID := extremes(brokers, m.broker)
		maxV, minV := m.broker(brokers[maxID]), m.broker(brokers[minID])
		reason := fmt.Sprintf("%s %.0f%s vs %.0f%s on %s", m.name, maxV, m.unit, minV, m.unit, minID)
		if math.Abs(minV) < 1e-6 {
			minV = 1 // an idle broker: the difference is relative to 1
		}
		if !m.exceeded(lb, maxV, minV) {
			continue
		}
		return s.pickSheddableLocked(brokers[maxID], maxID, m, (maxV-minV)*lb.MaxUnloadPercentage, reason)
	}
	return nil
}

// overshoot is how far past what is still to move one bundle may go
// (Pulsar's fixed delta, in the metric's own unit).
const overshoot = 1000

// pickSheddableLocked chooses the busiest broker's bundles that together
// move about toMove of metric m.
func (s *Service) pickSheddableLocked(d BrokerData, maxID string, m sheddingMetric, toMove float64, reason string) []shedBundle {
	lb := s.cfg.LoadBalancer
	if d.NumBundles < 2 || toMove < m.minimum(lb) {
		return nil
	}
	var plan []shedBundle
	for _, name := range bundlesBy(d, m.bundle) {
		if len(plan) == d.NumBundles-1 || (lb.MaxUnloadBundlesPerShedding >= 0 && len(plan) >= lb.MaxUnloadBundlesPerShedding) {
			break
		}
		v := m.bundle(d.LastStats[name])
		if _, recent := s.mu.unloaded[name]; recent || v <= 0 || v > toMove+overshoot {
			continue
		}
		plan = append(plan, shedBundle{maxID, name, reason})
		toMove -= v
	}
	return plan
}

// extremes returns the ids with the highest and lowest metric (ties by id).
func extremes(brokers map[string]BrokerData, metric func(BrokerData) float64) (maxID, minID string) {
	ids := make([]string, 0, len(brokers))
	for id := range brokers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	maxID, minID = ids[0], ids[0]
	for _, id := range ids[1:] {
		if metric(brokers[id]) > metric(brokers[maxID]) {
			maxID = id
		}
		if metric(brokers[id]) < metric(brokers[minID]) {
			minID = id
		}
	}
	return maxID, minID
}

// bundlesBy lists a broker's bundles by metric, highest first.
func bundlesBy(d BrokerData, metric func(BundleStats) float64) []string {
	names := append([]string{}, d.Bundles...)
	sort.SliceStable(names, func(i, j int) bool { return metric(d.LastStats[names[i]]) > metric(d.LastStats[names[j]]) })
	return names
}

// splitBundles asks owners to split bundles past the thresholds.
func (s *Service) splitBundles(ctx context.Context) {
	brokers, err := s.Brokers(ctx)
	if err != nil {
		return
	}
	lb := s.cfg.LoadBalancer
	perNamespace := map[string]int{}
	for _, d := range brokers {
		for _, name := range d.Bundles {
			perNamespace[namespaceOf(name)]++
		}
	}
	for id, d := range brokers {
		for name, st := range d.LastStats {
			reason := splitReason(st, lb)
			if reason == "" || perNamespace[namespaceOf(name)] >= lb.NamespaceMaximumBundles {
				continue
			}
			if err := s.unloadAt(ctx, d, name, "split"); err != nil {
				s.log.Warn("bundle split failed", "bundle", name, "broker", id, "err", err)
				continue
			}
			perNamespace[namespaceOf(name)]++
			s.log.Info("bundle split requested", "bundle", name, "broker", id, "reason", reason)
		}
	}
}

func splitReason(st BundleStats, lb LoadBalancerConfig) string {
	switch {
	case st.Topics > lb.NamespaceBundleMaxTopics:
		return fmt.Sprintf("%d topics > %d", st.Topics, lb.NamespaceBundleMaxTopics)
	case st.ProducerCount+st.ConsumerCount > lb.NamespaceBundleMaxSessions:
		return fmt.Sprintf("%d sessions > %d", st.ProducerCount+st.ConsumerCount, lb.NamespaceBundleMaxSessions)
	case st.MsgRateIn+st.MsgRateOut > lb.NamespaceBundleMaxMsgRate:
		return fmt.Sprintf("%.0f msg/s > %.0f", st.MsgRateIn+st.MsgRateOut, lb.NamespaceBundleMaxMsgRate)
	case (st.MsgThroughputIn+st.MsgThroughputOut)/(1<<20) > lb.NamespaceBundleMaxBandwidthMiB:
		return fmt.Sprintf("%.0f MiB/s > %.0f", (st.MsgThroughputIn+st.MsgThroughputOut)/(1<<20), lb.NamespaceBundleMaxBandwidthMiB)
	}
	return ""
}

// namespaceOf is "tenant/ns" of "tenant/ns/0x.._0x..".
func namespaceOf(bundle string) string {
	if i := strings.LastIndexByte(bundle, '/'); i > 0 {
		return bundle[:i]
	}
	return bundle
}

// ParseBundle parses "tenant/ns/0xlower_0xupper".
func ParseBundle(s string) (Bundle, error) {
	ns := namespaceOf(s)
	if ns == s || strings.Count(ns, "/") != 1 {
		return Bundle{}, fmt.Errorf("bundle %q: want tenant/namespace/0xLOWER_0xUPPER", s)
	}
	r, err := ParseRange(s[len(ns)+1:])
	if err != nil {
		return Bundle{}, err
	}
	return Bundle{Namespace: ns, Range: r}, nil
}

// unloadAt unloads (op "unload") or splits (op "split") a bundle on its
// owner: locally when that is this broker, else through the owner's
// admin API, as pulsar-admin would.
func (s *Service) unloadAt(ctx context.Context, owner BrokerData, bundle, op string) error {
	b, err := ParseBundle(bundle)
	if err != nil {
		return err
	}
	target := owner.WebServiceURL
	if s.cfg.PeerTLS && owner.WebServiceURLTLS != "" {
		target = owner.WebServiceURLTLS
	}
	return s.opAt(ctx, target, b, op)
}

func (s *Service) opAt(ctx context.Context, ownerHTTP string, b Bundle, op string) error {
	if ownerHTTP == s.cfg.WebServiceURL || (s.cfg.WebServiceURLTLS != "" && ownerHTTP == s.cfg.WebServiceURLTLS) {
		if op == "split" {
			return s.Split(ctx, b)
		}
		return s.Unload(ctx, b)
	}
	// A v1 namespace ("property/cluster/ns") keeps "cluster/ns" one segment.
	tenant, ns, _ := strings.Cut(b.Namespace, "/")
	url := ownerHTTP + "/admin/v2/namespaces/" + tenant + "/" + strings.ReplaceAll(ns, "/", "%2F") + "/" + b.Name() + "/" + op
	if op == "split" {
		url += "?unload=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusPreconditionFailed {
		// The owner the store named does not hold the bundle (it released
		// it after the store was read): as its own Unload would say.
		return fmt.Errorf("%s %s: HTTP %s: %w", op, url, resp.Status, ErrNotOwned)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %s", op, url, resp.Status)
	}
	return nil
}

// UnloadAnywhere unloads a bundle wherever it is owned (nothing to do
// when it is not owned).
func (s *Service) UnloadAnywhere(ctx context.Context, b Bundle) error {
	return s.anywhere(ctx, b, "unload")
}

// SplitAnywhere splits a bundle on its owner.
func (s *Service) SplitAnywhere(ctx context.Context, b Bundle) error {
	return s.anywhere(ctx, b, "split")
}

// anywhereTries bounds how often an unload follows a bundle that moved
// between reading its owner and asking that owner.
const anywhereTries = 3

func (s *Service) anywhere(ctx context.Context, b Bundle, op string) error {
	for try := 1; ; try++ {
		err := s.anywhereOnce(ctx, b, op)
		// An owner that no longer holds the bundle released it after the
		// store was read (shedding, its own unload): read the store again,
		// since an unload of a bundle nobody owns is done.
		if op != "unload" || !errors.Is(err, ErrNotOwned) || try == anywhereTries {
			return err
		}
	}
}

func (s *Service) anywhereOnce(ctx context.Context, b Bundle, op string) error {
	// The store, not the cache: an admin operation right after a lookup
	// must see the owner that lookup made, and the cache learns of it only
	// when its watch fires.
	od, found, err := s.ownerInStore(ctx, b)
	if err != nil {
		return err
	}
	if !found {
		if op == "split" {
			return fmt.Errorf("bundle %s: %w by any broker: look a topic of it up first", b, ErrNotOwned)
		}
		return nil
	}
	target := od.HTTPURL
	if s.cfg.PeerTLS && od.HTTPURLTLS != "" {
		target = od.HTTPURLTLS
	}
	return s.opAt(ctx, target, b, op)
}

// Bundles returns a namespace's bundles, in order.
func (s *Service) Bundles(ctx context.Context, ns string) ([]Bundle, error) {
	bounds, err := s.cfg.Boundaries(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := make([]Bundle, 0, len(bounds)-1)
	for i := 0; i+1 < len(bounds); i++ {
		out = append(out, Bundle{Namespace: ns, Range: Range{bounds[i], bounds[i+1]}})
	}
	return out, nil
}

// Report is this broker's load report now (broker-stats load-report).
func (s *Service) Report() BrokerData { return s.report() }
