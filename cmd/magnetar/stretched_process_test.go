package main

// A stretched cluster of real processes on loopback (docs/sync-geo-
// replication.md): three regions, each with a ZooKeeper node of one
// 3-node ensemble, two bookies (--region, --rack) and a broker writing
// E=3/Qw=3/Qa=2 with region-aware placement enforced. Traffic from a
// broker to another region's bookies goes through internal/delayrelay
// relays (the broker's bookieAddressMap), so an inter-region round trip
// can be emulated; a broker reaches its own region's bookies directly.
// ZooKeeper traffic and the clients' traffic to brokers are not delayed.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/internal/delayrelay"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/zktest"
)

var stretchedLong = flag.Bool("stretched.long", false,
	"the long stretched-cluster region loss (more topics, a longer stream, a 5 ms inter-region round trip; make test-long)")

// stretchedRegion is one region's processes.
type stretchedRegion struct {
	name    string
	zkNode  int // 1-based node of the ZooKeeper ensemble
	bookies []*bookieProcess
	ids     []string // the bookies' ids (= their registered address)
	broker  *brokerNode
}

// stretchedCluster is cluster c1 stretched over regions a, b and c.
type stretchedCluster struct {
	zk       *zktest.Cluster
	conn     string
	dir      string
	regions  []*stretchedRegion
	relays   []*delayrelay.Relay
	regionOf map[string]string // bookie id -> region
	status   string
	results  string
	client   *bookieProcess
}

// startStretchedCluster starts the three regions with relays of oneWay
// delay between each broker and the other regions' bookies, and waits
// until every process is ready.
func startStretchedCluster(t *testing.T, oneWay time.Duration) *stretchedCluster {
	t.Helper()
	skipProcessesIfShort(t)
	c := &stretchedCluster{zk: zktest.StartForTest(t, 3), dir: t.TempDir(), regionOf: map[string]string{}}
	c.conn = c.zk.Connection + "/c1"
	var out strings.Builder
	if rc := run([]string{"initialize-cluster-metadata", "--cluster", "c1", "--metadata-store", c.conn,
		"--web-service-url", "http://127.0.0.1:1", "--broker-service-url", "pulsar://127.0.0.1:1"}, &out, &out); rc != 0 {
		t.Fatalf("initialize-cluster-metadata: %d %s", rc, out.String())
	}
	// The bookies' auditors place re-replicated copies by the brokers'
	// policy; recovery of a lost region is left alone for the test's
	// length (as docs/sync-geo-replication.md advises for an outage).
	bkConf := filepath.Join(c.dir, "bk_server.conf")
	writeFile(t, bkConf, strings.Join([]string{"metadataServiceUri=" + c.conn, "zkTimeout=4000",
		"ensemblePlacementPolicy=org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy",
		"minNumRacksPerWriteQuorum=2", "enforceMinNumRacksPerWriteQuorum=true", "lostBookieRecoveryDelay=3600", ""}, "\n"))
	ports := freePorts(t, 12) // a bookie port and an HTTP port for each of 6 bookies
	for i, name := range []string{"a", "b", "c"} {
		r := &stretchedRegion{name: name, zkNode: i + 1}
		for k := range 2 {
			port, httpPort := ports[0], ports[1]
			ports = ports[2:]
			d := filepath.Join(c.dir, fmt.Sprintf("bk-%s%d", name, k+1))
			r.bookies = append(r.bookies, startBookieProcess(t, "--config", bkConf, "--journal-dirs", d+"/journal",
				"--ledger-dirs", d+"/ledgers", "--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
				"--bookie-port", strconv.Itoa(port), "--http-port", strconv.Itoa(httpPort), "--io-backend", "std",
				"--region", name, "--rack", fmt.Sprintf("r%d", k+1)))
			id := "127.0.0.1:" + strconv.Itoa(port)
			r.ids = append(r.ids, id)
			c.regionOf[id] = name
		}
		c.regions = append(c.regions, r)
	}
	keepLogsOnFailure(t, c.logs)
	for _, r := range c.regions {
		for _, b := range r.bookies {
			b.waitReady(t)
		}
	}
	for _, r := range c.regions {
		r.broker = startBrokerNode(t, c.brokerConf(t, r, oneWay), "--metadata-store", c.conn)
	}
	for _, r := range c.regions {
		r.broker.proc.waitReady(t)
	}
	return c
}

