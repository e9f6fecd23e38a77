package main

import (
	"github.com/magnetar-io/magnetar/broker/console"
	"github.com/magnetar-io/magnetar/internal/stage"
	"golang.org/x/sys/unix"
	"sync/atomic"

	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// bookieFlags are the settings of magnetar bookie; the configuration file
// uses BookKeeper's key names (bk_server.conf).
type bookieFlags struct {
	config      string
	metadataURL string
	journalDirs string
	ledgerDirs  string
	bindAddr    string
	advertised  string
	bookieID    string
	bookiePort  int
	httpPort    int
	rack        string
	region      string
	ioBackend   string
	force       bool // format only

	addWorkers, readWorkers         int
	maxPendingAdds, maxPendingReads int
	maxFrameSize                    int
	diskThreshold, diskLwm          float64
	diskWarn                        float64
	diskCheck, flushInterval        time.Duration
	journal                         journalSettings
	zkTimeout                       time.Duration
	autoRecovery                    bool
	lostBookieDelay                 time.Duration
	auditorCheck                    time.Duration
	openLedgerGrace                 time.Duration
	storage                         storageSettings
	tls                             bookieTLSSettings
	placement                       placementSettings // the auditor's and replication worker's
}

func parseBookieFlags(name string, args []string, stderr io.Writer, log *slog.Logger) (bookieFlags, error) {
	f := bookieFlags{placement: defaultPlacementSettings()}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration file with BookKeeper's key=value names (bk_server.conf)")
	fs.StringVar(&f.metadataURL, "metadata-store", "", "metadataServiceUri: zk:host:2181[,host:2181][/chroot], etcd:http://host:2379[/prefix] (also as metadata-store:etcd:...) or local:/dir (required)")
	fs.StringVar(&f.journalDirs, "journal-dirs", "data/bookie/journal", "journalDirectories: comma-separated, one per journal disk")
	fs.StringVar(&f.ledgerDirs, "ledger-dirs", "data/bookie/ledgers", "ledgerDirectories: comma-separated, one per ledger disk")
	fs.StringVar(&f.bindAddr, "bind-address", "0.0.0.0", "listeningInterface address")
	fs.StringVar(&f.advertised, "advertised-address", "localhost", "advertisedAddress: the host clients are told to use")
	fs.StringVar(&f.bookieID, "bookie-id", "", "bookieId (default advertised-address:bookie-port)")
	fs.IntVar(&f.bookiePort, "bookie-port", 3181, "bookiePort: the bookie protocol, plaintext (-1, or empty in the file: off)")
	f.tls.register(fs)
	fs.IntVar(&f.httpPort, "http-port", 8000, "httpServerPort: /metrics, /debug/pprof, /api/v1/bookie/*")
	fs.StringVar(&f.rack, "rack", "", "rack of this bookie, for rack-aware placement (the rack map, set-bookie-rack, wins)")
	fs.StringVar(&f.region, "region", "", "region of this bookie, for region-aware placement (the rack map, set-bookie-rack, wins)")
	fs.StringVar(&f.ioBackend, "io-backend", engine.BackendAuto, "ioBackend: auto, uring or std")
	fs.Float64Var(&f.diskThreshold, "disk-usage-threshold", 0.95, "diskUsageThreshold: a journal or ledger directory fuller than this makes the bookie read-only")
	fs.Float64Var(&f.diskWarn, "disk-usage-warn-threshold", 0.90, "diskUsageWarnThreshold: a directory fuller than this is logged")
	fs.Float64Var(&f.diskLwm, "disk-usage-lwm-threshold", 0.90, "diskUsageLwmThreshold: writable again once every directory is below this")
	fs.DurationVar(&f.diskCheck, "disk-check-interval", 10*time.Second, "diskCheckInterval (the disks are also checked before each preallocation)")
	if strings.HasSuffix(name, "format") {
		fs.BoolVar(&f.force, "force", false, "wipe directories that hold data")
	}
	f.storage = defaultStorageSettings()
	f.zkTimeout = 10 * time.Second
	f.autoRecovery = true
	f.journal = defaultJournalSettings()
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	byFlag := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) {
		for _, k := range bookieFlagKeys[fl.Name] {
			byFlag[k] = true
		}
	})
	if f.config != "" {
		conf, err := readConf(f.config)
		if err != nil {
			return f, err
		}
		if err := applyConf(conf, f.confKeys(), byFlag, log, f.config); err != nil {
			return f, err
		}
	}
	if err := f.tls.check(log); err != nil {
		return f, err
	}
	if f.bookiePort < 0 {
		f.bookiePort = portOff
		if f.tls.port <= 0 {
			return f, errNoBookiePort
		}
	}
	if f.metadataURL == "" {
		return f, errors.New("--metadata-store (metadataServiceUri) is required: zk:host:2181/chroot, etcd:http://host:2379/prefix, or local:/dir for a single-process test")
	}
	f.metadataURL = bookieMetadataURL(f.metadataURL)
	if f.bookieID == "" {
		f.bookieID = net.JoinHostPort(f.advertised, strconv.Itoa(f.publicPort()))
	}
	return f, nil
}

