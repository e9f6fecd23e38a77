package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
)

func writeConf(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "standalone.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStandaloneConfigFile(t *testing.T) {
	p := writeConf(t, "# comment\nclusterName=east\nbrokerServicePort=7000\nwebServicePort=7001\n"+
		"keepAliveIntervalSeconds=5\nbookkeeperClientHealthCheckEnabled=true\nmaxConcurrentLookupRequest=7\nmaxConcurrentTopicLoadRequest=9\n"+
		"brokerMaxConnections=1000\nbrokerMaxConnectionsPerIp=50\n\n")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	f, err := parseStandaloneFlags([]string{"--config", p, "--broker-port", "7100"}, io.Discard, log)
	if err != nil {
		t.Fatal(err)
	}
	if f.cluster != "east" || f.brokerPort != 7100 || f.webPort != 7001 || f.keepAlive != 5*time.Second ||
		f.maxLookups != 7 || f.maxTopicLoads != 9 || f.maxConns != 1000 || f.maxConnsPerIP != 50 {
		t.Fatalf("config applied wrongly (flags must win): %+v", f)
	}
	if !strings.Contains(logs.String(), "bookkeeperClientHealthCheckEnabled") {
		t.Fatalf("unknown key not reported: %s", logs.String())
	}
}

func TestStandaloneConfigErrors(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for text, want := range map[string]string{
		"clusterName\n":                       "want key=value",
		"brokerServicePort=lots\n":            "brokerServicePort: want an integer",
		"keepAliveIntervalSeconds=0\n":        "keepAliveIntervalSeconds",
		"brokerMaxConnections=-1\n":           "brokerMaxConnections: want a non-negative integer",
		"managedLedgerOffloadDriver=aws-s3\n": `managedLedgerOffloadDriver "aws-s3"`,
		"managedLedgerOffloadDriver=filesystem\nfileSystemURI=hdfs://nn/x\n": "hdfs",
	} {
		_, err := parseStandaloneFlags([]string{"--config", writeConf(t, text)}, io.Discard, log)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", text, err, want)
		}
	}
	if _, err := parseStandaloneFlags([]string{"--config", "/nonexistent/x.conf"}, io.Discard, log); err == nil {
		t.Error("missing config file accepted")
	}
}

// The shipped conf/broker.conf parses, every key in it is one we use, and
// flags win over it.
func TestBrokerConfigFileShipped(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	f, err := parseBrokerFlags([]string{"--config", "../../conf/broker.conf", "--metadata-store", "zk:127.0.0.1:2181/x",
		"--cluster", "c1", "--web-port", "9080"}, io.Discard, log)
	if err != nil {
		t.Fatal(err)
	}
	if f.cluster != "c1" || f.webPort != 9080 || f.configURL != "zk:127.0.0.1:2181/x" || f.ensemble != 2 ||
		f.lb.SheddingInterval != time.Minute || f.lb.SheddingGracePeriod != 30*time.Minute || f.sessionTimout != 30*time.Second {
		t.Fatalf("conf/broker.conf applied wrongly: %+v", f)
	}
	if lb := f.lb; lb.MinUnloadMessage != 1000 || lb.MinUnloadMessageThroughput != 1<<20 || lb.MaxUnloadPercentage != 0.2 ||
		lb.MsgThroughputMultiplierThreshold != 4 || lb.MaxUnloadBundlesPerShedding != -1 {
		t.Fatalf("conf/broker.conf's UniformLoadShedder keys applied wrongly: %+v", lb)
	}
	if strings.Contains(logs.String(), "unknown") || strings.Contains(logs.String(), "not used") {
		t.Fatalf("conf/broker.conf has keys we do not use: %s", logs.String())
	}
	// Without a metadata store the broker refuses to start, naming the key.
	if _, err := parseBrokerFlags([]string{"--config", "../../conf/broker.conf", "--cluster", "c1"}, io.Discard, log); err == nil ||
		!strings.Contains(err.Error(), "metadataStoreUrl") {
		t.Fatalf("missing metadata store: %v", err)
	}
	if !f.placement.rackAware || f.placement.regionAware || f.placement.minRacks != 2 || f.placement.enforce {
		t.Fatalf("conf/broker.conf placement: %+v, want Pulsar's defaults", f.placement)
	}
	geo := writeConf(t, "bookkeeperClientRegionawarePolicyEnabled=true\nbookkeeperClientEnforceMinNumRacksPerWriteQuorum=true\n"+
		"bookkeeperClientMinNumRacksPerWriteQuorum=3\n")
	g, err := parseBrokerFlags([]string{"--config", geo, "--metadata-store", "memory:", "--cluster", "c"}, io.Discard, log)
	if err != nil || !g.placement.regionAware || !g.placement.enforce || g.placement.minRacks != 3 {
		t.Fatalf("placement keys: %+v, %v", g.placement, err)
	}
	if sp, ok := g.placement.policy(log).(*ledger.SpreadPlacement); !ok || sp.Kind != "region" || sp.MinDomains != 3 || !sp.Enforce {
		t.Fatalf("region-aware keys built %#v", g.placement.policy(log))
	}
	// bookieAddressMap: registered=dialed pairs reach the ledger client;
	// a pair that is not two host:port is refused.
	m := writeConf(t, "bookieAddressMap=127.0.0.1:3181=127.0.0.1:4181, 127.0.0.1:3182=127.0.0.1:4182\n")
	if g, err := parseBrokerFlags([]string{"--config", m, "--metadata-store", "memory:", "--cluster", "c"}, io.Discard, log); err != nil ||
		len(g.placement.dialAt) != 2 || g.placement.dialAt["127.0.0.1:3182"] != "127.0.0.1:4182" {
		t.Fatalf("bookieAddressMap: %v, %v", g.placement.dialAt, err)
	}
	for _, bad := range []string{"127.0.0.1:3181", "127.0.0.1:3181=nohost", "a:1=b:2,a:1=c:3"} {
		m := writeConf(t, "bookieAddressMap="+bad+"\n")
		if _, err := parseBrokerFlags([]string{"--config", m, "--metadata-store", "memory:", "--cluster", "c"}, io.Discard, log); err == nil {
			t.Fatalf("bookieAddressMap=%s accepted", bad)
		}
	}
	// exposeTopicLevelMetricsInPrometheus: on by default, as Pulsar's;
	// off sums the topic metrics per namespace.
	for conf, byNamespace := range map[string]bool{"": false, "exposeTopicLevelMetricsInPrometheus=false\n": true} {
		g, err := parseBrokerFlags([]string{"--config", writeConf(t, conf), "--metadata-store", "memory:", "--cluster", "c"}, io.Discard, log)
		if err != nil {
			t.Fatal(err)
		}
		store := metadata.NewMemoryServer().NewSession()
		cfg, err := g.brokerConfig("c", "localhost:6650", store, nil, log)
		store.Close()
		if err != nil || cfg.MetricsByNamespace != byNamespace {
			t.Fatalf("%q: MetricsByNamespace %v (%v), want %v", conf, cfg.MetricsByNamespace, err, byNamespace)
		}
	}
	// A bad quorum is refused.
	p := writeConf(t, "managedLedgerDefaultEnsembleSize=2\nmanagedLedgerDefaultWriteQuorum=3\n")
	if _, err := parseBrokerFlags([]string{"--config", p, "--metadata-store", "memory:", "--cluster", "c"}, io.Discard, log); err == nil {
		t.Fatal("E=2 Qw=3 accepted")
	}
}

