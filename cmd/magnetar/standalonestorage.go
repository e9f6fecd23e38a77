package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/internal/stage"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// standaloneBookieID names standalone's in-process bookie in metadata.
const standaloneBookieID = "standalone-bookie"

// standaloneStorage is standalone's storage stack: one bookie in this
// process (journal and entry logs under dir), reached without a socket
// through a LocalTransport, the ledger client, and managed ledgers on it.
type standaloneStorage struct {
	fs             bookieFS
	core           *bookie.Core
	reg            *bookieAnnouncer
	ledgers        *ledger.Client
	managedLedgers *managedledger.BKFactory
	stopGC         context.CancelFunc
	metrics        collectedMetrics // the in-process bookie's, served on standalone's /metrics
}

// ledgerPolicyFunc is managedledger.Config.LedgerPolicy.
type ledgerPolicyFunc = func(context.Context, string) (managedledger.LedgerPolicy, error)

func startStandaloneStorage(ctx context.Context, store metadata.Store, dir string, f standaloneFlags, stages *stage.Recorder,
	policy ledgerPolicyFunc, log *slog.Logger) (*standaloneStorage, error) {
	journalDirs, ledgerDirs, err := f.bookieDirs(dir)
	if err != nil {
		return nil, err
	}
	bfs, err := openBookieFS(engine.BackendAuto, f.journal.ioBackend, log)
	if err != nil {
		return nil, err
	}
	s := &standaloneStorage{fs: bfs}
	// The cookie stops standalone from starting on a bookie directory that
	// was wiped while its metadata (which says what it held) survived.
	if err := bookie.CheckCookies(ctx, bfs.storage, store, bookie.Cookie{BookieID: standaloneBookieID,
		JournalDirs: journalDirs, LedgerDirs: ledgerDirs}); err != nil {
		s.close(log)
		return nil, err
	}
	// The in-process bookie's metrics are served on standalone's /metrics,
	// whose registry is built later (webMux).
	metrics := bookie.NewMetrics(&s.metrics, func() *bookie.Core { return s.core })
	open := func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		return openLedgerStorage(bfs.storage, ledgerDirs, f.storage, cp, log, &s.metrics)
	}
	jopts := f.journal.options(log)
	warnJournalFootprint(jopts, journalDirs, log)
	jopts.Stages = stages
	s.core, err = bookie.OpenCore(bfs.journal, journalDirs, jopts, open,
		f.disk.options(bookie.Options{LedgerDirs: ledgerDirs, Logger: log, Stages: stages, Metrics: metrics}))
	if err != nil {
		s.close(log)
		return nil, err
	}
	if err := s.connect(ctx, store, f, stages, policy, log); err != nil {
		s.close(log)
		return nil, err
	}
	return s, nil
}

// bookieDirs are the journal and ledger directories: journalDirectories
// and ledgerDirectories, by default journal and ledgers under dir.
func (f standaloneFlags) bookieDirs(dir string) (journal, ledgers []string, err error) {
	jd, ld := f.journalDirs, f.ledgerDirs
	if jd == "" {
		jd = filepath.Join(dir, "journal")
	}
	if ld == "" {
		ld = filepath.Join(dir, "ledgers")
	}
	if journal, err = splitDirs(jd); err != nil {
		return nil, nil, fmt.Errorf("journalDirectories: %w", err)
	}
	if ledgers, err = splitDirs(ld); err != nil {
		return nil, nil, fmt.Errorf("ledgerDirectories: %w", err)
	}
	return journal, ledgers, nil
}

