// Command benchreport runs Magnetar's benchmark scenarios side by side, in
// one run on one machine, with the machine's own limits and with NATS
// JetStream, and writes REPORT.md with SVG charts (make bench-report).
//
// What it runs, in order:
//
//   - the machine: `magnetar perf disk` (write+datasync bandwidth at the
//     journal's group size, one datasync's latency, cold sequential read)
//     and loopback TCP bandwidth measured here;
//
//   - a standalone (one process: broker, bookie, metadata): maximum
//     durable publish throughput for 100 B, 1 KiB and 64 KiB; publish and
//     end-to-end latency at 10%, 50% and 80% of the 1 KiB maximum; 1,000
//     and 10,000 topics with a producer each; a catch-up read of a backlog
//     after a restart with the page cache dropped; the highest peak RSS of
//     its processes against its configured caches; then the 50% point with
//     the flight recorder on; then in-memory storage (memory.go): 60 s at
//     its maximum with no subscription and 60 s with a consumer
//     acknowledging at the durable maximum's rate (peak RSS of each), the
//     standalone's 50% rate, and 20,000, 40,000 and 60,000 msg/s;
//
//   - a cluster on this machine: ZooKeeper, 3 bookie processes and a broker
//     writing E=3, Qw=2, Qa=2: maximum 1 KiB throughput and latency at 50%;
//
//   - NATS JetStream with file storage, its default sync and with
//     sync_interval: always: maximum 1 KiB async publish, and latency at the
//     same rate as Magnetar's 50% point (natsperf); then NATS's own
//     benchmark, natscli's `nats bench js pub async` (natscli.go), 1 KiB,
//     one client, batches of 500, for at least 20 s, on the default sync:
//     the throughput target compares with the higher of the two default
//     figures;
//
//   - tls (tls.go): one durable standalone with brokerServicePortTls and a
//     throwaway CA and 127.0.0.1 certificate made at run time; the 1 KiB
//     maximum over pulsar:// and pulsar+ssl://, alternated twice; the
//     target compares the medians (TLS at least 0.8 x plaintext);
//
//   - proxy (proxy.go): a durable standalone and a `magnetar proxy` child
//     process in front of it; the 1 KiB maximum direct and through the
//     proxy, alternated twice, then e2e at 50% of the direct maximum each
//     way; the proxy's CPU (/proc/<pid>/stat) per GiB it forwarded (its
//     pulsar_proxy_binary_bytes); targets 0.9 x direct and at most 1 ms
//     added publish p99;
//
//   - metadata (metastore.go): create, CAS put, get and children through
//     metadata.Open on local, ZooKeeper and etcd (one real server each, by
//     scripts/zookeeper.sh and scripts/etcd.sh), 16 at once, with HDR
//     latencies; then a standalone on each backend as its metadata store:
//     the time to create producers on 1,000 new topics, and on the same
//     topics again after their namespace was unloaded;
//
//   - geo (geo.go): two durable standalones (clusters bench-a, bench-b)
//     replicating namespace geo/rep; a producer in A at --geo-rate, a
//     consumer in B; replication throughput and latency (send time in A
//     to receipt in B); with --geo-pinned (geopin.go) again with A and
//     its producer on one core and B and its consumer on another
//     (taskset -c): A's one-core baseline, B's receive rate and A's
//     replication backlog trend with A unthrottled, and whether B keeps
//     up at 0.8 x the baseline;
//
//   - syncgeo (syncgeo.go): a stretched cluster, one bookie in each of
//     regions a, b, c and a broker in a writing E=3/Qw=3/Qa=2 region-aware,
//     reaching b and c through internal/delayrelay relays: 1 KiB unbatched
//     publish latency at a fixed rate with no inter-region delay and with a
//     5 ms round trip, alternated.
//
//   - pinned (pinned.go): the standalone on one core and every client on
//     the other (taskset -c): the 1 KiB maximum, e2e at 50% of it and
//     in-memory storage at that rate, the largest many-topics count over
//     --topic-clients processes, the cold catch-up; each run with the
//     clients' CPU beside the server's, so "the client is the limit" is
//     measured, not argued.
//
//   - journaldev (journaldev.go): the durable standalone with its journal
//     on /dev/zram0 (RAM-backed, formatted and mounted by the section; needs
//     root) and the entry logs on the disk: the 1 KiB maximum, the
//     standalone's 50% rate and 20,000, 40,000 and 60,000 msg/s, each
//     against in-memory storage at the same rate.
//
// A run spread over several client processes (many topics, transactions)
// starts their warm-up together: each creates its producers, says ready in
// a barrier directory and waits until all are (perf --start-barrier), so no
// process measures while another still loads its topics.
//
// --only selects sections (machine, standalone, catchup (the cold catch-up alone), pinned, journaldev, cluster, nats, tls,
// proxy, metadata, geo, syncgeo, txn), e.g. --only tls,proxy,metadata,geo.
//
// Each standalone, cluster and in-memory run (each size's maximum, each
// fixed rate, each topic count) starts its own servers on an emptied data
// directory and removes it after (fresh.go), ZooKeeper's data included,
// so no run measures an earlier run's data or its background flushing and
// GC; only the backlog fill and the catch-up read share a directory, the
// catch-up restarting on it. natsperf and natscli start their own
// nats-server on a fresh store. Each section's data directories are
// removed when the section ends, so later sections have the disk.
//
// Every client run is `magnetar perf produce|e2e --json` (the official Go
// client) or benchmarks/natsperf, so both systems are measured by the same
// histograms and report shape (tools/perfclient.Report); natscli's run is
// read from its printed stats line (its rate only). The broker's CPU
// profile during the 1 KiB maximum run is kept and its top lines go into
// the report, so a missed target comes with what the broker spent its time
// on.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	magnetar   string // magnetar binary
	natsperf   string // benchmarks/natsperf binary ("" skips its runs)
	natsServer string // nats-server with sync_interval support ("" skips the always variant)
	natscli    string // natscli's nats, for `nats bench` ("" skips it)
	out        string // where REPORT.md, results.json and charts go
	work       string // data directories (removed after)
	config     string // standalone configuration file
	duration   time.Duration
	warmup     time.Duration
	backlogMB  int
	topics     []int
	// topicClients is how many client processes the many-topics runs
	// spread their producers over (one Go client's connection reader and
	// writer serve every producer of a process).
	topicClients int
	cluster      bool
	quick        bool
	// only are the sections to run (sectionNames); all when --only is
	// not given.
	only map[string]bool
	// geoRate is the geo-replication section's publish rate (msg/s).
	geoRate float64
	// geoPinned adds the geo section's passes with each cluster on its
	// own core (geopin.go).
	geoPinned bool
	// metaOps is the metadata section's operations per kind and backend;
	// metaTopics its topic count for the topic load time.
	metaOps, metaTopics int
	txnProducers        int
	txnClients          int
	txnCoordinators     int
	txnOpenAhead        int
	txnMaxPending       int
	txnJournalDevice    bool
}