// bookieMetadataURL turns the forms of metadataServiceUri that
// bookkeeper.conf files carry into a metadata.Open URL: Pulsar's driver
// prefix (metadata-store:etcd:http://..., the documented way to run bookies
// on etcd) and BookKeeper's zk://host:2181/path. What follows the prefix is
// the URL brokers take as metadataStoreUrl.
func bookieMetadataURL(uri string) string {
	uri = strings.TrimPrefix(uri, "metadata-store:")
	if rest, ok := strings.CutPrefix(uri, "zk://"); ok {
		return "zk:" + rest
	}
	return uri
}

// publicPort names the bookie by default: its plaintext port, or its TLS
// port when it serves only TLS.
func (f *bookieFlags) publicPort() int {
	if f.bookiePort == portOff {
		return f.tls.port
	}
	return f.bookiePort
}

// endpoints are where the bookie listens and what it advertises; each is
// "" when its port is off.
func (f *bookieFlags) endpoints() (bind, bindTLS, addr, addrTLS string) {
	if f.bookiePort != portOff {
		bind, addr = net.JoinHostPort(f.bindAddr, strconv.Itoa(f.bookiePort)), net.JoinHostPort(f.advertised, strconv.Itoa(f.bookiePort))
	}
	if f.tls.port > 0 {
		bindTLS, addrTLS = net.JoinHostPort(f.bindAddr, strconv.Itoa(f.tls.port)), net.JoinHostPort(f.advertised, strconv.Itoa(f.tls.port))
	}
	return bind, bindTLS, addr, addrTLS
}

// bookieFlagKeys maps flags to the config keys they override.
var bookieFlagKeys = map[string][]string{
	"metadata-store": {"metadataServiceUri"}, "journal-dirs": {"journalDirectories"},
	"ledger-dirs": {"ledgerDirectories"}, "bind-address": {"listeningInterface"},
	"advertised-address": {"advertisedAddress"}, "bookie-id": {"bookieId"}, "bookie-port": {"bookiePort"},
	"bookie-port-tls": {"bookiePortTls"},
	"http-port":       {"httpServerPort"}, "io-backend": {"ioBackend"},
	"disk-usage-threshold": {"diskUsageThreshold"}, "disk-usage-warn-threshold": {"diskUsageWarnThreshold"},
	"disk-usage-lwm-threshold": {"diskUsageLwmThreshold"}, "disk-check-interval": {"diskCheckInterval"},
}

