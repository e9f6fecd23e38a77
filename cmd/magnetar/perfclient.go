package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfclient"
)

// clientPerfFlags are perf produce, consume and e2e's flags as given,
// before parsing. The names follow pulsar-perf where it has one.
type clientPerfFlags struct {
	serviceURL, adminURL, topic, subscription, subType *string
	compression, profile, system, variant              *string
	topics, partitions, producers, consumers, size     *int
	receiverQueue, maxPending, batchMaxMessages        *int
	txnSize                                            *int
	txnOpenAhead                                       *int
	batchMaxBytes                                      *int
	rate                                               *float64
	numMessages                                        *int64
	duration, warmup, progress, batchDelay, drain      *time.Duration
	batching, asJSON, tlsInsecure                      *bool
	tlsTrust, authToken                                *string
	startBarrier                                       *string
}

func newClientPerfFlags(fl *flag.FlagSet) clientPerfFlags {
	def := perfclient.DefaultConfig(perfclient.ModeE2E)
	return clientPerfFlags{
		serviceURL:       fl.String("service-url", def.ServiceURL, "the broker's binary protocol URL (pulsar+ssl:// for TLS)"),
		tlsTrust:         fl.String("tls-trust-certs-file-path", "", "CA certificates (PEM) for a pulsar+ssl:// service URL"),
		tlsInsecure:      fl.Bool("tls-allow-insecure", false, "accept any broker certificate"),
		authToken:        fl.String("auth-token", "", "authenticate with this token (JWT)"),
		adminURL:         fl.String("admin-url", def.AdminURL, "the admin HTTP URL, used to create partitioned topics"),
		topic:            fl.String("topic", def.Topics[0], "topic, when none is given as an argument"),
		topics:           fl.Int("topics", 1, "N > 1: use N topics per name, name-0 .. name-(N-1)"),
		partitions:       fl.Int("partitions", 0, "> 0: create the topics with this many partitions first (an existing topic is kept)"),
		producers:        fl.Int("producers", def.Producers, "producers per topic"),
		consumers:        fl.Int("consumers", def.Consumers, "consumers per topic"),
		subscription:     fl.String("subscription", def.Subscription, "subscription name"),
		subType:          fl.String("subscription-type", "Exclusive", "Exclusive, Shared, Failover or Key_Shared"),
		receiverQueue:    fl.Int("receiver-queue-size", 0, "consumer receiver queue size (0: the client's default)"),
		size:             fl.Int("size", def.Size, "message payload bytes (at least 8: the send time)"),
		rate:             fl.Float64("rate", 0, "messages/s over all producers (0: unthrottled)"),
		batching:         fl.Bool("batching", def.Batching, "batch messages in the producer"),
		batchMaxMessages: fl.Int("batch-max-messages", int(def.BatchMaxMessages), "most messages in a batch"),
		batchMaxBytes:    fl.Int("batch-max-bytes", int(def.BatchMaxBytes), "most bytes in a batch"),
		batchDelay:       fl.Duration("batch-delay", def.BatchDelay, "longest a batch waits before it is sent"),
		maxPending:       fl.Int("max-pending", def.MaxPending, "messages a producer has in flight (MaxPendingMessages)"),
		txnSize:          fl.Int("num-message-per-transaction", 0, "> 0: publish in transactions of this many messages (the broker needs transactionCoordinatorEnabled); latency runs to the commit"),
		txnOpenAhead:     fl.Int("txn-open-ahead", 0, "> 0: each producer opens this many transactions ahead (and sends their first message, each through a batched producer it holds until filled) while the current one fills: the Go client waits for the coordinator when a transaction opens and in its first send to a partition"),
		compression:      fl.String("compression", "none", "none, lz4, zlib, zstd or snappy"),
		duration:         fl.Duration("duration", def.Duration, "measured time (after the warm-up), unless --num-messages is set"),
		warmup:           fl.Duration("warmup", def.Warmup, "unmeasured load first"),
		numMessages:      fl.Int64("num-messages", 0, "> 0: measure this many messages instead of --duration"),
		progress:         fl.Duration("progress", def.Progress, "interval of the live lines on stderr and of the report's timeline (0: none)"),
		drain:            fl.Duration("drain", def.Drain, "e2e: longest wait, after producing, for the consumers to catch up"),
		asJSON:           fl.Bool("json", false, "print the report as one JSON document"),
		profile:          fl.String("profile", "", "write CPU and allocation profiles of the run into this directory"),
		system:           fl.String("system-label", def.System, "the report's system"),
		variant:          fl.String("variant", "", "the report's variant: free text naming what this run tried"),
		startBarrier: fl.String("start-barrier", "", "a directory: once every producer and consumer exists, create ready-<pid> in it and wait for a file named go "+
			"before the warm-up, at most 10 minutes (several processes then measure the same window; benchreport's spread runs)"),
	}
}

