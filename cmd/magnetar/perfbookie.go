package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/tools/perfbookie"
)

// bookiePerfFlags are perf bookie's flags as given, before parsing.
type bookiePerfFlags struct {
	addr, dir, journalDir, ledgerDir, backend *string
	clients, sizes, hot, backlogEntry         *string
	profile                                   *string
	outstanding, backlogMB, backlogLedgers    *int
	duration, warmup, diskDuration, interval  *time.Duration
	asJSON                                    *bool
}

func newBookiePerfFlags(fl *flag.FlagSet) bookiePerfFlags {
	def := perfbookie.DefaultConfig()
	return bookiePerfFlags{
		addr:           fl.String("addr", "", "host:port of a running bookie (default: start one in-process on loopback)"),
		dir:            fl.String("dir", "", "where the in-process bookie's temporary directories go (default the system temp dir)"),
		journalDir:     fl.String("journal-dir", "", "journal directory instead (must be empty; the disk limits are measured here)"),
		ledgerDir:      fl.String("ledger-dir", "", "ledger directory instead (must be empty)"),
		backend:        fl.String("io-backend", def.Backend, "io backend of the in-process bookie and the disk measurements: auto, uring or std"),
		clients:        fl.String("clients", "1,4,16,64", "client counts; each client is one connection writing its own ledger"),
		sizes:          fl.String("sizes", "1024,65536", "entry sizes in bytes (k and m suffixes allowed)"),
		outstanding:    fl.Int("outstanding", def.Outstanding, "adds or reads in flight per client"),
		duration:       fl.Duration("duration", def.Duration, "measured time per point"),
		warmup:         fl.Duration("warmup", def.Warmup, "unmeasured load before each point"),
		hot:            fl.String("hot-window", "64m", "bytes of the most recent entries the cache-hit reads cycle over"),
		backlogMB:      fl.Int("backlog-mb", int(def.BacklogBytes>>20), "MiB written, then read back cold after a restart (0: no cold read)"),
		backlogEntry:   fl.String("backlog-entry", "64k", "entry size of the backlog"),
		backlogLedgers: fl.Int("backlog-ledgers", def.BacklogLedgers, "ledgers the backlog is spread over (one reader each)"),
		diskDuration:   fl.Duration("disk-duration", def.DiskDuration, "time per disk-limit measurement (0: none)"),
		interval:       fl.Duration("progress", def.ProgressInterval, "interval of the live progress lines on stderr"),
		asJSON:         fl.Bool("json", false, "print the report as one JSON document"),
		profile:        fl.String("profile", "", "write CPU and allocation profiles of the run into this directory"),
	}
}

func runPerfBookie(args []string, stdout, stderr io.Writer) int {
	f, cfg, ok := parsePerfFlags("perf bookie", args, stderr, newBookiePerfFlags,
		func(f bookiePerfFlags, _ []string) (perfbookie.Config, error) { return f.config(stderr) })
	if !ok {
		return 2
	}
	return withPerfProfile("perf bookie", *f.profile, stderr, func() int {
		// Live lines always go to stderr, whatever carries the rows.
		cfg.Live = stderr
		return runPerfReport("perf bookie", stdout, stderr, *f.asJSON,
			func(rows io.Writer) (*perfbookie.Report, error) { return perfbookie.Run(cfg, rows) }, perfbookie.FormatNotes)
	})
}

func (f bookiePerfFlags) config(stderr io.Writer) (perfbookie.Config, error) {
	cfg := perfbookie.DefaultConfig()
	cfg.Addr, cfg.Dir, cfg.JournalDir, cfg.LedgerDir = *f.addr, *f.dir, *f.journalDir, *f.ledgerDir
	cfg.Backend, cfg.Outstanding, cfg.BacklogLedgers = *f.backend, *f.outstanding, *f.backlogLedgers
	cfg.Duration, cfg.Warmup, cfg.DiskDuration, cfg.ProgressInterval = *f.duration, *f.warmup, *f.diskDuration, *f.interval
	cfg.Storage, cfg.StorageName = perfBookieStorage, "entrylog"
	cfg.Logger = perfLogger(stderr)
	var err error
	if cfg.Clients, err = parseInts(*f.clients); err != nil {
		return cfg, fmt.Errorf("--clients: %w", err)
	}
	if cfg.Sizes, err = parseSizes(*f.sizes); err != nil {
		return cfg, fmt.Errorf("--sizes: %w", err)
	}
	if cfg.HotBytes, err = oneSize(*f.hot); err != nil {
		return cfg, fmt.Errorf("--hot-window: %w", err)
	}
	entry, err := oneSize(*f.backlogEntry)
	if err != nil {
		return cfg, fmt.Errorf("--backlog-entry: %w", err)
	}
	cfg.BacklogEntrySize = int(entry)
	if *f.backlogMB < 0 {
		return cfg, fmt.Errorf("--backlog-mb %d: want 0 or more", *f.backlogMB)
	}
	cfg.BacklogBytes = int64(*f.backlogMB) << 20
	if cfg.Addr != "" {
		if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
			return cfg, fmt.Errorf("--addr %q: want host:port", cfg.Addr)
		}
	}
	return cfg, nil
}

func oneSize(s string) (int64, error) {
	n, err := parseSizes(s)
	if err != nil {
		return 0, err
	}
	if len(n) != 1 {
		return 0, fmt.Errorf("%q: want one size such as 64m", s)
	}
	return int64(n[0]), nil
}

// perfBookieStorage opens the in-process bookie's ledger storage as
// `magnetar bookie` does, with the default settings.
func perfBookieStorage(fs engine.FS, dirs []string) bookie.OpenStorage {
	return func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		return openLedgerStorage(fs, dirs, defaultStorageSettings(), cp, nil, nil)
	}
}