func (f *bookieFlags) confKeys() map[string]confSetter {
	keys := map[string]confSetter{
		"metadataServiceUri": setString(&f.metadataURL), "journalDirectories": setList(&f.journalDirs),
		"ledgerDirectories": setList(&f.ledgerDirs), "listeningInterface": setString(&f.bindAddr),
		"advertisedAddress": setString(&f.advertised), "bookieId": setString(&f.bookieID),
		"bookiePort": setPort(&f.bookiePort), "httpServerPort": setInt(&f.httpPort), "ioBackend": setString(&f.ioBackend),
		"numAddWorkerThreads": setInt(&f.addWorkers), "numReadWorkerThreads": setInt(&f.readWorkers),
		"maxPendingAddRequestsPerThread": setInt(&f.maxPendingAdds), "maxPendingReadRequestsPerThread": setInt(&f.maxPendingReads),
		"nettyMaxFrameSizeBytes": setInt(&f.maxFrameSize),
		"diskUsageThreshold":     setFloat(&f.diskThreshold), "diskUsageLwmThreshold": setFloat(&f.diskLwm),
		"diskUsageWarnThreshold": setFloat(&f.diskWarn),
		"diskCheckInterval":      setDuration(&f.diskCheck, time.Millisecond), "flushInterval": setDuration(&f.flushInterval, time.Millisecond),
		"zkTimeout":                          setDuration(&f.zkTimeout, time.Millisecond),
		"autoRecoveryDaemonEnabled":          setBool(&f.autoRecovery),
		"lostBookieRecoveryDelay":            setDuration(&f.lostBookieDelay, time.Second),
		"auditorPeriodicCheckInterval":       setDuration(&f.auditorCheck, time.Second),
		"openLedgerRereplicationGracePeriod": setDuration(&f.openLedgerGrace, time.Millisecond),
	}
	for k, v := range f.journal.confKeys() {
		keys[k] = v
	}
	for k, v := range f.storage.confKeys() {
		keys[k] = v
	}
	f.tls.addConfKeys(keys)
	for k, v := range f.placement.bookieKeys() {
		keys[k] = v
	}
	return keys
}

func splitDirs(s string) ([]string, error) {
	var out []string
	for _, d := range strings.Split(s, ",") {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		out = append(out, abs)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no directories in %q", s)
	}
	return out, nil
}

func (f *bookieFlags) cookie() (bookie.Cookie, error) {
	jd, err := splitDirs(f.journalDirs)
	if err != nil {
		return bookie.Cookie{}, fmt.Errorf("journalDirectories: %w", err)
	}
	ld, err := splitDirs(f.ledgerDirs)
	if err != nil {
		return bookie.Cookie{}, fmt.Errorf("ledgerDirectories: %w", err)
	}
	return bookie.Cookie{BookieID: f.bookieID, JournalDirs: jd, LedgerDirs: ld}, nil
}

// runBookie dispatches magnetar bookie [format|shell ...].
func runBookie(args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(args) > 0 {
		switch args[0] {
		case "format":
			return runBookieFormat(args[1:], stdout, stderr, log)
		case "shell":
			return runBookieShell(args[1:], stdout, stderr, log)
		}
	}
	f, err := parseBookieFlags("magnetar bookie", args, stderr, log)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar bookie: %v\n", err)
		return 2
	}
	setMemoryLimit(f.storage.cacheMB(), log)
	setServerProcs(log)
	return serveUntilSignal("magnetar bookie", stderr, func(ctx context.Context) error {
		return serveBookie(ctx, f, log, stdout)
	})
}