// connect registers the bookie and builds the ledger client and managed
// ledgers on it.
func (s *standaloneStorage) connect(ctx context.Context, store metadata.Store, f standaloneFlags, stages *stage.Recorder,
	policy ledgerPolicyFunc, log *slog.Logger) error {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	// Published with its mode, and again at every change: placement skips a
	// read-only bookie (a full disk) and returns to it once it is writable.
	s.reg, err = announceBookie(rctx, store, s.core, registry.Registration{BookieID: standaloneBookieID, Address: "in-process"}, log)
	if err != nil {
		return err
	}
	if f.bkTLS.enabled {
		log.Info("bookkeeperTLSClientAuthentication=true: standalone's bookie runs in this process and is called without a socket, " +
			"so there is no broker-to-bookie traffic to encrypt")
	}
	tr := ledger.NewLocalTransport()
	tr.RecordStages(stages)
	tr.Add(standaloneBookieID, s.core)
	if s.ledgers, err = ledger.New(ctx, ledger.Config{Store: store, Transport: tr, MaxFrameSize: f.bookieFrameSize(), Stages: stages,
		Logger: log}); err != nil {
		return err
	}
	mlCfg := f.managedLedgerConfig(log)
	mlCfg.Store, mlCfg.Ledgers, mlCfg.Stages, mlCfg.LedgerPolicy = store, s.ledgers, stages, policy
	s.managedLedgers, err = managedledger.NewBKFactory(mlCfg)
	if err != nil {
		return err
	}
	gctx, stop := context.WithCancel(context.Background())
	s.stopGC = stop
	go s.core.RunGC(gctx, s.ledgers, 15*time.Minute)
	return nil
}

// close stops the stack after the broker closed its topics.
func (s *standaloneStorage) close(log *slog.Logger) {
	var errs []error
	if s.stopGC != nil {
		s.stopGC()
	}
	if s.ledgers != nil {
		s.ledgers.Close()
	}
	if s.reg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, s.reg.Unregister(ctx))
		cancel()
	}
	if s.core != nil {
		errs = append(errs, s.core.Close())
	}
	if s.fs.storage != nil {
		errs = append(errs, s.fs.close())
	}
	if err := errors.Join(errs...); err != nil {
		log.Error("standalone storage did not stop cleanly", "err", fmt.Sprint(err))
	}
}

// collector exports the managed-ledger entry cache under Pulsar's names.
// collectors are the managed-ledger cache's and the in-process bookie's
// metrics.
func (s *standaloneStorage) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{mlCacheCollector{s.managedLedgers}}, s.metrics.collectors...)
}

// collectedMetrics is a prometheus.Registerer that keeps what is
// registered with it, for a registry built later.
type collectedMetrics struct{ collectors []prometheus.Collector }

func (c *collectedMetrics) Register(x prometheus.Collector) error {
	c.collectors = append(c.collectors, x)
	return nil
}

func (c *collectedMetrics) MustRegister(xs ...prometheus.Collector) {
	c.collectors = append(c.collectors, xs...)
}

func (c *collectedMetrics) Unregister(prometheus.Collector) bool { return false }

type mlCacheCollector struct{ f *managedledger.BKFactory }

var (
	mlCacheSize   = prometheus.NewDesc("pulsar_ml_cache_used_size", "Bytes of entries in the managed-ledger cache.", nil, nil)
	mlCacheHits   = prometheus.NewDesc("pulsar_ml_cache_hits_total", "Entry reads served by the managed-ledger cache.", nil, nil)
	mlCacheMisses = prometheus.NewDesc("pulsar_ml_cache_misses_total", "Entry reads that went to the bookies.", nil, nil)
)

func (c mlCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- mlCacheSize
	ch <- mlCacheHits
	ch <- mlCacheMisses
}

func (c mlCacheCollector) Collect(ch chan<- prometheus.Metric) {
	size, hits, misses := c.f.CacheStats()
	ch <- prometheus.MustNewConstMetric(mlCacheSize, prometheus.GaugeValue, float64(size))
	ch <- prometheus.MustNewConstMetric(mlCacheHits, prometheus.CounterValue, float64(hits))
	ch <- prometheus.MustNewConstMetric(mlCacheMisses, prometheus.CounterValue, float64(misses))
}
