package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

func runPerf(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && args[0] == "disk":
		return runPerfDisk(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "journal":
		return runPerfJournal(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "bookie":
		return runPerfBookie(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "ledger":
		return runPerfLedger(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "managedledger":
		return runPerfManagedLedger(args[1:], stdout, stderr)
	case isPulsarLoad(args):
		return runPerfClient(args[0], args[1:], stdout, stderr)
	}
	fmt.Fprintln(stderr, "usage: magnetar perf disk|journal|bookie|ledger|managedledger|produce|consume|e2e [flags]")
	return 2
}

func runPerfDisk(args []string, stdout, stderr io.Writer) int {
	def := perfdisk.DefaultConfig(os.TempDir())
	fl := flag.NewFlagSet("perf disk", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", def.Dir, "directory on the disk to measure (test files are removed)")
	asJSON := fl.Bool("json", false, "print the report as JSON")
	backends := fl.String("backends", strings.Join(def.Backends, ","), "io backends to compare: uring,std")
	sizes := fl.String("sizes", "4k,64k,256k,1m", "write+datasync block sizes")
	modes := fl.String("modes", strings.Join(def.Modes, ","), "append (fresh file) and/or overwrite (allocated file)")
	duration := fl.Duration("duration", def.Duration, "time per write case")
	readSize := fl.String("read-file", "256m", "bytes written, evicted from cache and read back")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	cfg := def
	cfg.Dir, cfg.Duration = *dir, *duration
	cfg.Backends, cfg.Modes = splitList(*backends), splitList(*modes)
	var err error
	if cfg.BlockSizes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintf(stderr, "magnetar perf disk: --sizes: %v\n", err)
		return 2
	}
	readBytes, err := parseSizes(*readSize)
	if err != nil || len(readBytes) != 1 {
		fmt.Fprintf(stderr, "magnetar perf disk: --read-file %q: want one size such as 256m\n", *readSize)
		return 2
	}
	cfg.ReadFile = int64(readBytes[0])
	progress := func(r perfdisk.Result) { fmt.Fprintln(stderr, perfdisk.FormatResult(r)) }
	if !*asJSON {
		progress = func(r perfdisk.Result) { fmt.Fprintln(stdout, perfdisk.FormatResult(r)) }
	}
	rep, err := perfdisk.Run(cfg, progress)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar perf disk: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "magnetar perf disk: %v\n", err)
			return 1
		}
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// parseSizes parses a comma-separated list like "4k,64k,1m".
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, part := range splitList(s) {
		mult := 1
		switch strings.ToLower(part[len(part)-1:]) {
		case "k":
			mult = 1 << 10
		case "m":
			mult = 1 << 20
		case "g":
			mult = 1 << 30
		}
		num := part
		if mult > 1 {
			num = part[:len(part)-1]
		}
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q (want a positive number with optional k, m or g)", part)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes given")
	}
	return out, nil
}

// isPulsarLoad says whether perf args run the Pulsar client load
// generator (produce, consume, e2e), as opposed to the storage benchmarks,
// which measure server code and keep the runtime's defaults.
func isPulsarLoad(args []string) bool {
	return len(args) > 0 && (args[0] == "produce" || args[0] == "consume" || args[0] == "e2e")
}