func runBookieFormat(args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	f, err := parseBookieFlags("magnetar bookie format", args, stderr, log)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar bookie format: %v\n", err)
		return 2
	}
	err = func() error {
		c, err := f.cookie()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		store, err := metadata.Open(ctx, f.metadataURL, metadata.Options{Logger: log})
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		defer store.Close()
		return bookie.Format(ctx, engine.NewStd(), store, c, f.force)
	}()
	if err != nil {
		fmt.Fprintf(stderr, "magnetar bookie format: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "bookie %s formatted: it starts empty, with a new instance id\n", f.bookieID)
	return 0
}

// runningBookie is what serveBookie started, in stop order.
type runningBookie struct {
	store metadata.Store
	fs    bookieFS
	core  *bookie.Core
	srv   *bookie.Server
	reg   *bookieAnnouncer
	web   *http.Server

	ledgers  *ledger.Client // garbage collection's oracle, auditor and worker
	auditor  *ledger.Auditor
	audited  auditorCollector // its gauges, on /metrics
	worker   *ledger.ReplicationWorker
	stopBack context.CancelFunc // background loops (GC)
}

func serveBookie(ctx context.Context, f bookieFlags, log *slog.Logger, stdout io.Writer) error {
	c, err := f.cookie()
	if err != nil {
		return err
	}
	store, err := metadata.Open(ctx, f.metadataURL, metadata.Options{Logger: log, SessionTimeout: f.zkTimeout})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	rb := &runningBookie{store: store}
	defer rb.stop(log)
	session := store.SessionEvents()
	if err := bookie.CheckCookies(ctx, engine.NewStd(), store, c); err != nil {
		return err
	}
	if err := rb.start(ctx, f, c, log); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "magnetar bookie %s ready: %s http://%s\n", f.bookieID, rb.listening(),
		net.JoinHostPort(f.advertised, strconv.Itoa(f.httpPort)))
	for {
		select {
		case <-ctx.Done():
			log.Info("bookie shutting down", "bookie", f.bookieID)
			return nil
		case st, ok := <-session.States():
			if !ok && errors.Is(session.Err(), metadata.ErrWatchOverflow) {
				session = store.SessionEvents() // fell behind: subscribe again, starting from the current state
				continue
			}
			if !ok || st == metadata.SessionLost {
				// Our registration is gone and clients may have replaced this
				// bookie in their ensembles: stop, and let the supervisor
				// restart it with a new session.
				return fmt.Errorf("metadata session lost (state %v): registration of %s is gone; exiting so a supervisor restarts the bookie", st, f.bookieID)
			}
		}
	}
}

func (rb *runningBookie) start(ctx context.Context, f bookieFlags, c bookie.Cookie, log *slog.Logger) error {
	bfs, err := openBookieFS(f.ioBackend, f.journal.ioBackend, log)
	if err != nil {
		return err
	}
	rb.fs = bfs
	journalFS := withTestFaults(ctx, bfs.journal, c.JournalDirs, log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := bookie.NewMetrics(reg, func() *bookie.Core { return rb.core })
	stages := stage.NewRecorder()
	reg.MustRegister(stages.Collector())
	rb.audited.store = rb.store
	reg.MustRegister(&rb.audited)
	jopts := f.journal.options(log)
	warnJournalFootprint(jopts, c.JournalDirs, log)
	jopts.Stages = stages
	open := func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		return openLedgerStorage(bfs.storage, c.LedgerDirs, f.storage, cp, log, reg)
	}
	core, err := bookie.OpenCore(journalFS, c.JournalDirs, jopts, open,
		bookie.Options{FlushInterval: f.flushInterval, LedgerDirs: c.LedgerDirs, DiskUsageThreshold: f.diskThreshold,
			DiskUsageWarnThreshold: f.diskWarn, DiskUsageLwmThreshold: f.diskLwm, DiskCheckInterval: f.diskCheck,
			Logger: log, Metrics: metrics, Stages: stages})
	if err != nil {
		return err
	}
	rb.core = core
	tlsCfg, err := f.tls.server(log)
	if err != nil {
		return err
	}
	bind, bindTLS, addr, addrTLS := f.endpoints()
	srv, err := bookie.Serve(core, bookie.ServerOptions{
		Addr: bind, TLSAddr: bindTLS, TLS: tlsCfg, AddWorkers: f.addWorkers, ReadWorkers: f.readWorkers,
		MaxPendingAdds: f.maxPendingAdds, MaxPendingReads: f.maxPendingReads, MaxFrameSize: f.maxFrameSize,
		NumEventLoops: 2, Logger: log, Metrics: metrics})
	if err != nil {
		return err
	}
	rb.srv = srv
	rctx, cancel := context.WithTimeout(ctx, 2*f.zkTimeout+5*time.Second)
	defer cancel()
	rb.reg, err = announceBookie(rctx, rb.store, core, registry.Registration{BookieID: f.bookieID, // with its mode, kept current
		Address: addr, TLSAddress: addrTLS, HTTPAddress: net.JoinHostPort(f.advertised, strconv.Itoa(f.httpPort)),
		Rack: f.rack, Region: f.region}, log)
	if err != nil {
		return err
	}
	rb.web, err = serveBookieHTTP(net.JoinHostPort(f.bindAddr, strconv.Itoa(f.httpPort)), reg, core, f.bookieID, log)
	if err != nil {
		return err
	}
	return rb.startBackground(ctx, f, log)
}