// runPerfClient is magnetar perf produce, consume and e2e (mode).
func runPerfClient(mode string, args []string, stdout, stderr io.Writer) int {
	cmd := "perf " + mode
	f, cfg, ok := parsePerfFlags(cmd, args, stderr, newClientPerfFlags,
		func(f clientPerfFlags, rest []string) (perfclient.Config, error) { return f.config(mode, rest, stderr) })
	if !ok {
		return 2
	}
	perfclient.SetLoadGeneratorGC()
	// Ctrl-C ends the run early; the report then covers what ran.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return withPerfProfile(cmd, *f.profile, stderr, func() int {
		return runPerfReport(cmd, stdout, stderr, *f.asJSON,
			func(io.Writer) (perfclient.Report, error) { return perfclient.Run(ctx, cfg, stderr) }, perfclient.Format)
	})
}

// config builds the run's config; topics are the arguments, or --topic.
func (f clientPerfFlags) config(mode string, topics []string, stderr io.Writer) (perfclient.Config, error) {
	cfg := perfclient.DefaultConfig(mode)
	if len(topics) == 0 {
		topics = []string{*f.topic}
	}
	if *f.topics < 1 {
		return cfg, fmt.Errorf("--topics %d: want 1 or more", *f.topics)
	}
	if *f.batchMaxMessages < 0 || *f.batchMaxBytes < 0 {
		return cfg, fmt.Errorf("--batch-max-messages and --batch-max-bytes must not be negative")
	}
	var err error
	if cfg.SubscriptionType, err = perfclient.ParseSubscriptionType(*f.subType); err != nil {
		return cfg, fmt.Errorf("--subscription-type: %w", err)
	}
	if cfg.Compression, err = perfclient.ParseCompression(*f.compression); err != nil {
		return cfg, fmt.Errorf("--compression: %w", err)
	}
	cfg.ServiceURL, cfg.AdminURL, cfg.Topics = *f.serviceURL, *f.adminURL, perfclient.TopicNames(topics, *f.topics)
	cfg.TLSTrustCertsFile, cfg.TLSAllowInsecure, cfg.AuthToken = *f.tlsTrust, *f.tlsInsecure, *f.authToken
	cfg.Partitions, cfg.Producers, cfg.Consumers = *f.partitions, *f.producers, *f.consumers
	cfg.Subscription, cfg.ReceiverQueue, cfg.Size, cfg.Rate = *f.subscription, *f.receiverQueue, *f.size, *f.rate
	cfg.Batching, cfg.BatchMaxMessages, cfg.BatchMaxBytes = *f.batching, uint(*f.batchMaxMessages), uint(*f.batchMaxBytes)
	cfg.BatchDelay, cfg.MaxPending, cfg.TxnSize, cfg.TxnOpenAhead = *f.batchDelay, *f.maxPending, *f.txnSize, *f.txnOpenAhead
	cfg.Duration, cfg.Warmup, cfg.NumMessages, cfg.Progress, cfg.Drain = *f.duration, *f.warmup, *f.numMessages, *f.progress, *f.drain
	cfg.System, cfg.Variant, cfg.Logger = *f.system, *f.variant, perfLogger(stderr)
	if *f.startBarrier != "" {
		if st, err := os.Stat(*f.startBarrier); err != nil || !st.IsDir() {
			return cfg, fmt.Errorf("--start-barrier %s: want an existing directory (%v)", *f.startBarrier, err)
		}
		cfg.StartBarrier = perfclient.FileBarrier(*f.startBarrier)
	}
	return cfg, cfg.Validate()
}
