package chaos

// The cluster under test: every process on its own netlab host.
//
//	zk1 zk2 zk3        ZooKeeper ensemble (Debian's zookeeper jar), port 2181
//	bk1 .. bk4         magnetar bookie, port 3181 (E=3 over 4 bookies)
//	br1 .. br3         magnetar broker, ports 6650 / 8080, sessions of 4 s
//	proxy              magnetar proxy, port 6650 / 8080, brokers from ZooKeeper
//	client             the workload process (this test binary again)
//	remote             cluster c2 of the geo scenarios, one standalone (geo.go)
//
// Namespaces public/chaos-d (E=3, Qw=3, Qa=2, deduplication on) and
// public/chaos-n (E=3, Qw=2, Qa=2, deduplication off) hold the topics.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/internal/netlab"
	"golang.org/x/sys/unix"
)

// Options configure a cluster.
type Options struct {
	Bin     string // bin/magnetar
	Dir     string // data and logs
	Brokers int    // 2 or 3
	Bookies int    // 4
	ZKJar   string // ZooKeeper's server jar; Debian's by default
	Logf    func(format string, args ...any)
}

// Cluster is the running cluster.
type Cluster struct {
	opts    Options
	Lab     *netlab.Lab
	ZK      []*Proc
	Bookies []*Proc
	Brokers []*Proc
	Proxy   *Proc
	// Remote and RemoteBookie are c2's broker and bookie, once a geo run
	// started them (geo.go).
	Remote, RemoteBookie *Proc
	// geoReady: c2 runs and the instance has the replicated namespace.
	geoReady bool
	Client   *netlab.Host
	ZKConn   string // zk:host:2181,.../c1
	tmpfs    string // the last bookie's directory, a tmpfs
}

// Namespaces the workload's topics live in, and whether they deduplicate.
var Namespaces = []struct {
	Name      string
	E, Qw, Qa int
	Dedup     bool
}{
	{"public/chaos-d", 3, 3, 2, true},
	{"public/chaos-n", 3, 2, 2, false},
}

const (
	zkJar  = "/usr/share/java/zookeeper.jar"
	logJar = "/usr/share/java/slf4j-simple.jar"
	labTag = "mgc" // netlab prefix: namespaces mgc-*, bridge mgcbr
)

// StartCluster builds the lab and starts every process, removing what a
// crashed earlier run left first. On error everything is torn down.
func StartCluster(opts Options) (c *Cluster, err error) {
	if opts.Brokers == 0 {
		opts.Brokers = 3
	}
	if opts.Bookies == 0 {
		opts.Bookies = 4
	}
	if opts.ZKJar == "" {
		opts.ZKJar = zkJar
	}
	// Checked before anything is torn down: a cluster that cannot start
	// must not remove the lab of one running beside it.
	if _, err := os.Stat(opts.ZKJar); err != nil {
		return nil, fmt.Errorf("ZooKeeper missing (make zookeeper installs it): %w", err)
	}
	unmountLeftovers()
	lab, err := netlab.New(labTag)
	if err != nil {
		return nil, err
	}
	// built, not c: a failing step returns nil for c before this runs.
	built := &Cluster{opts: opts, Lab: lab}
	c = built
	defer func() {
		if err != nil {
			built.Close()
			c = nil
		}
	}()
	if err := c.startZK(); err != nil {
		return nil, err
	}
	if err := c.initMetadata(); err != nil {
		return nil, err
	}
	if err := c.startBookies(); err != nil {
		return nil, err
	}
	if err := c.startBrokers(); err != nil {
		return nil, err
	}
	if err := c.startProxy(); err != nil {
		return nil, err
	}
	if c.Client, err = lab.AddHost("client"); err != nil {
		return nil, err
	}
	return c, c.createNamespaces()
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

// Close kills every process and removes the lab.
func (c *Cluster) Close() {
	for _, group := range [][]*Proc{{c.Remote, c.RemoteBookie, c.Proxy}, c.Brokers, c.Bookies, c.ZK} {
		for _, p := range group {
			if p != nil {
				p.Kill()
			}
		}
	}
	c.Lab.Close()
	if c.tmpfs != "" {
		_ = unix.Unmount(c.tmpfs, unix.MNT_DETACH)
	}
}

func (c *Cluster) addProc(name, prog string, args []string, ready func(*Proc) bool) (*Proc, error) {
	h, err := c.Lab.AddHost(name)
	if err != nil {
		return nil, err
	}
	return &Proc{Name: name, Host: h, Prog: prog, Args: args, Log: filepath.Join(c.opts.Dir, name+".log"), Ready: ready}, nil
}

func (c *Cluster) startZK() error {
	var hosts, servers []string
	for i := 1; i <= 3; i++ {
		p, err := c.addProc(fmt.Sprintf("zk%d", i), "java", nil, zkServing)
		if err != nil {
			return err
		}
		c.ZK = append(c.ZK, p)
		hosts = append(hosts, p.Host.Addr+":2181")
		servers = append(servers, fmt.Sprintf("server.%d=%s:2888:3888", i, p.Host.Addr))
	}
	for i, p := range c.ZK {
		d, err := procDir(c.opts.Dir, p.Name)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "data", "myid"), []byte(fmt.Sprintf("%d\n", i+1)), 0o644); err != nil {
			return err
		}
		cfg := strings.Join(append([]string{"tickTime=500", "initLimit=20", "syncLimit=10",
			"minSessionTimeout=1000", "maxSessionTimeout=60000", "dataDir=" + filepath.Join(d, "data"),
			"clientPort=2181", "clientPortAddress=" + p.Host.Addr, "admin.enableServer=false",
			"4lw.commands.whitelist=*", "quorumListenOnAllIPs=false"}, servers...), "\n") + "\n"
		if err := os.WriteFile(filepath.Join(d, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			return err
		}
		p.Args = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			fmt.Sprintf("-Djute.maxbuffer=%d", 4<<20), "-Dzookeeper.4lw.commands.whitelist=*",
			"-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp", c.opts.ZKJar + ":" + logJar,
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(d, "zoo.cfg")}
		if err := p.Start(); err != nil {
			return err
		}
	}
	for _, p := range c.ZK {
		if err := p.WaitReady(60 * time.Second); err != nil {
			return err
		}
	}
	c.ZKConn = "zk:" + strings.Join(hosts, ",") + "/c1"
	c.logf("ZooKeeper ensemble serving: %s", c.ZKConn)
	return nil
}

