package main

// The synchronous geo-replication section (issue 23, "the benchmark report
// shows publish latency with a 5 ms emulated inter-region RTT"): a
// stretched cluster on this machine: one bookie in each of regions a, b
// and c (--region), and a broker in region a writing E=3/Qw=3/Qa=2 with
// region-aware placement enforced. The broker reaches b's and c's bookies
// through internal/delayrelay relays (its bookieAddressMap), its own
// region's directly; the producer is in region a too. The same 1 KiB
// unbatched publish at a fixed rate runs with no delay and with a 5 ms
// round trip (2.5 ms each way), alternated: an add is acknowledged by the
// local bookie and the nearer remote one, so p50 should rise by one round
// trip. ZooKeeper (one node) is not on the publish path and not delayed.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/internal/delayrelay"
	"github.com/magnetar-io/magnetar/metadata/zktest"
)

const (
	// syncGeoRTT is the emulated inter-region round trip.
	syncGeoRTT = 5 * time.Millisecond
	// syncGeoRate is the publish rate (1 KiB, unbatched): low enough that
	// queueing does not hide the round trip.
	syncGeoRate = 500
	// syncGeoRounds is how many passes of each kind alternate.
	syncGeoRounds = 2
)

// runSyncGeo measures publish latency on the stretched cluster without and
// with the inter-region round trip.
func (r *runner) runSyncGeo(ctx context.Context) error {
	d := &r.res.SyncGeo
	dir := filepath.Join(r.o.work, "syncgeo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	zk, err := zktest.Start(filepath.Join(dir, "zk"), 1)
	if err != nil {
		return fmt.Errorf("zookeeper (scripts/zookeeper.sh install): %w", err)
	}
	defer zk.Stop()
	conn := zk.Connection + "/syncgeo"
	t, relays, err := r.startStretched(ctx, dir, conn)
	defer func() {
		for _, rl := range relays {
			_ = rl.Close()
		}
		for _, s := range t.servers {
			_ = s.stop()
		}
	}()
	if err != nil {
		return err
	}
	d.Ran = true
	d.RTTMillis = float64(syncGeoRTT) / float64(time.Millisecond)
	d.Setup = fmt.Sprintf("ZooKeeper (1 node, not delayed), one bookie process in each of regions a, b, c and a broker in a "+
		"(E=3, Qw=3, Qa=2, region-aware, enforced); the broker reaches b's and c's bookies through delaying relays "+
		"(internal/delayrelay, bookieAddressMap), a's directly; the producer is in a; 1 KiB, batching off, %d msg/s; "+
		"passes alternated, each kind %d times", syncGeoRate, syncGeoRounds)
	for i := range syncGeoRounds {
		for _, rtt := range []time.Duration{0, syncGeoRTT} {
			for _, rl := range relays {
				rl.SetDelay(rtt / 2)
			}
			label := fmt.Sprintf("syncgeo rtt %s #%d", rtt, i+1)
			run, err := r.perf(ctx, t, label, "produce", "--size", "1024", "--batching=false", "--rate", itoa(syncGeoRate),
				"--topic", fmt.Sprintf("persistent://public/default/syncgeo-%d-%d", rtt.Milliseconds(), i))
			if err != nil {
				return err
			}
			if rtt == 0 {
				d.Local = append(d.Local, run)
			} else {
				d.Remote = append(d.Remote, run)
			}
		}
	}
	return nil
}

// startStretched initialises the cluster and starts a bookie per region
// and the broker in region a with relays to b's and c's bookies.
func (r *runner) startStretched(ctx context.Context, dir, conn string) (target, []*delayrelay.Relay, error) {
	t := target{name: "syncgeo"}
	var relays []*delayrelay.Relay
	web, err1 := freePort()
	bin, err2 := freePort()
	if err1 != nil || err2 != nil {
		return t, nil, fmt.Errorf("free ports: %v %v", err1, err2)
	}
	t.service, t.admin = fmt.Sprintf("pulsar://127.0.0.1:%d", bin), fmt.Sprintf("http://127.0.0.1:%d", web)
	if err := r.magnetarCmd(ctx, "initialize-cluster-metadata", "--cluster", "syncgeo", "--metadata-store", conn,
		"--web-service-url", t.admin, "--broker-service-url", t.service); err != nil {
		return t, nil, err
	}
	var remote []string
	for i, region := range []string{"a", "b", "c"} {
		s, metrics, addr, err := r.startBookie(dir, conn, i, "--region", region)
		if err != nil {
			return t, relays, fmt.Errorf("bookie in region %s: %w", region, err)
		}
		t.servers = append(t.servers, s)
		t.metrics = append(t.metrics, metrics)
		if region == "a" {
			continue
		}
		rl, err := delayrelay.Listen("127.0.0.1:0", addr, 0, nil)
		if err != nil {
			return t, relays, err
		}
		relays = append(relays, rl)
		remote = append(remote, addr+"="+rl.Addr())
	}
	conf := filepath.Join(dir, "broker.conf")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{"clusterName=syncgeo", "metadataStoreUrl=" + conn,
		"managedLedgerDefaultEnsembleSize=3", "managedLedgerDefaultWriteQuorum=3", "managedLedgerDefaultAckQuorum=2",
		"bookkeeperClientRegionawarePolicyEnabled=true", "bookkeeperClientMinNumRacksPerWriteQuorum=2",
		"bookkeeperClientEnforceMinNumRacksPerWriteQuorum=true", "bookieAddressMap=" + strings.Join(remote, ","),
		"managedLedgerCacheSizeMB=256", "bindAddress=127.0.0.1", "advertisedAddress=127.0.0.1",
		"brokerServicePort=" + itoa(bin), "webServicePort=" + itoa(web), ""}, "\n")), 0o644); err != nil {
		return t, relays, err
	}
	s, err := startServer("broker", r.o.magnetar, filepath.Join(r.logDir, "syncgeo-broker.log"), "broker", "--config", conf)
	if err != nil {
		return t, relays, err
	}
	t.servers = append(t.servers, s)
	t.metrics = append(t.metrics, fmt.Sprintf("http://127.0.0.1:%d/metrics", web))
	return t, relays, s.waitReady(time.Minute)
}

