package promcheck

// The running system the checks query: cluster a (an etcd store, a bookie,
// a broker and a proxy, each its own process), a standalone as cluster b
// replicating with a, Prometheus scraping all four every second with
// alerts.yml loaded, and a client load on them. Every process is killed
// when the test ends; the logs and data stay under a directory the
// failure names.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/magnetar-io/magnetar/metadata/etcdtest"
)

// repoRoot is the repository's root, two levels above this file.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the source tree")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// magnetarBinary is $MAGNETAR_BIN (make test passes bin/magnetar), else a
// binary built from this tree.
func magnetarBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("MAGNETAR_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("MAGNETAR_BIN: %v", err)
		}
		return abs
	}
	bin := filepath.Join(t.TempDir(), "magnetar")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/magnetar")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/magnetar: %v\n%s", err, out)
	}
	t.Logf("built magnetar in %.1f s (set MAGNETAR_BIN to use a built one)", time.Since(start).Seconds())
	return bin
}

// proc is a child process with its output in a log file.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	exited    chan struct{}
	err       error
}

// system is everything the test started.
type system struct {
	t    *testing.T
	bin  string
	dir  string // logs, data, configuration
	etcd string // the etcd connection string

	brokerA, webA, bookie, bookieHTTP, proxy, proxyWeb, brokerB, webB, promPort int

	prom  promAPI
	procs []*proc
}

// freePorts returns n distinct free loopback ports, holding each listener
// until all are chosen so that none is handed out twice.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// newSystem prepares the work directory and the ports; start runs it.
func newSystem(t *testing.T, bin string) *system {
	dir, err := os.MkdirTemp("", "promcheck-")
	if err != nil {
		t.Fatal(err)
	}
	s := &system{t: t, bin: bin, dir: dir}
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs()
			t.Logf("logs, data and configuration kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	p := freePorts(t, 9)
	s.brokerA, s.webA, s.bookie, s.bookieHTTP, s.proxy, s.proxyWeb, s.brokerB, s.webB, s.promPort =
		p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]
	s.prom = promAPI{base: fmt.Sprintf("http://127.0.0.1:%d", s.promPort)}
	return s
}

