package broker

// Cluster mode: topic ownership through broker/ownership.
//
// Behaviour:
//   - Without ownership (EnableOwnership not called) this broker serves
//     every topic, as a lone broker does in unit tests.
//   - With it, a topic is loaded only while this broker owns its bundle;
//     PRODUCER and SUBSCRIBE for another broker's topic fail with
//     ServiceNotReady, and the client looks the topic up again.
//   - Losing a bundle (unload, split, shedding, its node removed, session
//     lost) closes its loaded topics: producers and consumers get
//     CLOSE_PRODUCER / CLOSE_CONSUMER and reconnect through a lookup.
//   - A load check after the managed ledger opened catches a bundle lost
//     while the topic was loading.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/internal/proccpu"
)

// errNotOwner is the error of a topic load for a bundle this broker does
// not own.
var errNotOwner = admin.ErrNotOwner

// EnableOwnership starts the ownership service: this broker registers,
// joins the leader election and from now on serves only the bundles it
// owns. The broker fills cfg's CloseBundle and Load. Call it before Serve,
// or after it with Config.OwnershipRequired set (the ports must be open to
// know the addresses to register): until then no topic is served.
func (b *Broker) EnableOwnership(ctx context.Context, cfg ownership.Config) (*ownership.Service, error) {
	cfg.CloseBundle = b.closeBundle
	cfg.Load = b.loadReport
	if res := b.cfg.Resources; res != nil {
		if cfg.Boundaries == nil {
			cfg.Boundaries = policyBoundaries(res)
		}
		if cfg.SplitBundle == nil {
			cfg.SplitBundle = splitInPolicies(res)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = b.log
	}
	svc, err := ownership.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b.own.Store(svc)
	return svc, nil
}

// Ownership returns the ownership service, nil when not in cluster mode.
func (b *Broker) Ownership() *ownership.Service { return b.own.Load() }

func namespaceOf(t TopicName) string { return t.Tenant + "/" + t.Namespace }

// errOwnershipPending refuses lookups and topic loads on a cluster broker
// whose ports are open but whose ownership service has not started yet.
var errOwnershipPending = fmt.Errorf("this broker is starting and owns no bundle yet: %w", errNotOwner)

// takeOverWait bounds how long a topic load waits to take over a bundle
// another broker is handing to this one.
const takeOverWait = 6 * time.Second

// takeOver takes the bundle of a topic a client reached this broker for
// without a lookup, once the bundle is free: the previous owner sent the
// client here as it released the bundle (ownership.Service.TakeOver).
// False when another broker owns it (or there is no ownership).
func (b *Broker) takeOver(ctx context.Context, name TopicName) bool {
	svc := b.own.Load()
	if svc == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, takeOverWait)
	defer cancel()
	ok, err := svc.TakeOver(ctx, namespaceOf(name), name.String())
	if err != nil {
		b.log.Debug("bundle not taken over", "topic", name.String(), "err", err)
	}
	return ok && err == nil
}

// servesTopic reports whether this broker may load the topic now.
func (b *Broker) servesTopic(name TopicName) bool {
	svc := b.own.Load()
	if svc == nil {
		return !b.cfg.OwnershipRequired
	}
	return svc.OwnsTopic(namespaceOf(name), name.String())
}

// closeBundle closes the loaded topics of a bundle this broker no longer
// serves.
// Clients are sent to to, when known, where the bundle is handed over.
func (b *Broker) closeBundle(ctx context.Context, bundle ownership.Bundle, to *ownership.LookupResult) {
	inBundle := func(t *topic) bool {
		return namespaceOf(t.name) == bundle.Namespace && bundle.Contains(ownership.HashTopic(t.name.String()))
	}
	if to != nil {
		for _, t := range b.loadedTopics() {
			if inBundle(t) {
				t.movedTo.Store(to)
			}
		}
	}
	n := b.unloadWhere(ctx, inBundle)
	if n > 0 {
		b.log.Info("bundle's topics closed", "bundle", bundle.String(), "topics", n)
	}
}

