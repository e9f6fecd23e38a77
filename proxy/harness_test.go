package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/netio"
)

// testLog keeps every log line and prints them if the test fails.
type testLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newTestLog(t *testing.T) *testLog {
	l := &testLog{}
	t.Cleanup(func() {
		if t.Failed() {
			l.mu.Lock()
			b := l.buf.Bytes()
			if len(b) > 64<<10 {
				b = b[len(b)-64<<10:]
			}
			t.Logf("logs:\n%s", b)
			l.mu.Unlock()
		}
	})
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count is how many times s occurs in the log so far.
func (l *testLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Count(l.buf.Bytes(), []byte(s))
}

func (l *testLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// env is brokers in cluster mode sharing one metadata server and one
// topic storage, and the proxies in front of them.
type env struct {
	t       *testing.T
	meta    *metadata.MemoryServer
	ledgers managedledger.Factory
	log     *testLog
	brokers []*testBroker
	// brokerCfg holds the settings of the brokers it starts.
	brokerCfg broker.Config
}

type testBroker struct {
	b     *broker.Broker
	srv   *netio.Server
	web   *httptest.Server
	own   *ownership.Service
	once  sync.Once
	store metadata.Store
}

func newEnv(t *testing.T, brokers int) *env {
	return newEnvWith(t, brokers, broker.Config{})
}

// newEnvWith is newEnv with the brokers' settings of cfg (cluster,
// stores, logger and stats interval are the env's).
func newEnvWith(t *testing.T, brokers int, cfg broker.Config) *env {
	e := &env{t: t, meta: metadata.NewMemoryServer(), log: newTestLog(t), brokerCfg: cfg,
		ledgers: managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: 100})}
	e.initMetadata()
	for range brokers {
		e.startBroker()
	}
	return e
}

// initMetadata records cluster "test", tenant public and public/default,
// as initialize-cluster-metadata does.
func (e *env) initMetadata() {
	ctx := context.Background()
	res, err := resources.New(ctx, e.meta.NewSession(), resources.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Close()
	if err := res.CreateCluster(ctx, "test", resources.ClusterData{ServiceURL: "http://127.0.0.1:1"}); err != nil {
		e.t.Fatal(err)
	}
	if err := res.CreateTenant(ctx, "public", resources.TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{"test"}}); err != nil {
		e.t.Fatal(err)
	}
	p := resources.NewPolicies()
	p.ReplicationClusters = []string{"test"}
	if _, err := res.CreateNamespace(ctx, "public", "default", p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) startBroker() *testBroker {
	t := e.t
	store := e.meta.NewSession()
	res, err := resources.New(context.Background(), store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	reg, err := schema.New(schema.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.brokerCfg
	cfg.ClusterName, cfg.Metadata, cfg.Resources, cfg.Schemas = "test", store, res, reg
	cfg.StatsUpdateFrequency, cfg.Logger = 100*time.Millisecond, e.log.logger()
	b := broker.New(cfg, e.ledgers)
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(b.HTTPHandler())
	own, err := b.EnableOwnership(context.Background(), ownership.Config{Store: store,
		BrokerID: strings.TrimPrefix(web.URL, "http://"), WebServiceURL: web.URL,
		PulsarServiceURL: "pulsar://" + srv.Addr().String(), ReportInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tb := &testBroker{b: b, srv: srv, web: web, own: own, store: store}
	t.Cleanup(tb.stop)
	e.brokers = append(e.brokers, tb)
	return tb
}

// stop ends the broker as its process exiting would.
func (tb *testBroker) stop() {
	tb.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tb.own.Close(ctx)
		tb.web.Close()
		tb.srv.Close(ctx)
		tb.b.Close(ctx)
	})
}

type testProxy struct {
	p    *Proxy
	url  string // pulsar://
	addr string // host:port
	web  *httptest.Server
	reg  *prometheus.Registry
}

// startProxy runs a proxy discovering e's brokers; cfg's zero fields take
// the test defaults (every port allowed: brokers listen on random ones).
func (e *env) startProxy(cfg Config) *testProxy {
	t := e.t
	if cfg.Metadata == nil && cfg.BrokerServiceURL == "" {
		cfg.Metadata = e.meta.NewSession()
	}
	if cfg.BrokerProxyAllowedTargetPorts == "" {
		cfg.BrokerProxyAllowedTargetPorts = "*"
	}
	reg := prometheus.NewRegistry()
	cfg.Registry, cfg.Logger = reg, e.log.logger().With("proxy", true)
	p, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := p.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(p.HTTPHandler())
	t.Cleanup(func() { web.Close(); p.Close() })
	return &testProxy{p: p, url: "pulsar://" + addr.String(), addr: addr.String(), web: web, reg: reg}
}

func (e *env) client(url string) pulsar.Client {
	e.t.Helper()
	lg := logrus.New()
	lg.SetOutput(e.log)
	lg.SetLevel(logrus.InfoLevel)
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 20 * time.Second,
		ConnectionTimeout: 5 * time.Second, Logger: plog.NewLoggerWithLogrus(lg)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

func (e *env) admin(webURL string) pulsaradmin.Client {
	e.t.Helper()
	a, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: webURL})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

var _ = io.Discard