// fourLetter sends a ZooKeeper four-letter word to addr, bounded.
func fourLetter(addr, word string) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = conn.Write([]byte(word))
	b, _ := io.ReadAll(conn)
	return string(b)
}

func zkServing(p *Proc) bool {
	return strings.Contains(fourLetter(p.Host.Addr+":2181", "isro"), "rw")
}

// ZKLeader is the index of the ensemble's leader, or -1.
func (c *Cluster) ZKLeader() int {
	for i, p := range c.ZK {
		if p.Running() && !p.Paused() && strings.Contains(fourLetter(p.Host.Addr+":2181", "srvr"), "Mode: leader") {
			return i
		}
	}
	return -1
}

// magnetar runs bin/magnetar in the root namespace (it reaches every host
// through the bridge), bounded.
func (c *Cluster) magnetar(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.opts.Bin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("magnetar %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (c *Cluster) initMetadata() error {
	first := fmt.Sprintf("198.18.0.%d", 10+len(c.ZK)+c.opts.Bookies) // br1's address: hosts are numbered in order
	_, err := c.magnetar("initialize-cluster-metadata", "--cluster", "c1", "--metadata-store", c.ZKConn,
		"--configuration-metadata-store", c.ZKConn, "--web-service-url", "http://"+first+":8080",
		"--broker-service-url", "pulsar://"+first+":6650")
	return err
}

func (c *Cluster) startBookies() error {
	conf := filepath.Join(c.opts.Dir, "bk_server.conf")
	// journalMaxSizeMB: the last bookie's disk is a small tmpfs (512 MiB then); with
	// the default 2 GiB files the current journal file and a recycled one
	// filled it over a long run (332 MiB of journal at seed 3 of 5 Dec's
	// full run), the bookie turned read-only, and with one bookie of four
	// read-only an E=3 writer had no replacement when another restarted
	// (rolling-restart seed 3: 12.7 s).
	if err := os.WriteFile(conf, []byte("metadataServiceUri="+c.ZKConn+"\nzkTimeout=4000\njournalMaxSizeMB=64\n"), 0o644); err != nil {
		return err
	}
	for i := 1; i <= c.opts.Bookies; i++ {
		name := fmt.Sprintf("bk%d", i)
		d, err := procDir(c.opts.Dir, name)
		if err != nil {
			return err
		}
		p, err := c.addProc(name, c.opts.Bin, nil, nil)
		if err != nil {
			return err
		}
		if i == c.opts.Bookies { // the last bookie's disk is a small tmpfs, for disk-full
			if err := mountTmpfs(d, tmpfsSize); err != nil {
				return err
			}
			c.tmpfs = d
		}
		p.Args = []string{"bookie", "--config", conf, "--journal-dirs", d + "/journal", "--ledger-dirs", d + "/ledgers",
			"--bind-address", p.Host.Addr, "--advertised-address", p.Host.Addr, "--bookie-port", "3181",
			"--http-port", "8000", "--io-backend", "std", "--disk-check-interval", "1s"}
		p.Env = []string{"MAGNETAR_TEST_FAULT_CONTROL=" + faultControl(d)}
		c.Bookies = append(c.Bookies, p)
		if err := p.Start(); err != nil {
			return err
		}
	}
	for _, p := range c.Bookies {
		if err := p.WaitReady(60 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startBrokers() error {
	conf := filepath.Join(c.opts.Dir, "broker.conf")
	// Shedding every 6 s with no minimum imbalance (Pulsar's
	// minUnloadMessage, 1000 msg/s, is more than the whole workload), one
	// bundle per pass (with no minimum every light bundle qualifies), so
	// bundles move while faults strike, as under production load.
	if err := os.WriteFile(conf, []byte(strings.Join([]string{"clusterName=c1",
		"metadataStoreSessionTimeoutMillis=4000", "managedLedgerDefaultEnsembleSize=3",
		"managedLedgerDefaultWriteQuorum=3", "managedLedgerDefaultAckQuorum=2",
		"loadBalancerReportUpdateMinIntervalMillis=1000", "statsUpdateFrequencyInSecs=1",
		"loadBalancerSheddingIntervalMinutes=0.1", "loadBalancerSheddingGracePeriodMinutes=0.5",
		"minUnloadMessage=0", "minUnloadMessageThroughput=0", "maxUnloadBundleNumPerShedding=1",
		"loadBalancerAutoBundleSplitEnabled=false", "transactionCoordinatorEnabled=true", ""}, "\n")), 0o644); err != nil {
		return err
	}
	for i := 1; i <= c.opts.Brokers; i++ {
		p, err := c.addProc(fmt.Sprintf("br%d", i), c.opts.Bin, nil, nil)
		if err != nil {
			return err
		}
		p.Args = []string{"broker", "--config", conf, "--metadata-store", c.ZKConn, "--configuration-metadata-store", c.ZKConn,
			"--bind-address", p.Host.Addr, "--advertised-address", p.Host.Addr, "--broker-port", "6650", "--web-port", "8080"}
		// Every reader's subscribe, flow, delivery and ack in the broker's
		// log: a reader that disagrees can then be checked against what
		// the brokers sent it.
		p.Env = []string{"MAGNETAR_TEST_TRACE_READERS=1"}
		c.Brokers = append(c.Brokers, p)
		if err := p.Start(); err != nil {
			return err
		}
	}
	for _, p := range c.Brokers {
		if err := p.WaitReady(60 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startProxy() error {
	conf := filepath.Join(c.opts.Dir, "proxy.conf")
	if err := os.WriteFile(conf, []byte("servicePort=6650\nwebServicePort=8080\nbrokerProxyAllowedTargetPorts=*\n"+
		"metadataStoreSessionTimeoutMillis=4000\nmaxConcurrentInboundConnections=1000\n"), 0o644); err != nil {
		return err
	}
	p, err := c.addProc("proxy", c.opts.Bin, nil, nil)
	if err != nil {
		return err
	}
	p.Args = []string{"proxy", "--config", conf, "--metadata-store", c.ZKConn, "--bind-address", p.Host.Addr}
	c.Proxy = p
	if err := p.Start(); err != nil {
		return err
	}
	return p.WaitReady(60 * time.Second)
}

func (c *Cluster) adminURL() string {
	for _, b := range c.Brokers {
		if b.Running() && !b.Paused() {
			return "http://" + b.Host.Addr + ":8080"
		}
	}
	return "http://" + c.Brokers[0].Host.Addr + ":8080"
}

func (c *Cluster) admin(args ...string) error {
	_, err := c.magnetar(append([]string{"admin", "--admin-url", c.adminURL()}, args...)...)
	return err
}

func (c *Cluster) createNamespaces() error {
	for _, ns := range Namespaces {
		dedup := "--disable"
		if ns.Dedup {
			dedup = "--enable"
		}
		for _, args := range [][]string{
			{"namespaces", "create", ns.Name},
			{"namespaces", "set-persistence", ns.Name, "--bookkeeper-ensemble", fmt.Sprint(ns.E),
				"--bookkeeper-write-quorum", fmt.Sprint(ns.Qw), "--bookkeeper-ack-quorum", fmt.Sprint(ns.Qa)},
			{"namespaces", "set-deduplication", ns.Name, dedup},
			// Readers (non-durable cursors) do not hold ledgers: without
			// retention, ledgers every subscription consumed are deleted
			// under a reader that lags (a paused broker's), and it skips
			// them, as Pulsar's readers do. The checker's reader
			// agreement needs them kept for the length of a run.
			{"namespaces", "set-retention", ns.Name, "--time", "30m", "--size", "256M"},
		} {
			if err := c.admin(args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// ServiceURLs are the workload's client groups: the brokers directly, and
// through the proxy.
func (c *Cluster) ServiceURLs() map[string]string {
	var hosts []string
	for _, b := range c.Brokers {
		hosts = append(hosts, b.Host.Addr+":6650")
	}
	urls := map[string]string{"direct": "pulsar://" + strings.Join(hosts, ","),
		"proxy": "pulsar://" + c.Proxy.Host.Addr + ":6650"}
	if c.Remote != nil {
		urls[remoteGroup] = "pulsar://" + c.Remote.Host.Addr + ":6650"
	}
	return urls
}

// Owner is the broker serving topic (by a lookup), or nil.
func (c *Cluster) Owner(topic string) *Proc {
	path := strings.Replace(topic, "persistent://", "persistent/", 1)
	for _, b := range c.Brokers {
		if !b.Running() || b.Paused() {
			continue
		}
		cl := http.Client{Timeout: 3 * time.Second}
		resp, err := cl.Get("http://" + b.Host.Addr + ":8080/lookup/v2/topic/" + path)
		if err != nil {
			continue
		}
		var l struct{ BrokerURL string }
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, o := range c.Brokers {
			if strings.Contains(l.BrokerURL, "//"+o.Host.Addr+":") {
				return o
			}
		}
	}
	return nil
}

// httpPut sends an admin PUT to a broker, bounded.
func (c *Cluster) httpPut(path string) error {
	req, _ := http.NewRequest(http.MethodPut, c.adminURL()+path, nil)
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(bufio.NewReader(io.LimitReader(resp.Body, 1000)))
		return fmt.Errorf("PUT %s: %d %s", path, resp.StatusCode, b)
	}
	return nil
}

// Heal restores every link, resumes every paused process and starts every
// stopped one, then waits until all serve. A process whose metadata
// session expired during a pause or partition stops by itself once it
// notices (fail-stop), which can be just after it was resumed: so Heal
// waits healSettle and checks again, up to healPasses times.
func (c *Cluster) Heal() error {
	if err := c.Lab.HealAll(); err != nil {
		return err
	}
	for _, b := range c.Bookies {
		if err := setFault(c.bookieDir(b), ""); err != nil {
			return err
		}
	}
	if c.tmpfs != "" {
		_ = os.Remove(filepath.Join(c.tmpfs, "chaos-filler"))
	}
	all := c.All()
	for _, p := range all {
		if p.Paused() {
			_ = p.Resume()
		}
	}
	var err error
	for pass := range healPasses {
		var restarted int
		restarted, err = c.EnsureUp()
		if err == nil && restarted == 0 && pass > 0 {
			return nil
		}
		time.Sleep(healSettle)
	}
	return err
}

// EnsureUp starts every server process that is not running and waits
// until all serve; it returns how many it started.
func (c *Cluster) EnsureUp() (int, error) {
	all := c.All()
	restarted := 0
	for _, p := range all {
		if !p.Running() {
			c.logf("restarting %s (it had stopped)", p.Name)
			if err := p.Start(); err != nil {
				return restarted, err
			}
			restarted++
		}
	}
	for _, p := range all {
		if err := p.WaitReady(90 * time.Second); err != nil {
			if !p.Running() {
				// It stopped by itself (fail-stop on a lost session):
				// the next pass of Heal starts it again.
				restarted++
				continue
			}
			return restarted, err
		}
	}
	return restarted, nil
}

const (
	healSettle = 2 * time.Second
	healPasses = 4
)

// bookieDir is a bookie's data directory.
func (c *Cluster) bookieDir(p *Proc) string { return filepath.Join(c.opts.Dir, p.Name) }

// All lists every server process.
func (c *Cluster) All() []*Proc {
	all := append(append(append(append([]*Proc{}, c.ZK...), c.Bookies...), c.Brokers...), c.Proxy)
	if c.Remote != nil {
		all = append(all, c.RemoteBookie, c.Remote)
	}
	return all
}