// brokerConf writes region r's broker configuration: E=3/Qw=3/Qa=2,
// region-aware placement over at least 2 regions, enforced, and the
// other regions' bookies dialed through new relays.
func (c *stretchedCluster) brokerConf(t *testing.T, r *stretchedRegion, oneWay time.Duration) string {
	t.Helper()
	var remote []string
	for _, o := range c.regions {
		if o == r {
			continue
		}
		for _, id := range o.ids {
			relay, err := delayrelay.Listen("127.0.0.1:0", id, oneWay, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = relay.Close() })
			c.relays = append(c.relays, relay)
			remote = append(remote, id+"="+relay.Addr())
		}
	}
	path := filepath.Join(c.dir, "broker-"+r.name+".conf")
	writeFile(t, path, strings.Join([]string{"clusterName=c1",
		"metadataStoreSessionTimeoutMillis=4000", "managedLedgerDefaultEnsembleSize=3",
		"managedLedgerDefaultWriteQuorum=3", "managedLedgerDefaultAckQuorum=2",
		"bookkeeperClientRegionawarePolicyEnabled=true", "bookkeeperClientMinNumRacksPerWriteQuorum=2",
		"bookkeeperClientEnforceMinNumRacksPerWriteQuorum=true", "bookieAddressMap=" + strings.Join(remote, ","),
		"loadBalancerReportUpdateMinIntervalMillis=300", "statsUpdateFrequencyInSecs=1",
		"loadBalancerSheddingIntervalMinutes=0.05", "loadBalancerSheddingGracePeriodMinutes=0.2",
		"minUnloadMessage=0", "minUnloadMessageThroughput=0", "maxUnloadBundleNumPerShedding=1",
		"loadBalancerAutoBundleSplitEnabled=false", ""}, "\n"))
	return path
}

// logs are every process's output, for keepLogsOnFailure.
func (c *stretchedCluster) logs() map[string]string {
	logs := map[string]string{}
	for _, r := range c.regions {
		for i, b := range r.bookies {
			logs[fmt.Sprintf("bookie-%s%d", r.name, i+1)] = b.out.String()
		}
		if r.broker != nil {
			logs["broker-"+r.name] = r.broker.proc.out.String()
		}
		logs["zk-"+r.name] = c.zk.ServerLog(r.zkNode)
	}
	if c.client != nil {
		logs["client"] = c.client.out.String()
	}
	return logs
}

// serviceURL names every region's broker, so clients keep a way in when
// a region is gone.
func (c *stretchedCluster) serviceURL() string {
	var hosts []string
	for _, r := range c.regions {
		hosts = append(hosts, "127.0.0.1:"+strconv.Itoa(r.broker.bin))
	}
	return "pulsar://" + strings.Join(hosts, ",")
}

// setDelay sets every relay's one-way delay.
func (c *stretchedCluster) setDelay(d time.Duration) {
	for _, r := range c.relays {
		r.SetDelay(d)
	}
}

// victim picks the region to lose: one whose broker owns bundles,
// preferring the one holding the ZooKeeper leader (the harder loss: the
// ensemble must elect another).
func (c *stretchedCluster) victim(t *testing.T) (*stretchedRegion, bool) {
	t.Helper()
	var serving []*stretchedRegion
	for _, r := range c.regions {
		if r.broker.ownedBundles(t) > 0 {
			serving = append(serving, r)
		}
	}
	if len(serving) == 0 {
		t.Fatal("no broker owns a bundle")
	}
	for _, r := range serving {
		if mode, _ := zktest.FourLetter(c.zk.Hosts[r.zkNode-1], "srvr"); strings.Contains(mode, "Mode: leader") {
			return r, true
		}
	}
	return serving[len(serving)-1], false
}