// writeSyncGeo is the synchronous geo-replication section of the report.
func writeSyncGeo(w io.Writer, res *Results) {
	d := res.SyncGeo
	if !d.Ran || len(d.Local) == 0 || len(d.Remote) == 0 {
		skippedSection(w, "Synchronous geo-replication", d.Skipped)
		return
	}
	fmt.Fprintf(w, "## Synchronous geo-replication: publish latency with a %.0f ms inter-region round trip\n\n%s.\n\n"+
		"| inter-region RTT | run | achieved | publish p50 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|\n", d.RTTMillis, d.Setup)
	rows := func(name string, runs []Run) {
		for i, run := range runs {
			l := lat(run.Report.PublishLatency)
			fmt.Fprintf(w, "| %s | %d | %.0f msg/s | %s | %s | %s | %s |\n", name, i+1, run.Report.PublishPS,
				us(l.P50), us(l.P99), us(l.P999), us(l.Max))
		}
	}
	rows("none", d.Local)
	rows(fmt.Sprintf("%.0f ms", d.RTTMillis), d.Remote)
	local, remote := medianP50(d.Local), medianP50(d.Remote)
	fmt.Fprintf(w, "\nMedian publish p50: %s without, %s with the round trip: **+%s** (one round trip is %.0f ms).\n\n",
		us(local), us(remote), us(remote-local), d.RTTMillis)
}

// medianP50 is the median of runs' publish p50 (µs; the lower middle for
// an even count, the fairer side for a latency).
func medianP50(runs []Run) int64 {
	ps := make([]int64, 0, len(runs))
	for _, r := range runs {
		ps = append(ps, lat(r.Report.PublishLatency).P50)
	}
	slices.Sort(ps)
	if len(ps) == 0 {
		return 0
	}
	return ps[(len(ps)-1)/2]
}