// startBackground starts what a bookie runs besides serving: garbage
// collection of ledgers whose metadata is gone and, with
// autoRecoveryDaemonEnabled, a candidate auditor and a replication worker.
func (rb *runningBookie) startBackground(ctx context.Context, f bookieFlags, log *slog.Logger) error {
	// Re-replication copies entries between bookies: it takes the frames
	// this bookie takes.
	clientTLS, err := f.tls.client(log)
	if err != nil {
		return fmt.Errorf("clientTrustStore (the bookie's ledger client): %w", err)
	}
	cl, err := ledger.New(ctx, ledger.Config{Store: rb.store, MaxFrameSize: f.maxFrameSize, BookieTLS: clientTLS,
		Placement: f.placement.policy(log), Logger: log})
	if err != nil {
		return fmt.Errorf("ledger client for garbage collection and re-replication: %w", err)
	}
	rb.ledgers = cl
	bctx, cancel := context.WithCancel(context.Background())
	rb.stopBack = cancel
	gcWait := f.storage.gcWaitTime // gcWaitTime: entry-log GC and this pass share it
	if gcWait <= 0 {
		gcWait = 15 * time.Minute
	}
	go rb.core.RunGC(bctx, cl, gcWait)
	if !f.autoRecovery {
		return nil
	}
	rb.auditor = ledger.NewAuditor(cl, ledger.AuditorConfig{Name: f.bookieID,
		LostBookieRecoveryDelay: f.lostBookieDelay, PeriodicCheckInterval: f.auditorCheck})
	rb.worker = ledger.NewReplicationWorker(cl, ledger.ReplicationConfig{Name: f.bookieID, OpenLedgerGracePeriod: f.openLedgerGrace})
	rb.audited.auditor.Store(rb.auditor)
	rb.auditor.Start()
	rb.worker.Start()
	return nil
}

// listening names the ports served, for the ready line.
func (rb *runningBookie) listening() string {
	var out []string
	if a := rb.srv.Addr(); a != "" {
		out = append(out, a)
	}
	if a := rb.srv.TLSAddr(); a != "" {
		out = append(out, "tls "+a)
	}
	return strings.Join(out, " ")
}

// stop unregisters first (clients stop choosing this bookie), then stops
// serving, then flushes and closes storage.
func (rb *runningBookie) stop(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if rb.worker != nil {
		rb.worker.Stop()
	}
	if rb.auditor != nil {
		rb.auditor.Stop()
	}
	if rb.stopBack != nil {
		rb.stopBack()
	}
	if rb.ledgers != nil {
		rb.ledgers.Close()
	}
	if rb.reg != nil {
		errs = append(errs, rb.reg.Unregister(ctx))
	}
	if rb.web != nil {
		errs = append(errs, rb.web.Shutdown(ctx))
	}
	if rb.srv != nil {
		errs = append(errs, rb.srv.Close(ctx))
	}
	if rb.core != nil {
		errs = append(errs, rb.core.Close())
	}
	if rb.fs.storage != nil {
		errs = append(errs, rb.fs.close())
	}
	errs = append(errs, rb.store.Close())
	if err := errors.Join(errs...); err != nil {
		log.Error("bookie did not stop cleanly", "err", err)
	}
}

