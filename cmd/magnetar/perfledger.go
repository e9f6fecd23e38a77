package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/tools/perfledger"
)

// ledgerPerfFlags are perf ledger's flags as given, before parsing.
type ledgerPerfFlags struct {
	dir, backend, metadataURL        *string
	quorums, sizes, writers          *string
	digest, verify, profile          *string
	bookies, outstanding             *int
	duration, warmup, disk, interval *time.Duration
	asJSON                           *bool
}

func newLedgerPerfFlags(fl *flag.FlagSet) ledgerPerfFlags {
	def := perfledger.DefaultConfig()
	return ledgerPerfFlags{
		bookies:     fl.Int("bookies", def.Bookies, "bookies to start in-process, each on its own journal and ledger directories, on loopback"),
		dir:         fl.String("dir", "", "where the run's temporary directory goes (default the system temp dir)"),
		backend:     fl.String("io-backend", def.Backend, "io backend of the bookies and the disk measurement: auto, uring or std"),
		metadataURL: fl.String("metadata-store", "", "a running cluster's metadata store (zk:host:2181[/chroot]): load its registered bookies instead of starting any"),
		quorums:     fl.String("quorums", "1,1,1 3,2,2 3,3,2", "E,Qw,Qa triples, space separated; those needing more bookies are skipped"),
		sizes:       fl.String("sizes", "1024,65536", "entry payload sizes in bytes (k and m suffixes allowed)"),
		writers:     fl.String("writers", "1,4", "writer counts; each writer appends to its own ledger"),
		outstanding: fl.Int("outstanding", def.Outstanding, "appends in flight per writer"),
		duration:    fl.Duration("duration", def.Duration, "measured time per point"),
		warmup:      fl.Duration("warmup", def.Warmup, "unmeasured load before each point"),
		digest:      fl.String("digest", "crc32c", "ledger digest: crc32c, mac or dummy"),
		verify:      fl.String("verify", strconv.Itoa(def.Verify), "entries of each ledger read back and compared, or all"),
		disk:        fl.Duration("disk-duration", def.DiskDuration, "time per disk-limit measurement (0: none)"),
		interval:    fl.Duration("progress", def.ProgressInterval, "interval of the live progress lines on stderr"),
		asJSON:      fl.Bool("json", false, "print the report as one JSON document"),
		profile:     fl.String("profile", "", "write CPU and allocation profiles of the run into this directory"),
	}
}

func runPerfLedger(args []string, stdout, stderr io.Writer) int {
	f, cfg, ok := parsePerfFlags("perf ledger", args, stderr, newLedgerPerfFlags,
		func(f ledgerPerfFlags, rest []string) (perfledger.Config, error) {
			if len(rest) > 0 {
				return perfledger.Config{}, fmt.Errorf("unexpected arguments %q", rest)
			}
			return f.config(stderr)
		})
	if !ok {
		return 2
	}
	return withPerfProfile("perf ledger", *f.profile, stderr, func() int { return perfLedger(f, cfg, stdout, stderr) })
}

// perfLedger runs the benchmark with cfg (connecting to the running
// cluster first, if one was named) and prints the report.
func perfLedger(f ledgerPerfFlags, cfg perfledger.Config, stdout, stderr io.Writer) int {
	if *f.metadataURL != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		store, err := metadata.Open(ctx, *f.metadataURL, metadata.Options{Logger: cfg.Logger})
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "magnetar perf ledger: metadata: %v\n", err)
			return 1
		}
		defer store.Close()
		cfg.Store, cfg.Target = store, *f.metadataURL
	}
	// Live lines always go to stderr, whatever carries the rows.
	cfg.Live = stderr
	return runPerfReport("perf ledger", stdout, stderr, *f.asJSON,
		func(rows io.Writer) (*perfledger.Report, error) { return perfledger.Run(cfg, rows) }, perfledger.FormatNotes)
}

func (f ledgerPerfFlags) config(stderr io.Writer) (perfledger.Config, error) {
	cfg := perfledger.DefaultConfig()
	cfg.Bookies, cfg.Dir, cfg.Backend, cfg.Outstanding = *f.bookies, *f.dir, *f.backend, *f.outstanding
	cfg.Duration, cfg.Warmup, cfg.DiskDuration, cfg.ProgressInterval = *f.duration, *f.warmup, *f.disk, *f.interval
	cfg.Storage, cfg.StorageName = perfBookieStorage, "entrylog"
	cfg.Logger = perfLogger(stderr)
	if cfg.Bookies < 1 {
		return cfg, fmt.Errorf("--bookies %d: want 1 or more", cfg.Bookies)
	}
	if cfg.Outstanding < 1 {
		return cfg, fmt.Errorf("--outstanding %d: want 1 or more", cfg.Outstanding)
	}
	var err error
	if cfg.Quorums, err = perfledger.ParseQuorums(*f.quorums); err != nil {
		return cfg, fmt.Errorf("--quorums: %w", err)
	}
	if cfg.Sizes, err = parseSizes(*f.sizes); err != nil {
		return cfg, fmt.Errorf("--sizes: %w", err)
	}
	if cfg.Writers, err = parseInts(*f.writers); err != nil {
		return cfg, fmt.Errorf("--writers: %w", err)
	}
	switch d := ledger.DigestType(strings.ToUpper(*f.digest)); d {
	case ledger.DigestCRC32C, ledger.DigestMAC, ledger.DigestDummy:
		cfg.Digest = d
	default:
		return cfg, fmt.Errorf("--digest %q: want crc32c, mac or dummy", *f.digest)
	}
	if *f.verify == "all" {
		cfg.Verify = perfledger.VerifyAll
	} else if cfg.Verify, err = strconv.Atoi(*f.verify); err != nil || cfg.Verify < 1 {
		return cfg, fmt.Errorf("--verify %q: want a positive number of entries per ledger, or all", *f.verify)
	}
	if *f.metadataURL != "" {
		if _, err := metadata.ParseTarget(*f.metadataURL); err != nil {
			return cfg, fmt.Errorf("--metadata-store: %w", err)
		}
	}
	return cfg, nil
}
