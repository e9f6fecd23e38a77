package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// What the perf commands that print a table as they measure (journal,
// bookie, ledger) do the same way: where the rows go, how the report ends,
// and the optional profile around the run.

// parsePerfFlags defines a perf command's flags with newFlags, parses
// args and builds the config from the flags and the arguments left over.
// False means the reason was printed and the command exits 2.
func parsePerfFlags[F, C any](cmd string, args []string, stderr io.Writer, newFlags func(*flag.FlagSet) F,
	config func(f F, rest []string) (C, error)) (F, C, bool) {
	fl := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	f := newFlags(fl)
	var cfg C
	if err := fl.Parse(args); err != nil {
		return f, cfg, false // the flag package printed why
	}
	cfg, err := config(f, fl.Args())
	if err != nil {
		fmt.Fprintf(stderr, "magnetar %s: %v\n", cmd, err)
		return f, cfg, false
	}
	return f, cfg, true
}

// perfLogger is the in-process servers' log: warnings and errors only, so
// they do not drown the progress lines on stderr.
func perfLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// withPerfProfile runs run, under a CPU and allocation profile written
// into dir when dir is set. cmd names the command in error messages.
func withPerfProfile(cmd, dir string, stderr io.Writer, run func() int) int {
	if dir == "" {
		return run()
	}
	stop, err := perfkit.StartProfile(dir)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar %s: %v\n", cmd, err)
		return 1
	}
	defer func() {
		if err := stop(); err != nil {
			fmt.Fprintf(stderr, "magnetar %s: %v\n", cmd, err)
		}
	}()
	return run()
}

// runPerfReport runs a benchmark and prints its report. The table's rows
// go to stdout as they are measured, or to stderr when stdout carries the
// JSON document (asJSON); afterwards human writes what the rows left out,
// or the report is encoded as JSON. It returns the exit code.
func runPerfReport[R any](cmd string, stdout, stderr io.Writer, asJSON bool,
	run func(rows io.Writer) (R, error), human func(io.Writer, R)) int {
	rows := stdout
	if asJSON {
		rows = stderr
	}
	rep, err := run(rows)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar %s: %v\n", cmd, err)
		return 1
	}
	if !asJSON {
		human(stdout, rep)
		return 0
	}
	if err := writePerfJSON(stdout, rep); err != nil {
		fmt.Fprintf(stderr, "magnetar %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// writePerfJSON writes rep as one indented JSON document.
func writePerfJSON(w io.Writer, rep any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
