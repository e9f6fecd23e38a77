package chaos

// The geo scenarios' second cluster: c2, a bookie and a broker on their
// own netlab hosts, joined to c1's instance as Pulsar's docs build one:
// its metadata store is its own chroot (/c2) of the ZooKeeper ensemble,
// its configuration store is c1's (shared), and it was set up by
// initialize-cluster-metadata alone, which adds c2 to the tenant public's
// allowed clusters. Started by the first geo run and kept for the rest.
// The namespace GeoNamespace (deduplication on; c1's brokers write
// E=3, Qw=3, Qa=2 by their own defaults, c2's E=Qw=Qa=1 on its one bookie)
// replicates to both. The geo runs' topics are produced in c1; an
// Exclusive subscription in c2 (GeoSubscription, made before the first
// send) receives what c1's replicators forward, and the checker holds it
// to the same rules as c1's subscriptions: every acknowledged message
// arrives, in order, once.

import (
	"fmt"
	"os"
	"path/filepath"
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
		if err := c.addRemote(); err != nil {
			return err
		}
	}
	for _, p := range []*Proc{c.RemoteBookie, c.Remote} {
		if !p.Running() {
			if err := p.Start(); err != nil {
				return err
			}
		}
		if err := p.WaitReady(90 * time.Second); err != nil {
			return err
		}
	}
	if err := c.setupGeo(); err != nil {
		return fmt.Errorf("geo-replication between c1 and %s: %w", RemoteCluster, err)
	}
	c.geoReady = true
	c.logf("remote cluster %s serving on %s (configuration store shared with c1), %s replicated to both",
		RemoteCluster, c.Remote.Host.Addr, GeoNamespace)
	return nil
}

// remoteStore is c2's own metadata store: its chroot of the ensemble.
func (c *Cluster) remoteStore() string {
	return strings.TrimSuffix(c.ZKConn, "/c1") + "/" + RemoteCluster
}

// addRemote makes c2's bookie and broker and initializes c2's metadata
// with initialize-cluster-metadata, joining c1's configuration store.
func (c *Cluster) addRemote() error {
	bk, err := c.addProc("remote-bk", c.opts.Bin, nil, nil)
	if err != nil {
		return err
	}
	br, err := c.addProc("remote", c.opts.Bin, nil, nil)
	if err != nil {
		return err
	}
	d, err := procDir(c.opts.Dir, bk.Name)
	if err != nil {
		return err
	}
	bkConf, brConf := filepath.Join(c.opts.Dir, "remote-bk.conf"), filepath.Join(c.opts.Dir, "remote-broker.conf")
	if err := os.WriteFile(bkConf, []byte("metadataServiceUri="+c.remoteStore()+"\nzkTimeout=4000\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(brConf, []byte(strings.Join([]string{"clusterName=" + RemoteCluster, "metadataStoreSessionTimeoutMillis=4000",
		"managedLedgerDefaultEnsembleSize=1", "managedLedgerDefaultWriteQuorum=1", "managedLedgerDefaultAckQuorum=1", ""}, "\n")), 0o644); err != nil {
		return err
	}
	_, err = c.magnetar("initialize-cluster-metadata", "--cluster", RemoteCluster, "--metadata-store", c.remoteStore(),
		"--configuration-metadata-store", c.ZKConn, "--web-service-url", "http://"+br.Host.Addr+":8080",
		"--broker-service-url", "pulsar://"+br.Host.Addr+":6650")
	if err != nil {
		return err
	}
	bk.Args = []string{"bookie", "--config", bkConf, "--journal-dirs", d + "/journal", "--ledger-dirs", d + "/ledgers",
		"--bind-address", bk.Host.Addr, "--advertised-address", bk.Host.Addr, "--bookie-port", "3181",
		"--http-port", "8000", "--io-backend", "std"}
	br.Args = []string{"broker", "--config", brConf, "--metadata-store", c.remoteStore(), "--configuration-metadata-store", c.ZKConn,
		"--bind-address", br.Host.Addr, "--advertised-address", br.Host.Addr, "--broker-port", "6650", "--web-port", "8080"}
	c.RemoteBookie, c.Remote = bk, br
	return nil
}

// setupGeo creates the replicated namespace, once for the instance: the
// configuration store is shared, so c1's admin API is enough. Each step
// tolerates having been done.
func (c *Cluster) setupGeo() error {
	both := "c1," + RemoteCluster
	steps := [][]string{
		{"namespaces", "create", GeoNamespace, "--clusters", both},
		{"namespaces", "set-deduplication", GeoNamespace, "--enable"},
		{"namespaces", "set-retention", GeoNamespace, "--time", "30m", "--size", "256M"},
	}
	for _, s := range steps {
		out, err := c.magnetar(append([]string{"admin", "--admin-url", c.adminURL()}, s...)...)
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

// killRemote kills c2's broker (kill -9) while c1 replicates to it and
// restarts it: what c2 acknowledged to c1's replicators must survive, and
// the rest is resent without duplicates (deduplication in c2).
func killRemote(r *Run) error {
	r.Logf("kill -9 %s", r.C.Remote.Name)
	r.C.Remote.Kill()
	return restartAfter(r, r.C.Remote, 2*time.Second, 6*time.Second)
}
