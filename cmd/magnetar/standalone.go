package main

import (
	"github.com/magnetar-io/magnetar/broker/console"
	"github.com/magnetar-io/magnetar/internal/stage"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

type standaloneFlags struct {
	config      string
	dataDir     string
	storageKind string
	listenFlags
	brokerSettings
	security securitySettings
	// bkTLS (bookkeeperTLS*) is read so a broker.conf works here, but
	// standalone's bookie is reached without a socket: nothing to encrypt.
	bkTLS bookkeeperTLSSettings
	// journal and storage are the in-process bookie's journal (journal*
	// keys) and ledger storage (dbStorage_* keys).
	journal journalSettings
	storage storageSettings
	// metadataURL is where metadata lives (metadataStoreUrl; default
	// local:<data-dir>/metadata): put it on a disk the bookie does not
	// fill. journalDirs and ledgerDirs are the in-process bookie's
	// directories (journalDirectory or journalDirectories,
	// ledgerDirectories; default under <data-dir>/bookie), so journal and
	// ledgers can sit on different disks. disk holds its disk-usage keys.
	metadataURL, journalDirs, ledgerDirs string
	disk                                 diskSettings
}

// defaultStandaloneConf is read when --config is not given and it exists.
const defaultStandaloneConf = "conf/standalone.conf"

func parseStandaloneFlags(args []string, stderr io.Writer, log *slog.Logger) (standaloneFlags, error) {
	f := standaloneFlags{brokerSettings: defaultBrokerSettings(), journal: defaultJournalSettings(), storage: defaultStorageSettings(), security: defaultSecuritySettings(),
		bkTLS: defaultBookkeeperTLSSettings()}
	fs := flag.NewFlagSet("magnetar standalone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration file in Pulsar's key=value format (default "+defaultStandaloneConf+" if present)")
	fs.StringVar(&f.dataDir, "data-dir", "data", "directory for metadata and data")
	fs.StringVar(&f.storageKind, "storage", "bookie", "bookie (durable: the in-process bookie) or memory (not durable: measures the broker without storage)")
	fs.StringVar(&f.metadataURL, "metadata-store", "", "metadataStoreUrl: local:/dir (default local:<data-dir>/metadata), on a disk the bookie does not fill")
	fs.StringVar(&f.journalDirs, "journal-dirs", "", "journalDirectories: the journal's directory (default <data-dir>/bookie/journal)")
	fs.StringVar(&f.ledgerDirs, "ledger-dirs", "", "ledgerDirectories: the entry logs' directory (default <data-dir>/bookie/ledgers)")
	f.listenFlags.register(fs, "standalone", "clusterName")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if f.storageKind != "bookie" && f.storageKind != "memory" {
		return f, fmt.Errorf("--storage %q: want bookie or memory", f.storageKind)
	}
	return f, f.loadConfig(setByFlag(fs, standaloneFlagKeys), log)
}

// standaloneFlagKeys maps standalone's own flags to the keys they override.
var standaloneFlagKeys = map[string]string{"metadata-store": "metadataStoreUrl",
	"journal-dirs": "journalDirectories", "ledger-dirs": "ledgerDirectories"}

// loadConfig applies the configuration file; flags win over it.
func (f *standaloneFlags) loadConfig(byFlag map[string]bool, log *slog.Logger) error {
	path := confFile(f.config, defaultStandaloneConf)
	if path == "" {
		return nil
	}
	conf, err := readConf(path)
	if err != nil {
		return err
	}
	setters := f.brokerSettings.setters()
	f.listenFlags.addSetters(setters)
	f.security.addSetters(setters)
	f.bkTLS.addSetters(setters)
	for k, v := range f.storage.confKeys() {
		setters[k] = v
	}
	for k, v := range f.journal.confKeys() {
		setters[k] = v
	}
	for k, v := range f.disk.confKeys() {
		setters[k] = v
	}
	setters["metadataStoreUrl"] = setString(&f.metadataURL)
	setters["journalDirectories"], setters["ledgerDirectories"] = setList(&f.journalDirs), setList(&f.ledgerDirs)
	setters["journalDirectory"] = setList(&f.journalDirs) // BookKeeper's older, singular key
	byFlag["journalDirectory"] = byFlag["journalDirectories"]
	if err := applyConf(conf, setters, byFlag, log, path); err != nil {
		return err
	}
	if err := f.disk.validate(); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return f.brokerSettings.validate(path)
}

// runStandalone runs metadata, storage and a broker in one process until
// SIGINT or SIGTERM.
func runStandalone(args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	f, err := parseStandaloneFlags(args, stderr, log)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar standalone: %v\n", err)
		return 2
	}
	if f.storageKind == "bookie" { // in-memory storage holds every message: no limit fits it
		setMemoryLimit(orDefault(f.cacheMB, defaultEntryCacheMB)+f.storage.cacheMB(), log)
	}
	setServerProcs(log)
	return serveUntilSignal("magnetar standalone", stderr, func(ctx context.Context) error {
		return serveStandalone(ctx, f, log, stdout)
	})
}

