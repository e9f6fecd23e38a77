package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// clusterBookies is the cluster's bookie count; its ledgers are written
// E=3, Qw=2, Qa=2.
const clusterBookies = 3

// runCluster runs ZooKeeper, three bookie processes and a broker on this
// machine and measures the 1 KiB maximum and latency at 50% of it.
func (r *runner) runCluster(ctx context.Context) error {
	d := &r.res.Cluster
	dir := filepath.Join(r.o.work, "cluster")
	zk, err := zktest.Start(filepath.Join(dir, "zk"), 1)
	if err != nil {
		return fmt.Errorf("zookeeper (scripts/zookeeper.sh install): %w", err)
	}
	defer zk.Stop()
	conn := zk.Connection + "/bench"
	t, err := r.startCluster(ctx, dir, conn)
	defer func() {
		for _, s := range t.servers {
			_ = s.stop()
		}
	}()
	if err != nil {
		return err
	}
	d.Ran = true
	d.Setup = "ZooKeeper, 3 bookie processes (journal and entry logs on the work directory) and 1 broker process on this machine; E=3, Qw=2, Qa=2"
	d.CacheMiB = managedledger.DefaultCacheSize>>20 + clusterBookies*(entrylog.DefaultWriteCacheMaxSize+entrylog.DefaultReadCacheMaxSize)>>20
	err = r.throughputAndLatency(ctx, t, d, false)
	d.PeakRSSMiB = peakRSS(t)
	return err
}

// startCluster initialises the cluster's metadata and starts its
// processes; the target lists every started server, also on error.
func (r *runner) startCluster(ctx context.Context, dir, conn string) (target, error) {
	t := target{name: "cluster"}
	web, err1 := freePort()
	bin, err2 := freePort()
	if err1 != nil || err2 != nil {
		return t, fmt.Errorf("free ports: %v %v", err1, err2)
	}
	t.service, t.admin = fmt.Sprintf("pulsar://127.0.0.1:%d", bin), fmt.Sprintf("http://127.0.0.1:%d", web)
	if err := r.magnetarCmd(ctx, "initialize-cluster-metadata", "--cluster", "bench", "--metadata-store", conn,
		"--web-service-url", t.admin, "--broker-service-url", t.service); err != nil {
		return t, err
	}
	for i := range clusterBookies {
		s, metrics, _, err := r.startBookie(dir, conn, i)
		if err != nil {
			return t, err
		}
		t.servers = append(t.servers, s)
		t.metrics = append(t.metrics, metrics)
	}
	conf := filepath.Join(dir, "broker.conf")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{"clusterName=bench", "metadataStoreUrl=" + conn,
		"managedLedgerDefaultEnsembleSize=3", "managedLedgerDefaultWriteQuorum=2", "managedLedgerDefaultAckQuorum=2",
		"managedLedgerCacheSizeMB=256", "bindAddress=127.0.0.1", "advertisedAddress=127.0.0.1",
		"brokerServicePort=" + itoa(bin), "webServicePort=" + itoa(web), ""}, "\n")), 0o644); err != nil {
		return t, err
	}
	s, err := startServer("broker", r.o.magnetar, filepath.Join(r.logDir, "cluster-broker.log"), "broker", "--config", conf)
	if err != nil {
		return t, err
	}
	t.servers = append(t.servers, s)
	t.metrics = append(t.metrics, fmt.Sprintf("http://127.0.0.1:%d/metrics", web))
	return t, s.waitReady(time.Minute)
}

// startBookie starts bookie i with extra flags; it returns the server, its
// metrics URL and its bookie address (host:port, also its id).
func (r *runner) startBookie(dir, conn string, i int, extra ...string) (*server, string, string, error) {
	port, err1 := freePort()
	httpPort, err2 := freePort()
	if err1 != nil || err2 != nil {
		return nil, "", "", fmt.Errorf("free ports: %v %v", err1, err2)
	}
	d := filepath.Join(dir, fmt.Sprintf("bookie%d", i))
	conf := filepath.Join(dir, fmt.Sprintf("bookie%d.conf", i))
	// The bookies share this machine's one disk and two cores: each gets
	// the default caches, as three bookie hosts would.
	if err := os.WriteFile(conf, []byte("dbStorage_writeCacheMaxSizeMb=64\ndbStorage_readAheadCacheMaxSizeMb=64\n"), 0o644); err != nil {
		return nil, "", "", err
	}
	s, err := startServer(fmt.Sprintf("bookie%d", i), r.o.magnetar, filepath.Join(r.logDir, fmt.Sprintf("%s-bookie%d.log", filepath.Base(dir), i)),
		append([]string{"bookie", "--config", conf, "--metadata-store", conn, "--journal-dirs", d + "/journal", "--ledger-dirs", d + "/ledgers",
			"--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
			"--bookie-port", itoa(port), "--http-port", itoa(httpPort)}, extra...)...)
	if err != nil {
		return nil, "", "", err
	}
	if err := s.waitReady(time.Minute); err != nil {
		_ = s.stop()
		return nil, "", "", err
	}
	return s, fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort), fmt.Sprintf("127.0.0.1:%d", port), nil
}
