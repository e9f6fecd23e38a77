package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/magnetar-io/magnetar/tools/tracewait"
)

// runTrace is `magnetar trace waits FILE`: how long goroutines waited to
// run in an execution trace, by start function (docs/profiling.md).
func runTrace(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "waits" {
		fmt.Fprintln(stderr, "usage: magnetar trace waits [--focus FUNC] [--top N] TRACE_FILE")
		return 2
	}
	fs := flag.NewFlagSet("trace waits", flag.ContinueOnError)
	fs.SetOutput(stderr)
	focus := fs.String("focus", "", "also break down where goroutines whose start function contains this spent the time between runs")
	top := fs.Int("top", 20, "rows to print")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "magnetar trace waits: one trace file (from /debug/pprof/trace or the flight recorder)")
		return 2
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "magnetar trace waits: %v\n", err)
		return 1
	}
	defer f.Close()
	rep, err := tracewait.Analyze(f, *focus)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar trace waits: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	tracewait.Format(stdout, rep, *top)
	return 0
}