func main() {
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v\n", err)
		os.Exit(1)
	}
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.StringVar(&o.magnetar, "magnetar", "bin/magnetar", "magnetar binary")
	fs.StringVar(&o.natsperf, "natsperf", "bin/natsperf", "natsperf binary (empty: no natsperf runs)")
	fs.StringVar(&o.natsServer, "nats-server", "bin/nats-server", "nats-server >= 2.10 for sync_interval: always (empty or missing: default variant only, on nats-server from PATH)")
	fs.StringVar(&o.natscli, "natscli", "bin/nats", "natscli (nats) binary: NATS's own JetStream benchmark, nats bench, beside natsperf's (empty or missing: not run; make nats builds it)")
	fs.StringVar(&o.out, "out", "benchmarks/report", "output directory")
	fs.StringVar(&o.work, "work", ".perf/bench", "data directories for the servers (on the disk to measure; removed after)")
	fs.StringVar(&o.config, "config", "conf/standalone.conf", "standalone configuration file")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured window of each run")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up before each window (not measured)")
	fs.IntVar(&o.backlogMB, "backlog-mb", 1024, "catch-up backlog in MiB")
	topics := fs.String("topics", "1000,10000", "topic counts of the many-topics runs (one producer each)")
	fs.IntVar(&o.topicClients, "topic-clients", 4, "client processes the many-topics runs spread their producers over")
	fs.BoolVar(&o.cluster, "cluster", true, "also run the 3-bookie cluster (needs ZooKeeper: scripts/zookeeper.sh install)")
	fs.BoolVar(&o.quick, "quick", false, "smoke run: 3 s windows, 64 MiB backlog, 100 and 500 topics, 2,000 metadata operations")
	only := fs.String("only", "", "comma-separated sections to run (default all): "+strings.Join(sectionNames, ","))
	fs.Float64Var(&o.geoRate, "geo-rate", 10000, "geo-replication section: 1 KiB messages/s published into cluster A")
	fs.BoolVar(&o.geoPinned, "geo-pinned", runtime.NumCPU() >= 2, "geo-replication section: also run each cluster and its clients pinned to its own core (taskset -c; default on with 2 or more CPUs)")
	fs.IntVar(&o.metaOps, "metadata-ops", 20000, "metadata section: operations of each kind on each backend")
	fs.IntVar(&o.metaTopics, "metadata-topics", 1000, "metadata section: topics whose load time is measured on each backend")
	fs.IntVar(&o.txnProducers, "txn-producers", txnProducers, "transactions section: producers per client process, for plain and transactional runs alike")
	fs.IntVar(&o.txnClients, "txn-clients", txnClients, "transactions section: client processes, for plain and transactional runs alike (each has its own handler per coordinator)")
	fs.IntVar(&o.txnOpenAhead, "txn-open-ahead", txnOpenAhead, "transactions section: transactions each producer opens ahead in the pipelined 100-message runs")
	fs.IntVar(&o.txnMaxPending, "txn-max-pending", txnMaxPending, "transactions section: each producer's window (--max-pending), for plain and transactional runs alike")
	fs.BoolVar(&o.txnJournalDevice, "txn-journal-device", false, "transactions section: the standalone's journal on /dev/"+zramDevice+
		" (as the journal-device section; needs root), to see how much of a transaction's waits are the shared disk")
	fs.IntVar(&o.txnCoordinators, "txn-coordinators", txnCoordinators, "transactions section: transaction coordinators (the Go client sends each one's requests one at a time)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	var err error
	if o.topics, err = parseInts(*topics); err != nil {
		return o, fmt.Errorf("--topics: %w", err)
	}
	if o.only, err = parseSections(*only); err != nil {
		return o, fmt.Errorf("--only: %w", err)
	}
	if o.quick {
		o.duration, o.warmup, o.backlogMB, o.topics = 3*time.Second, time.Second, 64, []int{100, 500}
		o.metaOps = min(o.metaOps, 2000)
	}
	if o.duration <= 0 || o.warmup < 0 || o.backlogMB <= 0 || o.geoRate <= 0 || o.metaOps <= 0 || o.metaTopics <= 0 || o.topicClients <= 0 {
		return o, fmt.Errorf("--duration, --backlog-mb, --geo-rate, --metadata-ops, --metadata-topics and --topic-clients must be positive, --warmup not negative")
	}
	for _, p := range []*string{&o.magnetar, &o.out, &o.work, &o.config} {
		if *p, err = filepath.Abs(*p); err != nil {
			return o, err
		}
	}
	if _, err := os.Stat(o.magnetar); err != nil {
		return o, fmt.Errorf("--magnetar: %w (build it with make build)", err)
	}
	return o, nil
}

// sectionNames are the parts of a report, in the order they run.
var sectionNames = []string{"machine", "standalone", "catchup", "pinned", "journaldev", "cluster", "nats", "tls", "proxy", "metadata", "geo", "syncgeo", "txn"}

// parseSections reads --only: known section names, comma-separated; empty
// selects every section.
func parseSections(s string) (map[string]bool, error) {
	only := map[string]bool{}
	names := splitComma(s)
	if len(names) == 0 {
		names = sectionNames
	}
	for _, n := range names {
		if !slices.Contains(sectionNames, n) {
			return nil, fmt.Errorf("unknown section %q (want some of %s)", n, strings.Join(sectionNames, ","))
		}
		only[n] = true
	}
	return only, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitComma(s) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