// loadReport is this broker's load for the leader: resource use, and
// traffic per owned bundle from the topics' last stats interval.
func (b *Broker) loadReport() ownership.Load {
	svc := b.own.Load()
	load := ownership.Load{LastStats: map[string]ownership.BundleStats{}}
	for t := range b.topicPass() {
		r := t.rates.current()
		producers, consumers, _, _ := t.counts()
		load.MsgRateIn += r.MsgRateIn
		load.MsgRateOut += r.MsgRateOut
		load.MsgThroughputIn += r.ThroughputIn
		load.MsgThroughputOut += r.ThroughputOut
		load.NumTopics++
		load.NumProducers += producers
		load.NumConsumers += consumers
		if svc == nil {
			continue
		}
		bundle, ok := svc.OwnedBundleOf(namespaceOf(t.name), t.name.String())
		if !ok {
			continue
		}
		st := load.LastStats[bundle.String()]
		st.MsgRateIn += r.MsgRateIn
		st.MsgRateOut += r.MsgRateOut
		st.MsgThroughputIn += r.ThroughputIn
		st.MsgThroughputOut += r.ThroughputOut
		st.ProducerCount += producers
		st.ConsumerCount += consumers
		st.Topics++
		load.LastStats[bundle.String()] = st
	}
	load.CPU = b.cpu.sample()
	load.Memory = memoryUsage()
	return load
}

// cpuSampler measures this process's CPU use between samples, in percent
// of one core, against a limit of 100 per core (Pulsar's convention).
// The reporter and the load-report endpoint sample concurrently: mu
// guards the previous sample.
type cpuSampler struct {
	mu       sync.Mutex
	last     time.Time
	lastBusy time.Duration
}

func (c *cpuSampler) sample() ownership.ResourceUsage {
	busy, err := proccpu.Used()
	if err != nil {
		return ownership.ResourceUsage{}
	}
	now := time.Now()
	limit := float64(100 * runtime.NumCPU())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last.IsZero() {
		c.last, c.lastBusy = now, busy
		return ownership.ResourceUsage{Limit: limit}
	}
	usage := 100 * float64(busy-c.lastBusy) / float64(now.Sub(c.last))
	c.last, c.lastBusy = now, busy
	return ownership.ResourceUsage{Usage: usage, Limit: limit}
}

// memoryUsage is the resident set against the host's memory, in MiB.
func memoryUsage() ownership.ResourceUsage {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return ownership.ResourceUsage{}
	}
	fields := strings.Fields(string(statm))
	if len(fields) < 2 {
		return ownership.ResourceUsage{}
	}
	pages, _ := strconv.ParseFloat(fields[1], 64)
	rssMiB := pages * float64(os.Getpagesize()) / (1 << 20)
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return ownership.ResourceUsage{Usage: rssMiB}
	}
	return ownership.ResourceUsage{Usage: rssMiB, Limit: float64(si.Totalram) * float64(si.Unit) / (1 << 20)}
}

// lookup answers where a topic is served: this broker when not in
// cluster mode, else as the ownership service decides.
func (b *Broker) lookup(ctx context.Context, name TopicName, authoritative bool) (ownership.LookupResult, error) {
	if res, elsewhere, err := b.otherClusterLookup(ctx, name); elsewhere || err != nil {
		return res, err
	}
	svc := b.own.Load()
	if svc == nil && b.cfg.OwnershipRequired {
		return ownership.LookupResult{}, fmt.Errorf("lookup %s: %w", name, errOwnershipPending)
	}
	if svc == nil {
		return ownership.LookupResult{BrokerURL: "pulsar://" + b.advertisedAddress(), BrokerURLTLS: b.brokerURLTLS(), Self: true}, nil
	}
	res, err := svc.Lookup(ctx, namespaceOf(name), name.String(), authoritative)
	if err != nil {
		return res, fmt.Errorf("lookup %s: %w", name, err)
	}
	if res.Self && res.BrokerURLTLS == "" {
		res.BrokerURLTLS = b.brokerURLTLS()
	}
	return res, nil
}

