// Command magnetar is Magnetar's one binary: every role and tool is a
// subcommand (magnetar version, magnetar perf disk and perf journal, and,
// as they land, magnetar standalone, broker, bookie and admin commands).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/magnetar-io/magnetar/tools/perfclient"
)

// version is set at build time: -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"version", "print the version", runVersion},
		{"perf", "measure: perf disk (write+datasync, datasync latency, sequential read), perf journal (group commit)", runPerf},
		{"standalone", "run broker, bookie and embedded metadata in one process", runStandalone},
		{"broker", "run a broker of a cluster (ZooKeeper metadata, bookies, load-balanced bundles)", runBroker},
		{"initialize-cluster-metadata", "record a cluster (and public/default) in the configuration store", runInitCluster},
		{"bookie", "run a bookie (storage node); bookie format, bookie shell ledgers/read-entry/list-bookies", runBookie},
		{"proxy", "run a Pulsar proxy: one gateway to every broker of a cluster (brokers from the metadata store)", runProxy},
		{"admin", "administer a cluster over the admin REST API (pulsar-admin's commands)", runAdmin},
		{"doctor", "preflight check of this host: disks, limits, kernel settings, clock, metadata store, journal sync latency", runDoctor},
		{"tokens", "create and check JWTs for token authentication (pulsar tokens's commands)", runTokens},
		{"trace", "trace waits FILE: how long goroutines waited to run in an execution trace, by start function", runTrace},
	}
}

func main() {
	if args := os.Args[1:]; len(args) > 0 && args[0] == "perf" && isPulsarLoad(args[1:]) {
		// Replaces this process when it re-executes (perfclient.LoadGeneratorGODEBUG).
		if err := perfclient.ExecAsLoadGenerator(); err != nil {
			fmt.Fprintf(os.Stderr, "magnetar perf: %v; going on with the runtime's default\n", err)
		}
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "magnetar: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: magnetar <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
}

func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintf(stdout, "magnetar %s\n", version)
	return 0
}
