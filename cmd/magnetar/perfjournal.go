package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfjournal"
)

// journalFlags are perf journal's flags as given, before parsing.
type journalFlags struct {
	dir, backends, sizes, writers, pipeline, reuse, waits, maxFile *string
	inflight                                                       *int
	duration, warmup, diskDuration                                 *time.Duration
	skipSync, asJSON                                               *bool
}

func newJournalFlags(fl *flag.FlagSet) journalFlags {
	def := perfjournal.DefaultConfig("./.perf")
	return journalFlags{
		dir:          fl.String("dir", def.Dir, "directory on the disk to measure (test files are removed)"),
		asJSON:       fl.Bool("json", false, "print the report as one JSON document"),
		backends:     fl.String("backends", strings.Join(def.Backends, ","), "io backends to compare: uring,std"),
		sizes:        fl.String("sizes", "1k,16k", "entry payload sizes"),
		writers:      fl.String("writers", "1,4,16,64,256", "concurrent closed-loop writers"),
		inflight:     fl.Int("inflight", def.Inflight, "adds in flight per writer (1: wait for each acknowledgement)"),
		duration:     fl.Duration("duration", def.Duration, "measured time per point"),
		warmup:       fl.Duration("warmup", def.Warmup, "unmeasured load before each point"),
		diskDuration: fl.Duration("disk-duration", def.DiskDuration, "time per disk-limit measurement"),
		pipeline:     fl.String("pipeline", "off", "journal pipeline (overlap write and datasync): on, off or both"),
		reuse:        fl.String("reuse", "on", "journalReuseFiles (recycle checkpointed files): on, off or both"),
		waits:        fl.String("max-group-wait", "0", "journalMaxGroupWaitMSec values, comma-separated (0, the default: never linger)"),
		skipSync:     fl.Bool("skip-sync", false, "journalSyncData=false: acknowledge before datasync (unsafe on power loss)"),
		maxFile:      fl.String("max-file-size", "64m", "journal file size before rotation"),
	}
}

func runPerfJournal(args []string, stdout, stderr io.Writer) int {
	f, cfg, ok := parsePerfFlags("perf journal", args, stderr, newJournalFlags,
		func(f journalFlags, _ []string) (perfjournal.Config, error) { return f.config() })
	if !ok {
		return 2
	}
	return runPerfReport("perf journal", stdout, stderr, *f.asJSON,
		func(progress io.Writer) (*perfjournal.Report, error) { return perfjournal.Run(cfg, progress) }, perfjournal.FormatTargets)
}

func (f journalFlags) config() (perfjournal.Config, error) {
	cfg := perfjournal.DefaultConfig(*f.dir)
	cfg.Backends, cfg.Inflight, cfg.SkipSync = splitList(*f.backends), *f.inflight, *f.skipSync
	cfg.Duration, cfg.Warmup, cfg.DiskDuration = *f.duration, *f.warmup, *f.diskDuration
	var err error
	if cfg.EntrySizes, err = parseSizes(*f.sizes); err != nil {
		return cfg, fmt.Errorf("--sizes: %w", err)
	}
	if cfg.Writers, err = parseInts(*f.writers); err != nil {
		return cfg, fmt.Errorf("--writers: %w", err)
	}
	if cfg.Pipelines, err = parseOnOff(*f.pipeline); err != nil {
		return cfg, fmt.Errorf("--pipeline: %w", err)
	}
	if cfg.Reuse, err = parseOnOff(*f.reuse); err != nil {
		return cfg, fmt.Errorf("--reuse: %w", err)
	}
	if cfg.GroupWaits, err = parseDurations(*f.waits); err != nil {
		return cfg, fmt.Errorf("--max-group-wait: %w", err)
	}
	fileSize, err := parseSizes(*f.maxFile)
	if err != nil || len(fileSize) != 1 {
		return cfg, fmt.Errorf("--max-file-size %q: want one size such as 64m", *f.maxFile)
	}
	cfg.MaxFileSize = int64(fileSize[0])
	return cfg, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, part := range splitList(s) {
		n, err := strconv.Atoi(part)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad count %q (want a positive integer)", part)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none given")
	}
	return out, nil
}

func parseOnOff(s string) ([]bool, error) {
	switch s {
	case "on":
		return []bool{true}, nil
	case "off":
		return []bool{false}, nil
	case "both":
		return []bool{false, true}, nil
	}
	return nil, fmt.Errorf("bad value %q (want on, off or both)", s)
}

func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range splitList(s) {
		d, err := time.ParseDuration(part)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bad duration %q (want 0 or a duration such as 1ms)", part)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none given")
	}
	return out, nil
}