// serveBookieHTTP serves /metrics, /debug/pprof and BookKeeper's status
// endpoints.
func serveBookieHTTP(addr string, reg *prometheus.Registry, core *bookie.Core, id string, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	addOpsHandlers(mux, registryHandler(reg))
	mux.HandleFunc("/api/v1/bookie/state", func(w http.ResponseWriter, _ *http.Request) {
		ro, why := core.ReadOnly()
		writeJSON(w, map[string]any{"running": true, "readOnly": ro, "reason": why, "outOfSpace": core.OutOfSpace(), "bookieId": id})
	})
	mux.HandleFunc("/api/v1/bookie/info", func(w http.ResponseWriter, _ *http.Request) {
		free, total := core.DiskSpace()
		writeJSON(w, map[string]any{"freeSpace": free, "totalSpace": total, "outOfSpace": core.OutOfSpace(),
			"directories": core.DirUsages()})
	})
	mux.HandleFunc("/heartbeat", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "OK") })
	return serveHTTP(addr, mux, "bookie http server", log)
}

// auditorCollector exports the auditor's view (BookKeeper's auditor
// stats): whether this bookie leads the audit and, on the leader only (so
// the cluster's figure is counted once), the ledgers marked
// under-replicated, read from the metadata store at each scrape.
type auditorCollector struct {
	store   metadata.Store
	auditor atomic.Pointer[ledger.Auditor] // nil until autorecovery starts
}

var (
	descAuditorLeader = prometheus.NewDesc("magnetar_auditor_leader",
		"1 on the bookie that leads the audit of lost replicas, else 0.", nil, nil)
	descUnderreplicated = prometheus.NewDesc("magnetar_auditor_underreplicated_ledgers",
		"Ledgers marked under-replicated (replicas on lost bookies, waiting for re-replication); exported by the auditor's leader.", nil, nil)
)

// auditorScrapeTimeout bounds the metadata read of one scrape.
const auditorScrapeTimeout = 3 * time.Second

func (c *auditorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAuditorLeader
	ch <- descUnderreplicated
}

func (c *auditorCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.auditor.Load()
	if a == nil {
		return
	}
	leader := 0.0
	if a.IsLeader() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descAuditorLeader, prometheus.GaugeValue, leader)
	if leader == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), auditorScrapeTimeout)
	defer cancel()
	ids, err := ledger.ListUnderreplicated(ctx, c.store)
	if err != nil {
		return // no figure rather than a wrong one; the store's own errors are logged by its client
	}
	ch <- prometheus.MustNewConstMetric(descUnderreplicated, prometheus.GaugeValue, float64(len(ids)))
}