// killRegion kills -9 the region's ZooKeeper node, bookies and broker.
func (c *stretchedCluster) killRegion(t *testing.T, r *stretchedRegion) {
	t.Helper()
	if err := c.zk.StopNode(r.zkNode); err != nil {
		t.Fatal(err)
	}
	for _, b := range r.bookies {
		b.kill()
	}
	r.broker.proc.kill()
}

// checkPlacement reads every ledger's metadata and fails if a write set
// (Qw consecutive positions of an ensemble, wrapping) lies in one region.
// It returns the ledgers and fragments checked.
func (c *stretchedCluster) checkPlacement(t *testing.T) (ledgers, fragments int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := metadata.Open(ctx, c.conn, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	err = ledger.ForEachLedger(ctx, store, func(id int64) error {
		md, err := ledger.ReadMetadata(ctx, store, id)
		if errors.Is(err, ledger.ErrNoSuchLedger) || errors.Is(err, metadata.ErrNotFound) {
			return nil // deleted meanwhile (consumed, then trimmed)
		}
		if err != nil {
			return fmt.Errorf("ledger %d: %w", id, err)
		}
		ledgers++
		// A region's loss costs a ledger one change per bookie of the region
		// it holds (plus one for the region's other bookie, still
		// registered until its session expires), not one per entry.
		if len(md.Ensembles) > 6 {
			t.Errorf("ledger %d has %d fragments: %v", id, len(md.Ensembles), md.Ensembles)
		}
		for _, f := range md.Ensembles {
			fragments++
			for start := range f.Bookies {
				regions := map[string]bool{}
				var set []string
				for k := range md.WriteQuorumSize {
					b := f.Bookies[(start+k)%len(f.Bookies)]
					region, ok := c.regionOf[b]
					if !ok {
						return fmt.Errorf("ledger %d: bookie %s is not one of the cluster's", id, b)
					}
					regions[region] = true
					set = append(set, b+" ("+region+")")
				}
				if len(regions) < 2 {
					t.Errorf("ledger %d fragment from entry %d: write set %v lies in one region", id, f.FirstEntry, set)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ledgers, fragments
}

// TestStretchedClusterSurvivesRegionLoss runs a produce/consume stream on
// the stretched cluster and kills -9 a whole region mid-stream (its
// ZooKeeper node, both bookies and its broker). Every acknowledged
// message is received, in order; every topic's producer and consumer make
// progress again through the surviving regions within a bound (the time
// is logged); and no ledger fragment written before or after the loss
// has a write set in one region. Short by default (make test); with
// -stretched.long more topics, a longer stream and a 5 ms inter-region
// round trip (make test-long).
func TestStretchedClusterSurvivesRegionLoss(t *testing.T) {
	skipProcessesIfShort(t)
	topics, after, oneWay := 6, 3*time.Second, time.Duration(0)
	if *stretchedLong {
		topics, after, oneWay = 16, 30*time.Second, 2500*time.Microsecond
	}
	started := time.Now()
	c := startStretchedCluster(t, oneWay)
	c.status, c.results = filepath.Join(c.dir, "client-status.json"), filepath.Join(c.dir, "client-results.json")
	c.client = startClientWorkload(t, c.dir, c.serviceURL(), c.status, c.results, topics, "received")
	waitProgress(t, c.status, c.client, 10)
	t.Logf("cluster up and streaming %.1f s after the start", time.Since(started).Seconds())
	if ledgers, fragments := c.checkPlacement(t); ledgers == 0 {
		t.Fatal("no ledger written before the region loss")
	} else {
		t.Logf("before the loss: %d ledgers, %d fragments, every write set over 2 or more regions", ledgers, fragments)
	}

	victim, leader := c.victim(t)
	c.killRegion(t, victim)
	killed := time.Now()
	// Statuses are written every 100 ms: the baseline is the first one
	// written after the kill, so it holds nothing acknowledged before it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(c.status); err == nil && fi.ModTime().After(killed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client workload wrote no status in 30 s after the kill")
		}
	}
	waitProgress(t, c.status, c.client, 10)
	recovery := time.Since(killed)
	t.Logf("region %s lost (its ZooKeeper node the leader: %v; broker owned bundles); every topic's producer and consumer "+
		"made 10 more messages of progress %.1f s after the kill -9 (metadata session timeout 4 s)", victim.name, leader, recovery.Seconds())
	// The bound: a broker's metadata session timeout (4 s) for its bundles
	// to be released, a ZooKeeper election, lookups and the client's
	// reconnection backoff; measured at a few seconds, with margin for
	// the race detector on a loaded machine.
	if recovery > 45*time.Second {
		t.Errorf("recovery after the region loss took %s, want under 45 s", recovery)
	}
	time.Sleep(after)
	waitProgress(t, c.status, c.client, 5)
	c.stopWorkload(t)
	ledgers, fragments := c.checkPlacement(t)
	t.Logf("after the loss: %d ledgers, %d fragments, every write set over 2 or more regions", ledgers, fragments)
	t.Logf("whole test %.1f s", time.Since(started).Seconds())
}

// stopWorkload stops the client and checks that every acknowledged
// message was received in order, with no data race reported by the
// surviving brokers.
func (c *stretchedCluster) stopWorkload(t *testing.T) {
	t.Helper()
	pc := &processCluster{client: c.client, results: c.results, dir: c.dir}
	for _, r := range c.regions {
		pc.brokers = append(pc.brokers, r.broker)
	}
	pc.stopWorkload(t)
}

// TestStretchedClusterPublishLatencyFollowsRTT publishes one message at a
// time on the stretched cluster with no inter-region delay, then with a
// 40 ms round trip (20 ms each way through the relays). With E=3/Qw=3/
// Qa=2 and one bookie per region, an add is acknowledged once the local
// bookie and the nearer remote one have it, so the publish p50 should
// rise by about one round trip: not by none (Qa met locally) nor by two.
// The round trip is long against the p50's noise on a loaded machine
// (make test runs packages side by side): with 5 ms, a run whose local
// p50 was 10 ms measured 2.5 ms added.
func TestStretchedClusterPublishLatencyFollowsRTT(t *testing.T) {
	skipProcessesIfShort(t)
	c := startStretchedCluster(t, 0)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: c.serviceURL(), OperationTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	prod, err := retryCreate(func() (pulsar.Producer, error) {
		return client.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/rtt", DisableBatching: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const rtt = 40 * time.Millisecond
	measure := func(n int) (p50, p99 time.Duration) {
		payload := make([]byte, 1024)
		var ds []time.Duration
		for i := range n {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			start := time.Now()
			_, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: payload})
			cancel()
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[n/2], ds[n*99/100]
	}
	measure(50) // warm-up: the ledger, connections to every bookie
	// Alternate, so a slow phase of the machine does not land on one side.
	var local, remote []time.Duration
	var localP99, remoteP99 time.Duration
	for range 2 {
		c.setDelay(0)
		p50, p99 := measure(100)
		local, localP99 = append(local, p50), max(localP99, p99)
		c.setDelay(rtt / 2)
		p50, p99 = measure(100)
		remote, remoteP99 = append(remote, p50), max(remoteP99, p99)
	}
	l, r := slices.Min(local), slices.Min(remote)
	t.Logf("publish latency, 1 KiB, one at a time: no inter-region delay p50 %s (runs %v) p99 %s; "+
		"%s round trip p50 %s (runs %v) p99 %s; p50 added %s", l, local, localP99, rtt, r, remote, remoteP99, r-l)
	if added := r - l; added < rtt*6/10 || added > rtt*2 {
		t.Errorf("a %s inter-region round trip added %s to the publish p50, want about one round trip (%s-%s)", rtt, added, rtt*6/10, rtt*2)
	}
}
