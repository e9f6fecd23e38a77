package chaos

// The geo scenarios' second cluster: c2, one magnetar standalone (its own
// metadata store, bookie and broker) on its own netlab host, started by
// the first geo run and kept for the rest. Both clusters are registered in
// both configuration stores (c1's ZooKeeper, c2's embedded store), the
// tenant public may use both, and the namespace GeoNamespace (E=3, Qw=3,
// Qa=2 in c1, deduplication on in both) replicates to both. The geo runs'
// topics are produced in c1; an Exclusive subscription in c2
// (GeoSubscription, made before the first send) receives what c1's
// replicators forward, and the checker holds it to the same rules as c1's
// subscriptions: every acknowledged message arrives, in order, once.

import (
	"fmt"
	"strings"
	"time"
)

const (
	// RemoteCluster is the geo scenarios' second cluster.
	RemoteCluster = "c2"
	// GeoNamespace holds the geo runs' replicated topics.
	GeoNamespace = "public/chaos-g"
	// GeoSubscription is the subscription in c2 that receives the
	// replicated messages.
	GeoSubscription = "geo-exclusive"
	// remoteGroup is the workload's client group of c2.
	remoteGroup = "remote"
	// geoTopics is how many replicated topics a geo run produces in c1.
	geoTopics = 2
)

// EnsureRemote starts c2 and sets up replication between the clusters,
// once: a start or setup that failed is tried again by the next geo run
// (every step tolerates having been done).
func (c *Cluster) EnsureRemote() error {
	if c.geoReady {
		return nil
	}
	if c.Remote == nil {
		d, err := procDir(c.opts.Dir, "remote")
		if err != nil {
			return err
		}
		p, err := c.addProc("remote", c.opts.Bin, nil, nil)
		if err != nil {
			return err
		}
		p.Args = []string{"standalone", "--cluster", RemoteCluster, "--data-dir", d, "--bind-address", p.Host.Addr,
			"--advertised-address", p.Host.Addr, "--broker-port", "6650", "--web-port", "8080"}
		c.Remote = p
	}
	if !c.Remote.Running() {
		if err := c.Remote.Start(); err != nil {
			return err
		}
	}
	if err := c.Remote.WaitReady(90 * time.Second); err != nil {
		return err
	}
	if err := c.setupGeo(); err != nil {
		return fmt.Errorf("geo-replication between c1 and %s: %w", RemoteCluster, err)
	}
	c.geoReady = true
	c.logf("remote cluster %s serving on %s, %s replicated to both", RemoteCluster, c.Remote.Host.Addr, GeoNamespace)
	return nil
}

// setupGeo registers each cluster in the other's store and creates the
// replicated namespace in both. Each step tolerates having been done.
func (c *Cluster) setupGeo() error {
	c1, c2 := c.adminURL(), "http://"+c.Remote.Host.Addr+":8080"
	br1, both := c.Brokers[0].Host.Addr, "c1,"+RemoteCluster
	type step struct {
		admin string
		args  []string
	}
	steps := []step{
		{c1, []string{"clusters", "create", RemoteCluster, "--url", c2, "--broker-url", "pulsar://" + c.Remote.Host.Addr + ":6650"}},
		{c2, []string{"clusters", "create", "c1", "--url", "http://" + br1 + ":8080", "--broker-url", "pulsar://" + br1 + ":6650"}},
	}
	for _, admin := range []string{c1, c2} {
		steps = append(steps,
			step{admin, []string{"tenants", "update", "public", "--allowed-clusters", both}},
			step{admin, []string{"namespaces", "create", GeoNamespace, "--clusters", both}},
			step{admin, []string{"namespaces", "set-deduplication", GeoNamespace, "--enable"}},
			step{admin, []string{"namespaces", "set-retention", GeoNamespace, "--time", "30m", "--size", "256M"}})
	}
	steps = append(steps, step{c1, []string{"namespaces", "set-persistence", GeoNamespace, "--bookkeeper-ensemble", "3",
		"--bookkeeper-write-quorum", "3", "--bookkeeper-ack-quorum", "2"}})
	for _, s := range steps {
		out, err := c.magnetar(append([]string{"admin", "--admin-url", s.admin}, s.args...)...)
		if err != nil && !strings.Contains(out, "already exists") && !strings.Contains(out, "409") {
			return err
		}
	}
	return nil
}

// geoTopicSpecs are a geo run's replicated topics.
func geoTopicSpecs(scenario string, seed int64) []TopicSpec {
	var out []TopicSpec
	for i := range geoTopics {
		out = append(out, TopicSpec{Name: fmt.Sprintf("persistent://%s/%s-%d-t%d", GeoNamespace, scenario, seed, i),
			Group: "direct", Dedup: true, Remote: remoteGroup})
	}
	return out
}

// cutRemote cuts c2 from every broker of c1 while they replicate to it:
// c1's producers and consumers go on, the replication backlog grows, and
// after the cut everything drains into c2, once and in order.
func cutRemote(r *Run) error {
	return cutFor(r, r.C.Remote, r.C.Brokers, 5*time.Second, 12*time.Second)
}

// killRemote kills c2 (kill -9) while c1 replicates to it and restarts
// it: what c2 acknowledged to c1's replicators must survive, and the rest
// is resent without duplicates (deduplication in c2).
func killRemote(r *Run) error {
	r.Logf("kill -9 %s", r.C.Remote.Name)
	r.C.Remote.Kill()
	return restartAfter(r, r.C.Remote, 2*time.Second, 6*time.Second)
}
