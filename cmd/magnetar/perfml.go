package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfml"
)

// runPerfManagedLedger is magnetar perf managedledger.
func runPerfManagedLedger(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("magnetar perf managedledger", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", os.TempDir(), "where the run's bookie directory is made (and removed after): put it on the disk to measure")
	cfg := perfml.Config{}
	fl.StringVar(&cfg.IOBackend, "io-backend", "auto", "auto, uring or std")
	fl.IntVar(&cfg.Topics, "topics", 1, "topics (managed ledgers), each with its producer and tailing cursor")
	fl.IntVar(&cfg.Size, "size", 1024, "entry bytes")
	fl.IntVar(&cfg.Outstanding, "outstanding", 256, "appends in flight per topic")
	fl.DurationVar(&cfg.Duration, "duration", 5*time.Second, "append phase")
	fl.IntVar(&cfg.BacklogMB, "backlog-mb", 256, "catch-up backlog in MiB, all topics together (0: no catch-up phase)")
	fl.DurationVar(&cfg.DiskDuration, "disk-duration", time.Second, "disk measurement (negative: skip)")
	asJSON := fl.Bool("json", false, "JSON report on stdout")
	manyTopics := fl.Int("open-topics", 0, "instead: open this many topics (cursor + one entry each) and report the heap per topic")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "magnetar perf managedledger: unexpected arguments %v\n", fl.Args())
		return 2
	}
	tmp, err := os.MkdirTemp(*dir, "magnetar-perfml-")
	if err != nil {
		fmt.Fprintf(stderr, "magnetar perf managedledger: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	cfg.Dir = tmp
	if *manyTopics > 0 {
		rep, err := perfml.MeasureTopics(tmp, cfg.IOBackend, *manyTopics)
		if err != nil {
			fmt.Fprintf(stderr, "magnetar perf managedledger: %v\n", err)
			return 1
		}
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(rep)
		} else {
			fmt.Fprintf(stdout, "%d topics open in %.1fs: live heap + stacks %d -> %d bytes, %.0f bytes per topic (cursor and one entry each)\n",
				rep.Topics, rep.OpenSeconds, rep.HeapBefore, rep.HeapAfter, rep.BytesPerTopic)
		}
		return 0
	}
	cfg.Live = stderr
	rep, err := perfml.Run(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar perf managedledger: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return 0
	}
	perfml.Format(stdout, rep)
	return 0
}
