package main

import (
	"context"
	"errors"
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

// runCluster measures the 1 KiB maximum and latency at 50% of it, each on
// a fresh cluster: ZooKeeper, three bookie processes and a broker on this
// machine, all on an emptied directory.
func (r *runner) runCluster(ctx context.Context) error {
	d := &r.res.Cluster
	d.Ran = true
	d.Setup = "ZooKeeper, 3 bookie processes (journal and entry logs on the work directory) and 1 broker process on this machine; E=3, Qw=2, Qa=2; " +
		"a fresh cluster (ZooKeeper's data too) on an emptied directory for each run"
	d.CacheMiB = managedledger.DefaultCacheSize>>20 + clusterBookies*(entrylog.DefaultWriteCacheMaxSize+entrylog.DefaultReadCacheMaxSize)>>20
	return r.throughputAndLatency(ctx, r.clusterOn(ctx), filepath.Join(r.o.work, "cluster"), d, false)
}

// clusterOn is a starter of clusters: ZooKeeper in dir/zk, then the
// bookies and the broker (startCluster); stop ends them in reverse order.
func (r *runner) clusterOn(ctx context.Context) starter {
	return func(dir string) (target, func() error, error) {
		zk, err := zktest.Start(filepath.Join(dir, "zk"), 1)
		if err != nil {
			return target{}, nil, fmt.Errorf("zookeeper (scripts/zookeeper.sh install): %w", err)
		}
		t, err := r.startCluster(ctx, dir, zk.Connection+"/bench")
		stop := func() error {
			var errs []error
			for i := len(t.servers) - 1; i >= 0; i-- {
				errs = append(errs, t.servers[i].stop())
			}
			if err := zk.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping zookeeper: %w", err))
			}
			return errors.Join(errs...)
		}
		if err != nil {
			return target{}, nil, errors.Join(err, stop())
		}
		return t, stop, nil
	}
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
	s, err := startServer("broker", r.o.magnetar, filepath.Join(r.logDir, fmt.Sprintf("%02d-cluster-broker.log", r.nextSeq())), "broker", "--config", conf)
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
	s, err := startServer(fmt.Sprintf("bookie%d", i), r.o.magnetar, filepath.Join(r.logDir, fmt.Sprintf("%02d-%s-bookie%d.log", r.nextSeq(), filepath.Base(dir), i)),
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
