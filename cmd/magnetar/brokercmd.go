package main

// magnetar broker: one stateless broker of a cluster. Metadata lives in
// ZooKeeper (a cluster store and a configuration store, which may be the
// same), data on the cluster's bookies; bundles of topics are assigned to
// brokers by the leader's load manager (broker/ownership).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/internal/failover"
	"github.com/magnetar-io/magnetar/internal/stage"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

type brokerFlags struct {
	config      string
	metadataURL string
	configURL   string
	listenFlags
	sessionTimout time.Duration
	ensemble      int
	// bkTimeout is bookkeeperClientTimeoutInSeconds: how long an add or a
	// read waits for a bookie before it is treated as failed (the add
	// replaces it in the ensemble). With Qw = Qa a stopped bookie holds
	// the entries of its write sets this long (TUNING.md).
	bkTimeout   time.Duration
	writeQuorum int
	ackQuorum   int
	reportEvery time.Duration
	lb          ownership.LoadBalancerConfig
	brokerSettings
	security  securitySettings
	bkTLS     bookkeeperTLSSettings // TLS to the bookies
	placement placementSettings
}

const defaultBrokerConf = "conf/broker.conf"

func parseBrokerFlags(args []string, stderr io.Writer, log *slog.Logger) (brokerFlags, error) {
	f := brokerFlags{brokerSettings: defaultBrokerSettings(), security: defaultSecuritySettings(), bkTLS: defaultBookkeeperTLSSettings(),
		lb: ownership.DefaultLoadBalancerConfig(), sessionTimout: 30 * time.Second,
		ensemble: 2, writeQuorum: 2, ackQuorum: 2, placement: defaultPlacementSettings()}
	fs := flag.NewFlagSet("magnetar broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration file in Pulsar's key=value format (default "+defaultBrokerConf+" if present)")
	fs.StringVar(&f.metadataURL, "metadata-store", "", "metadataStoreUrl: the cluster's metadata store (zk:host:2181,.../chroot)")
	fs.StringVar(&f.configURL, "configuration-metadata-store", "", "configurationMetadataStoreUrl: tenants, namespaces, policies (default: the metadata store)")
	f.listenFlags.register(fs, "", "clusterName (must have been initialised with magnetar initialize-cluster-metadata)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	byFlag := setByFlag(fs, map[string]string{"metadata-store": "metadataStoreUrl",
		"configuration-metadata-store": "configurationMetadataStoreUrl"})
	if err := f.loadConfig(byFlag, log); err != nil {
		return f, err
	}
	return f, f.check()
}

func (f *brokerFlags) loadConfig(byFlag map[string]bool, log *slog.Logger) error {
	path := confFile(f.config, defaultBrokerConf)
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
	for k, v := range map[string]confSetter{
		"metadataStoreUrl":                                              setString(&f.metadataURL),
		"configurationMetadataStoreUrl":                                 setString(&f.configURL),
		"metadataStoreSessionTimeoutMillis":                             setDuration(&f.sessionTimout, time.Millisecond),
		"managedLedgerDefaultEnsembleSize":                              setInt(&f.ensemble),
		"bookkeeperClientTimeoutInSeconds":                              setDuration(&f.bkTimeout, time.Second),
		"managedLedgerDefaultWriteQuorum":                               setInt(&f.writeQuorum),
		"managedLedgerDefaultAckQuorum":                                 setInt(&f.ackQuorum),
		"loadBalancerReportUpdateMinIntervalMillis":                     setDuration(&f.reportEvery, time.Millisecond),
		"loadBalancerSheddingEnabled":                                   setBool(&f.lb.SheddingEnabled),
		"loadBalancerSheddingIntervalMinutes":                           setDuration(&f.lb.SheddingInterval, time.Minute),
		"loadBalancerSheddingGracePeriodMinutes":                        setDuration(&f.lb.SheddingGracePeriod, time.Minute),
		"loadBalancerMsgRateDifferenceShedderThreshold":                 setFloat(&f.lb.MsgRateDifferenceThreshold),
		"loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": setFloat(&f.lb.MsgThroughputMultiplierThreshold),
		"maxUnloadPercentage":                                           setFloat(&f.lb.MaxUnloadPercentage),
		"minUnloadMessage":                                              setFloat(&f.lb.MinUnloadMessage),
		"minUnloadMessageThroughput":                                    setFloat(&f.lb.MinUnloadMessageThroughput),
		"maxUnloadBundleNumPerShedding":                                 setInt(&f.lb.MaxUnloadBundlesPerShedding),
		"loadBalancerBrokerOverloadedThresholdPercentage":               setFloat(&f.lb.BrokerOverloadedThreshold),
		"loadBalancerAutoBundleSplitEnabled":                            setBool(&f.lb.AutoBundleSplitEnabled),
		"loadBalancerSplitIntervalMinutes":                              setDuration(&f.lb.SplitInterval, time.Minute),
		"loadBalancerNamespaceBundleMaxTopics":                          setInt(&f.lb.NamespaceBundleMaxTopics),
		"loadBalancerNamespaceBundleMaxSessions":                        setInt(&f.lb.NamespaceBundleMaxSessions),
		"loadBalancerNamespaceBundleMaxMsgRate":                         setFloat(&f.lb.NamespaceBundleMaxMsgRate),
		"loadBalancerNamespaceBundleMaxBandwidthMbytes":                 setFloat(&f.lb.NamespaceBundleMaxBandwidthMiB),
		"loadBalancerNamespaceMaximumBundles":                           setInt(&f.lb.NamespaceMaximumBundles),
	} {
		setters[k] = v
	}
	for k, v := range f.placement.brokerKeys() {
		setters[k] = v
	}
	if err := applyConf(conf, setters, byFlag, log, path); err != nil {
		return err
	}
	if err := f.placement.validate(); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return f.brokerSettings.validate(path)
}