// file writes a file under the work directory and returns its path.
func (s *system) file(name, content string) string {
	path := filepath.Join(s.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// start launches a child process that dies with the test, even if the test
// binary is killed (Pdeathsig).
func (s *system) start(name, bin string, args ...string) *proc {
	s.t.Helper()
	log := filepath.Join(s.dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, log: log, cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	s.procs = append(s.procs, p)
	s.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	})
	return p
}

// waitLog waits until p's log holds marker.
func (s *system) waitLog(p *proc, marker string, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(p.log)
		if bytes.Contains(b, []byte(marker)) {
			return
		}
		select {
		case <-p.exited:
			s.t.Fatalf("%s exited before %q: %v (log %s)", p.name, marker, p.err, p.log)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: no %q in its log after %s (log %s)", p.name, marker, within, p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run runs a short magnetar command and returns its output.
func (s *system) run(args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("magnetar %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// admin runs `magnetar admin` against a web port.
func (s *system) admin(web int, args ...string) {
	s.t.Helper()
	s.run(append([]string{"admin", "--admin-url", fmt.Sprintf("http://127.0.0.1:%d", web)}, args...)...)
}

// startMagnetar starts cluster a on etcd and standalone b, and waits until
// each is ready.
func (s *system) startMagnetar() {
	t := s.t
	etcd := etcdtest.StartForTest(t, 1, "")
	s.etcd = etcd.Connection
	meta, config := s.etcd+"/a", s.etcd+"/global"
	s.run("initialize-cluster-metadata", "--cluster", "a", "--metadata-store", meta,
		"--configuration-metadata-store", config,
		"--web-service-url", fmt.Sprintf("http://127.0.0.1:%d", s.webA),
		"--broker-service-url", fmt.Sprintf("pulsar://127.0.0.1:%d", s.brokerA))
	local := []string{"--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1"}
	bk := s.start("bookie", s.bin, append([]string{"bookie", "--config", s.file("bk_server.conf", "metadataServiceUri=metadata-store:"+meta+"\n"),
		"--journal-dirs", filepath.Join(s.dir, "bookie", "journal"), "--ledger-dirs", filepath.Join(s.dir, "bookie", "ledgers"),
		"--bookie-port", strconv.Itoa(s.bookie), "--http-port", strconv.Itoa(s.bookieHTTP)}, local...)...)
	// One bookie: ledgers of ensemble 1.
	broker := s.start("broker", s.bin, append([]string{"broker", "--config", s.file("broker.conf",
		"clusterName=a\nmanagedLedgerDefaultEnsembleSize=1\nmanagedLedgerDefaultWriteQuorum=1\nmanagedLedgerDefaultAckQuorum=1\n"),
		"--metadata-store", meta, "--configuration-metadata-store", config,
		"--broker-port", strconv.Itoa(s.brokerA), "--web-port", strconv.Itoa(s.webA)}, local...)...)
	// The brokers' ports are not Pulsar's defaults.
	proxy := s.start("proxy", s.bin, "proxy", "--config", s.file("proxy.conf", "brokerProxyAllowedTargetPorts=*\n"),
		"--metadata-store", meta, "--configuration-metadata-store", config, "--bind-address", "127.0.0.1",
		"--service-port", strconv.Itoa(s.proxy), "--web-port", strconv.Itoa(s.proxyWeb))
	standalone := s.start("standalone-b", s.bin, append([]string{"standalone", "--config", s.file("standalone.conf", ""),
		"--cluster", "b", "--data-dir", filepath.Join(s.dir, "standalone-b"),
		"--broker-port", strconv.Itoa(s.brokerB), "--web-port", strconv.Itoa(s.webB)}, local...)...)
	for _, p := range []*proc{bk, broker, proxy, standalone} {
		s.waitLog(p, " ready", 60*time.Second)
	}
	// Each cluster knows the other; namespace pc/geo replicates between
	// them; pc/app and pc/cold stay in a.
	s.admin(s.webA, "clusters", "create", "b", "--url", fmt.Sprintf("http://127.0.0.1:%d", s.webB),
		"--broker-url", fmt.Sprintf("pulsar://127.0.0.1:%d", s.brokerB))
	s.admin(s.webB, "clusters", "create", "a", "--url", fmt.Sprintf("http://127.0.0.1:%d", s.webA),
		"--broker-url", fmt.Sprintf("pulsar://127.0.0.1:%d", s.brokerA))
	for _, web := range []int{s.webA, s.webB} {
		s.admin(web, "tenants", "create", "pc", "--allowed-clusters", "a,b")
		s.admin(web, "namespaces", "create", "pc/geo", "--clusters", "a,b")
	}
	s.admin(s.webA, "namespaces", "create", "pc/app", "--clusters", "a")
	s.admin(s.webA, "namespaces", "create", "pc/cold", "--clusters", "a")
	// A backlog quota, so that its limit is exported (far above what the
	// load leaves).
	s.admin(s.webA, "namespaces", "set-backlog-quota", "pc/app", "--limit-size", "1G", "--policy", "producer_request_hold")
}

// startPrometheus starts Prometheus scraping every process each second,
// with rules, and waits until it has scraped all four targets.
func (s *system) startPrometheus(prometheus, rules string) {
	t := s.t
	target := func(port int, cluster string) string {
		return fmt.Sprintf("      - targets: [\"127.0.0.1:%d\"]\n        labels: {cluster: %s}\n", port, cluster)
	}
	job := func(name string, targets ...string) string {
		return "  - job_name: " + name + "\n    honor_labels: true\n    static_configs:\n" + strings.Join(targets, "")
	}
	// The jobs of conf/prometheus/prometheus.yml.
	conf := s.file("prometheus.yml", "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"+
		"rule_files:\n  - "+rules+"\nscrape_configs:\n"+
		job("magnetar-broker", target(s.webA, "a"), target(s.webB, "b"))+
		job("magnetar-bookie", target(s.bookieHTTP, "a"))+
		job("magnetar-proxy", target(s.proxyWeb, "a")))
	p := s.start("prometheus", prometheus, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(s.dir, "tsdb"),
		"--web.listen-address="+fmt.Sprintf("127.0.0.1:%d", s.promPort))
	s.waitFor("Prometheus ready", 30*time.Second, func() (bool, string) {
		select {
		case <-p.exited:
			t.Fatalf("prometheus exited: %v (log %s)", p.err, p.log)
		default:
		}
		resp, err := http.Get(s.prom.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	s.waitFor("every target scraped", 30*time.Second, func() (bool, string) {
		v, err := s.prom.query(context.Background(), `up{job=~"magnetar-.*"} == 1`)
		if err != nil {
			return false, err.Error()
		}
		return len(v) == 4, fmt.Sprintf("up: %s", names(v, "instance"))
	})
}

// waitFor polls cond until it holds; the failure says what it last saw.
func (s *system) waitFor(what string, within time.Duration, cond func() (bool, string)) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not after %s (last: %s)", what, within, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dumpLogs prints the end of every process's log.
func (s *system) dumpLogs() {
	for _, p := range s.procs {
		b, _ := os.ReadFile(p.log)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		s.t.Logf("--- %s (%s), last lines:\n%s", p.name, p.log, strings.Join(lines, "\n"))
	}
}

// load is the client traffic: steady producers and consumers until stop.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	sent   int
	errs   []error
}

func (l *load) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, err)
	}
}

// client opens a Pulsar client closed (within a bound) before the
// processes are killed: cleanups run last-registered first.
func (s *system) client(port int) pulsar.Client {
	s.t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: fmt.Sprintf("pulsar://127.0.0.1:%d", port),
		OperationTimeout: 20 * time.Second, ConnectionTimeout: 5 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		done := make(chan struct{})
		go func() { c.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			s.t.Log("a Pulsar client did not close within 10 s")
		}
	})
	return c
}

// coldReads leaves a backlog on persistent://pc/cold/backlog (subscription
// stuck, 200 messages never acknowledged), then reads the topic from the
// bookie twice: the namespace is unloaded, so the topic's next owner has
// nothing cached, and a new subscription reads from the earliest message.
// The second pass comes after Prometheus has scraped the first, so that
// the bookie's batch-read counters rise between two scrapes.
func (s *system) coldReads(ctx context.Context, c pulsar.Client) {
	t := s.t
	const topic, n = "persistent://pc/cold/backlog", 200
	stuck, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "stuck"})
	if err != nil {
		t.Fatalf("subscribe stuck: %v", err)
	}
	stuck.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatalf("producer on %s: %v", topic, err)
	}
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "cold %d", i)}); err != nil {
			t.Fatalf("send to %s: %v", topic, err)
		}
	}
	p.Close()
	for pass := 1; pass <= 2; pass++ {
		s.admin(s.webA, "namespaces", "unload", "pc/cold")
		r, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: fmt.Sprintf("replay-%d", pass),
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatalf("subscribe replay-%d: %v", pass, err)
		}
		for i := range n {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			m, err := r.Receive(rctx)
			cancel()
			if err != nil {
				t.Fatalf("replay-%d: message %d of %d: %v", pass, i, n, err)
			}
			_ = r.Ack(m)
		}
		r.Close()
		if pass == 1 {
			s.waitFor("the bookie's batch reads scraped", 30*time.Second, func() (bool, string) {
				v, err := s.prom.query(ctx, `bookkeeper_server_BATCH_READ_ENTRY_REQUEST_count`)
				if err != nil {
					return false, err.Error()
				}
				return len(v) > 0, "no series yet"
			})
		}
	}
}