// bookieDisks is an in-process bookie's disks as the console shows them
// (a bookie of its own serves them on /api/v1/bookie/info).
func bookieDisks(core *bookie.Core) console.Disks {
	free, total := core.DiskSpace()
	d := console.Disks{FreeBytes: int64(free), TotalBytes: int64(total), Dirs: []console.Dir{}}
	for _, u := range core.DirUsages() {
		d.Dirs = append(d.Dirs, console.Dir{Dir: u.Dir, Journal: u.Journal, UsedPercent: 100 * u.Used})
	}
	return d
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// journalSettings are the journal keys of bk_server.conf, shared by the
// bookie and standalone's in-process bookie.
type journalSettings struct {
	maxGroupWait                               time.Duration
	bufferedWrites, bufferedEntries, queueSize int
	maxSizeMB, preallocMB                      int64
	syncData, reuseFiles, directWrites         bool
	// zeroFill is journalZeroFill (ours): a spare journal file of written
	// zeros is kept ready, so a group's datasync commits no extent
	// conversion (TUNING.md, "Journal files zero-filled ahead of the
	// writer"). On by default; journalZeroFillRateMB paces the fill.
	zeroFill     bool
	zeroFillRate int64
	// ioBackend is journalIOBackend (ours): the journals' io backend,
	// apart from ioBackend's for the entry logs. std by default: a
	// journal is one goroutine writing and syncing one file in turn, and
	// through io_uring each direct write and datasync went to a kernel
	// worker thread and back (TUNING.md, "The journal's system calls").
	ioBackend string
}

func defaultJournalSettings() journalSettings {
	return journalSettings{syncData: true, reuseFiles: true, directWrites: true, zeroFill: true, ioBackend: engine.BackendStd}
}

func (j *journalSettings) confKeys() map[string]confSetter {
	return map[string]confSetter{
		"journalMaxGroupWaitMSec":         setDuration(&j.maxGroupWait, time.Millisecond),
		"journalBufferedWritesThreshold":  setInt(&j.bufferedWrites),
		"journalBufferedEntriesThreshold": setInt(&j.bufferedEntries),
		"journalMaxSizeMB":                setInt64(&j.maxSizeMB),
		"journalPreAllocSizeMB":           setInt64(&j.preallocMB),
		"journalQueueSize":                setInt(&j.queueSize),
		"journalSyncData":                 setBool(&j.syncData),
		"journalReuseFiles":               setBool(&j.reuseFiles),
		"journalDirectWrites":             setBool(&j.directWrites),
		"journalIOBackend":                setString(&j.ioBackend),
		"journalZeroFill":                 setBool(&j.zeroFill),
		"journalZeroFillRateMB":           setInt64(&j.zeroFillRate),
	}
}

// journalFootprint is the most journal files can take on their disk: the
// live files (two: the one being written and, until the entry logs are
// flushed past it, the one before) and the recycled pool, each up to
// journalMaxSizeMB.
func journalFootprint(o journal.Options) int64 {
	o = o.WithDefaults()
	return int64(2+o.MaxRecycledFiles) * o.MaxFileSize
}

// warnJournalFootprint tells the operator when the journal files may take
// over half of a journal directory's disk: the bookie turns read-only at
// its disk-usage threshold, counting the journal (the fault suite's 512 MiB
// bookie did, with the default 2 GiB files).
func warnJournalFootprint(o journal.Options, dirs []string, log *slog.Logger) {
	need := journalFootprint(o)
	for _, d := range dirs {
		var st unix.Statfs_t
		for p := filepath.Clean(d); unix.Statfs(p, &st) != nil; p = filepath.Dir(p) { // not made yet: its disk
			if p == filepath.Dir(p) {
				break
			}
		}
		if disk := int64(st.Blocks) * int64(st.Bsize); disk > 0 && need > disk/2 {
			log.Warn("journal files may take over half of the journal disk: lower journalMaxSizeMB",
				"dir", d, "disk_mib", disk>>20, "journal_files_mib", need>>20, "journalMaxSizeMB", o.WithDefaults().MaxFileSize>>20)
		}
	}
}

func (j journalSettings) options(log *slog.Logger) journal.Options {
	if !j.syncData {
		log.Warn("journalSyncData=false: adds are acknowledged before they are durable; a power failure or kernel crash loses acknowledged entries")
	}
	return journal.Options{MaxGroupWait: j.maxGroupWait, BufferedWritesThreshold: j.bufferedWrites,
		BufferedEntriesThreshold: j.bufferedEntries, MaxFileSize: j.maxSizeMB << 20, PreallocSize: j.preallocMB << 20,
		QueueSize: j.queueSize, SkipSync: !j.syncData, NoFileReuse: !j.reuseFiles, BufferedWrites: !j.directWrites,
		ZeroFill: j.zeroFill, ZeroFillRate: j.zeroFillRate << 20, Logger: log}
}