func (f *brokerFlags) check() error {
	if f.metadataURL == "" {
		return errors.New("--metadata-store (metadataStoreUrl) is required, e.g. zk:zk1:2181,zk2:2181/pulsar")
	}
	if f.cluster == "" {
		return errors.New("--cluster (clusterName) is required")
	}
	if f.configURL == "" {
		f.configURL = f.metadataURL
	}
	if !(f.ensemble >= f.writeQuorum && f.writeQuorum >= f.ackQuorum && f.ackQuorum >= 1) {
		return fmt.Errorf("managedLedgerDefaultEnsembleSize %d, WriteQuorum %d, AckQuorum %d: want E >= Qw >= Qa >= 1",
			f.ensemble, f.writeQuorum, f.ackQuorum)
	}
	return nil
}

func runBroker(args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	f, err := parseBrokerFlags(args, stderr, log)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar broker: %v\n", err)
		return 2
	}
	setMemoryLimit(orDefault(f.cacheMB, defaultEntryCacheMB), log)
	setServerProcs(log)
	return serveUntilSignal("magnetar broker", stderr, func(ctx context.Context) error {
		return serveBroker(ctx, f, log, stdout)
	})
}

// openStores opens the cluster store and, when it is another one, the
// configuration store.
func openStores(ctx context.Context, f brokerFlags, log *slog.Logger) (cluster, config metadata.Store, err error) {
	octx, cancel := context.WithTimeout(ctx, f.sessionTimout+10*time.Second)
	defer cancel()
	opts := metadata.Options{Logger: log, SessionTimeout: f.sessionTimout}
	if cluster, err = metadata.Open(octx, f.metadataURL, opts); err != nil {
		return nil, nil, fmt.Errorf("metadata store %s: %w", f.metadataURL, err)
	}
	if f.configURL == f.metadataURL {
		return cluster, cluster, nil
	}
	if config, err = metadata.Open(octx, f.configURL, opts); err != nil {
		cluster.Close()
		return nil, nil, fmt.Errorf("configuration metadata store %s: %w", f.configURL, err)
	}
	return cluster, config, nil
}

func serveBroker(ctx context.Context, f brokerFlags, log *slog.Logger, stdout io.Writer) error {
	store, configStore, err := openStores(ctx, f, log)
	if err != nil {
		return err
	}
	defer store.Close()
	if configStore != store {
		defer configStore.Close()
	}
	if ok, _, err := configStore.Exists(ctx, "/admin/clusters/"+f.cluster); err != nil || !ok {
		return fmt.Errorf("cluster %q is not initialised in %s (run magnetar initialize-cluster-metadata first): %v", f.cluster, f.configURL, err)
	}
	bookieTLS, err := f.bkTLS.build(log)
	if err != nil {
		return err
	}
	stages := stage.NewRecorder()
	failovers := failover.NewRecorder()
	ledgers, err := ledger.New(ctx, ledger.Config{Store: store, MaxFrameSize: f.bookieFrameSize(), BookieTLS: bookieTLS,
		Placement: f.placement.policy(log), DialAddresses: f.placement.dialAt, Stages: stages, Failover: failovers, Logger: log,
		AddTimeout: f.bkTimeout, ReadTimeout: f.bkTimeout})
	if err != nil {
		return err
	}
	defer ledgers.Close()
	res, err := resources.New(ctx, configStore, resources.Options{Logger: log})
	if err != nil {
		return err
	}
	defer res.Close()
	mlCfg := f.managedLedgerConfig(log)
	mlCfg.Store, mlCfg.Ledgers, mlCfg.Stages = store, ledgers, stages
	mlCfg.EnsembleSize, mlCfg.WriteQuorum, mlCfg.AckQuorum = f.ensemble, f.writeQuorum, f.ackQuorum
	mlCfg.LedgerPolicy = broker.LedgerPolicyFunc(res, f.cluster)
	mls, err := managedledger.NewBKFactory(mlCfg)
	if err != nil {
		return err
	}
	brokerAddr := f.brokerAddr()
	bcfg, err := f.brokerConfig(f.cluster, brokerAddr, configStore, res, log)
	if err != nil {
		return err
	}
	bcfg.MetadataStoreURL, bcfg.ConfigurationStoreURL = f.metadataURL, f.configURL
	bcfg.ClusterMetadata = store
	bcfg.OwnershipRequired = true // its ports open before its ownership service starts
	bcfg.TraceReaders = os.Getenv(traceReadersEnv) == "1"
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
	b := broker.New(bcfg, mls)
	p, err := servePorts(b, f.listenFlags, f.security, sec, log, stages.Collector(), failovers.Collector(), mlCacheCollector{mls})
	if err != nil {
		return err
	}
	sessionLost := make(chan struct{})
	ocfg := f.ownershipConfig(store, f.security, sec)
	ocfg.ReportInterval, ocfg.LoadBalancer, ocfg.SessionTimeout = f.reportEvery, f.lb, f.sessionTimout
	ocfg.Failover = failovers
	ocfg.OnSessionLost = func() { close(sessionLost) }
	own, err := b.EnableOwnership(ctx, ocfg)
	if err != nil {
		_ = p.close(context.Background())
		return err
	}
	fmt.Fprintf(stdout, "magnetar broker ready: %s cluster %s\n", f.readyLine(f.security), f.cluster)
	var runErr error
	select {
	case <-ctx.Done():
	case <-sessionLost:
		runErr = errors.New("metadata session lost: stopping so that a restart registers afresh (bundles were released)")
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Releasing the bundles first closes their topics, so clients move to
	// the other brokers at once.
	own.Close(sctx)
	return errors.Join(runErr, p.close(sctx), b.Close(sctx))
}