// otherClusterLookup sends the lookup of a v1 topic whose namespace belongs
// to another cluster to that cluster's brokers (a redirect, as Pulsar's
// lookup does), and reports whether it did. A v1 namespace is served by
// its own cluster only; "global" ones by every cluster they replicate to.
func (b *Broker) otherClusterLookup(ctx context.Context, name TopicName) (ownership.LookupResult, bool, error) {
	cluster, v1 := name.V1Cluster()
	if !v1 || cluster == b.cfg.ClusterName || cluster == resources.GlobalCluster || b.cfg.Resources == nil {
		return ownership.LookupResult{}, false, nil
	}
	cd, err := b.cfg.Resources.GetCluster(ctx, cluster)
	if err != nil {
		return ownership.LookupResult{}, true, fmt.Errorf("lookup %s: the cluster of its v1 namespace: %w", name, err)
	}
	if cd.BrokerServiceURL == "" && cd.BrokerServiceURLTLS == "" {
		return ownership.LookupResult{}, true, fmt.Errorf("lookup %s: cluster %s, which serves its v1 namespace, has no brokerServiceUrl", name, cluster)
	}
	return ownership.LookupResult{BrokerURL: cd.BrokerServiceURL, BrokerURLTLS: cd.BrokerServiceURLTLS,
		HTTPURL: cd.ServiceURL, HTTPURLTLS: cd.ServiceURLTLS, Redirect: true, Authoritative: true}, true, nil
}

// policyBoundaries reads a namespace's bundle boundaries from its
// policies (cached; a namespace that does not exist has none, so its
// topics cannot be looked up).
func policyBoundaries(res *resources.Resources) func(context.Context, string) ([]uint32, error) {
	return func(ctx context.Context, ns string) ([]uint32, error) {
		tenant, name, _ := strings.Cut(ns, "/")
		// Fresh: ownership is acquired by these boundaries, and a split
		// made elsewhere while this broker was cut off must not be missed.
		p, err := res.NamespaceFresh(ctx, tenant, name)
		if err != nil {
			return nil, err
		}
		bundles, err := res.BundlesOf(p)
		if err != nil {
			return nil, err
		}
		return parseBoundaries(bundles.Boundaries)
	}
}

func parseBoundaries(hex []string) ([]uint32, error) {
	canonical, err := resources.ValidateBoundaries(hex)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, len(canonical))
	for i, s := range canonical {
		v, err := strconv.ParseUint(s[2:], 16, 32)
		if err != nil {
			return nil, fmt.Errorf("bundle boundary %q: %w", s, err)
		}
		out[i] = uint32(v)
	}
	return out, nil
}

// splitInPolicies records a bundle's split in the namespace policies (by
// compare-and-set: a concurrent policy change is kept).
func splitInPolicies(res *resources.Resources) func(context.Context, ownership.Bundle) error {
	return func(ctx context.Context, b ownership.Bundle) error {
		tenant, name, _ := strings.Cut(b.Namespace, "/")
		_, err := res.UpdateNamespace(ctx, tenant, name, func(p *resources.Policies) error {
			bundles, err := res.BundlesOf(*p)
			if err != nil {
				return err
			}
			bounds, err := parseBoundaries(bundles.Boundaries)
			if err != nil {
				return err
			}
			next, err := ownership.SplitBoundaries(bounds, b.Range)
			if err != nil {
				return err
			}
			hex := make([]string, len(next))
			for i, v := range next {
				hex[i] = fmt.Sprintf("0x%08x", v)
			}
			p.Bundles = &resources.BundlesData{Boundaries: hex, NumBundles: len(next) - 1}
			return nil
		})
		return err
	}
}

// ListTopics lists a namespace's persistent topics (admin.NamespaceTopics).
func (b *Broker) ListTopics(ctx context.Context, tenant, namespace string) ([]string, error) {
	return b.persistentTopics(ctx, tenant, namespace)
}