// steady starts producers and consumers that run until l.stop: three
// topics of pc/app produced through the proxy and consumed from the
// broker, a topic of pc/geo produced in a (replicated to b), and a topic
// of b's own.
func (s *system) steady(viaProxy, direct, inB pulsar.Client) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	produce := func(c pulsar.Client, topic string, every time.Duration) {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			s.t.Fatalf("producer on %s: %v", topic, err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer p.Close()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 256)}); err != nil {
					if ctx.Err() == nil {
						l.fail(fmt.Errorf("send to %s: %w", topic, err))
					}
					continue
				}
				l.mu.Lock()
				l.sent++
				l.mu.Unlock()
			}
		}()
	}
	consume := func(c pulsar.Client, topic string) {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "live", Type: pulsar.Shared})
		if err != nil {
			s.t.Fatalf("subscribe to %s: %v", topic, err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer cons.Close()
			for {
				m, err := cons.Receive(ctx)
				if err != nil {
					if ctx.Err() == nil {
						l.fail(fmt.Errorf("receive from %s: %w", topic, err))
					}
					return
				}
				_ = cons.Ack(m)
			}
		}()
	}
	for i := range 3 {
		topic := fmt.Sprintf("persistent://pc/app/orders-%d", i)
		consume(direct, topic)
		produce(viaProxy, topic, 50*time.Millisecond)
	}
	produce(direct, "persistent://pc/geo/events", 100*time.Millisecond)
	consume(inB, "persistent://public/default/local")
	produce(inB, "persistent://public/default/local", 100*time.Millisecond)
	// Before the clients close, should the test end early.
	s.t.Cleanup(func() { cancel(); l.wg.Wait() })
	return l
}

// stop ends the load and returns its first errors.
func (l *load) stop() (sent int, err error) {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, errors.Join(l.errs...)
}