// The shipped conf/bookkeeper.conf and conf/proxy.conf parse, and every key
// in them is one we use (make dist ships them).
func TestBookieAndProxyConfigFilesShipped(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	bk, err := parseBookieFlags("magnetar bookie", []string{"--config", "../../conf/bookkeeper.conf"}, io.Discard, log)
	if err != nil {
		t.Fatal(err)
	}
	if bk.metadataURL != "zk:zk1:2181,zk2:2181,zk3:2181/magnetar" || bk.journalDirs != "/mnt/journal/magnetar" ||
		bk.ledgerDirs != "/mnt/data1/magnetar,/mnt/data2/magnetar" || bk.diskThreshold != 0.95 {
		t.Fatalf("conf/bookkeeper.conf applied wrongly: %+v", bk)
	}
	if !bk.placement.rackAware || bk.placement.regionAware || bk.placement.minRacks != 2 {
		t.Fatalf("conf/bookkeeper.conf placement: %+v", bk.placement)
	}
	px, err := parseProxyFlags([]string{"--config", "../../conf/proxy.conf"}, io.Discard, log)
	if err != nil {
		t.Fatal(err)
	}
	if px.metadataURL != "zk:zk1:2181,zk2:2181,zk3:2181/magnetar" || px.servicePort != 6650 {
		t.Fatalf("conf/proxy.conf applied wrongly: %+v", px)
	}
	if strings.Contains(logs.String(), "unknown") || strings.Contains(logs.String(), "not used") {
		t.Fatalf("shipped configuration files have keys we do not use: %s", logs.String())
	}
}

// metadataServiceUri takes the forms Pulsar's bookkeeper.conf uses: a
// metadata URL as brokers take it, BookKeeper's zk:// form, and Pulsar's
// metadata-store: driver prefix, the documented way to put bookies on etcd
// (metadataServiceUri=metadata-store:etcd:http://...).
func TestBookieMetadataServiceURIForms(t *testing.T) {
	dir := t.TempDir()
	for uri, want := range map[string]string{
		"zk:zk1:2181/m":                             "zk:zk1:2181/m",
		"zk://zk1:2181/m":                           "zk:zk1:2181/m",
		"etcd:http://e1:2379,http://e2:2379/m":      "etcd:http://e1:2379,http://e2:2379/m",
		"metadata-store:etcd:http://e1:2379/m":      "etcd:http://e1:2379/m",
		"metadata-store:zk:zk1:2181,zk2:2181/m":     "zk:zk1:2181,zk2:2181/m",
		"metadata-store:local:" + dir + "/metadata": "local:" + dir + "/metadata",
	} {
		path := filepath.Join(dir, "bk.conf")
		writeFile(t, path, "metadataServiceUri="+uri+"\n")
		f, err := parseBookieFlags("magnetar bookie", []string{"--config", path}, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Errorf("%s: %v", uri, err)
			continue
		}
		if f.metadataURL != want {
			t.Errorf("%s: metadata URL %q, want %q", uri, f.metadataURL, want)
		}
		if _, err := metadata.ParseTarget(f.metadataURL); err != nil {
			t.Errorf("%s: %v", uri, err)
		}
	}
}