// serveUntilSignal runs serve until SIGINT or SIGTERM cancels its context;
// a failure is printed under name and exits 1.
func serveUntilSignal(name string, stderr io.Writer, serve func(context.Context) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

func serveStandalone(ctx context.Context, f standaloneFlags, log *slog.Logger, stdout io.Writer) error {
	dir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return err
	}
	metaURL := f.metadataStoreURL(dir)
	store, err := metadata.Open(ctx, metaURL, metadata.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	defer store.Close()
	if err := initStandaloneMetadata(ctx, store, f); err != nil {
		return err
	}
	res, err := resources.New(ctx, store, resources.Options{Logger: log})
	if err != nil {
		return err
	}
	defer res.Close()
	stages := stage.NewRecorder()
	ledgers, collectors, disks, closeStorage, err := f.openStorage(ctx, store, filepath.Join(dir, "bookie"), stages,
		broker.LedgerPolicyFunc(res, f.cluster), log)
	if err != nil {
		return err
	}
	collectors = append(collectors, stages.Collector())
	defer closeStorage()
	bcfg, err := f.brokerConfig(f.cluster, f.brokerAddr(), store, res, log)
	if err != nil {
		return err
	}
	bcfg.MetadataStoreURL = metaURL
	bcfg.ConfigurationStoreURL = bcfg.MetadataStoreURL
	bcfg.ClusterMetadata = store
	bcfg.InProcessBookieDisks = disks
	bcfg.OwnershipRequired = true // its ports open before its ownership service starts
	bcfg.Stages = stages
	fr, err := f.startFlightRecorder(log)
	if err != nil {
		return err
	}
	defer fr.Stop()
	bcfg.FlightRecorder = fr
	sec, err := f.security.build(res, log)
	if err != nil {
		return err
	}
	sec.apply(&bcfg, f.listenFlags, f.security)
	b := broker.New(bcfg, ledgers)
	p, err := servePorts(b, f.listenFlags, f.security, sec, log, collectors...)
	if err != nil {
		return err
	}
	// Standalone owns its bundles like any broker, so lookups, unloads
	// and the brokers admin endpoints behave as in a cluster.
	own, err := b.EnableOwnership(ctx, f.ownershipConfig(store, f.security, sec))
	if err != nil {
		_ = p.close(context.Background())
		return err
	}
	defer own.Close(context.Background())
	fmt.Fprintf(stdout, "magnetar standalone ready: %s\n", f.readyLine(f.security))
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(p.close(sctx), b.Close(sctx))
}

// metadataStoreURL is metadataStoreUrl, by default local:<data-dir>/metadata.
func (f standaloneFlags) metadataStoreURL(dataDir string) string {
	if f.metadataURL != "" {
		return f.metadataURL
	}
	return "local:" + filepath.Join(dataDir, "metadata")
}

// openStorage starts the topics' storage: the in-process bookie, or with
// --storage memory managed ledgers in memory, which measure the broker
// and its clients without the storage path (nothing survives a restart).
func (f standaloneFlags) openStorage(ctx context.Context, store metadata.Store, dir string, stages *stage.Recorder,
	policy ledgerPolicyFunc, log *slog.Logger) (
	managedledger.Factory, []prometheus.Collector, func() console.Disks, func(), error) {
	if f.storageKind == "memory" {
		log.Warn("standalone on in-memory storage (--storage memory): messages are not durable and do not survive a restart")
		return managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: int64(f.maxEntriesPerLedger),
				MaxSizePerLedger: int64(f.maxLedgerMB) << 20}),
			nil, nil, func() {}, nil
	}
	st, err := startStandaloneStorage(ctx, store, dir, f, stages, policy, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return st.managedLedgers, st.collectors(), func() console.Disks { return bookieDisks(st.core) },
		func() { st.close(log) }, nil
}

// initStandaloneMetadata creates the cluster, tenant public and namespace
// public/default on first start, as Pulsar standalone does.
func initStandaloneMetadata(ctx context.Context, store metadata.Store, f standaloneFlags) error {
	pulsarTLS, webTLS := f.security.tlsURLs(f.listenFlags)
	// One transaction coordinator, as Pulsar's standalone.
	return initClusterMetadata(ctx, store, f.cluster, resources.ClusterData{ServiceURL: "http://" + f.webAddr(),
		BrokerServiceURL: "pulsar://" + f.brokerAddr(), ServiceURLTLS: webTLS, BrokerServiceURLTLS: pulsarTLS}, 1)
}

// webMux is the HTTP port's handler: the broker's (admin API, lookup,
// schemas), /metrics and /debug/pprof (superusers only when authorization
// is on).
func webMux(b *broker.Broker, extra ...prometheus.Collector) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/", b.HTTPHandler())
	reg := prometheus.NewRegistry()
	topics := broker.NewMetrics(b)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), topics)
	reg.MustRegister(extra...)
	ops := http.NewServeMux()
	// The topics' series are written as text, not gathered: 10,000 topics
	// cost a scrape 2 s of CPU through the registry (broker/metricstext.go).
	addOpsHandlers(ops, broker.MetricsHandler(reg, topics))
	mux.Handle("/metrics", ops)
	mux.Handle("/debug/pprof/", b.RequireSuperUser(ops))
	return mux
}
