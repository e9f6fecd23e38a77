// Command natsperf measures NATS JetStream the way `magnetar perf` measures
// Magnetar, on the same machine and at the same message size, and prints
// the same report (tools/perfclient.Report) so benchmarks/ can put the two
// systems in one table.
//
// It starts its own nats-server (or uses --url), creates a file-backed
// stream with one replica on subjects "perf.>", and runs one of two loads:
//
//   - produce: --producers clients, each on its own connection, publish
//     asynchronously (PublishAsync) with at most --max-pending publishes
//     awaiting their PubAck; publish latency is from the publish call to
//     the PubAck.
//   - e2e: the same, plus one consumer that receives and acks every
//     message; end-to-end latency is from the send time the producer
//     wrote into the payload to the consumer's receipt.
//
// Variants: "default" is JetStream as shipped (no fsync per message, the
// stream's files synced every 2 minutes); "always" configures
// `jetstream { sync_interval: always }`, an fsync after every write, which
// is what a Magnetar bookie's journal does before it acknowledges. Only
// nats-server 2.10 and later know that option; natsperf refuses to run
// "always" on an older server and, on a server it started, checks through
// the server's monitoring endpoint (/varz) that the setting is in effect.
//
// Payload layout (little endian), the rest of the message is filler:
//
//	0       8         9              size
//	+-------+---------+---------------+
//	| sent  | measure | filler ...    |
//	+-------+---------+---------------+
//	sent: unix nanoseconds at the publish call
//	measure: 1 when sent inside the measured window
//
// The measure byte lets the producer (on its PubAck) and the consumer
// classify each message the same way, so in e2e runs Published and
// Consumed count the same set of messages.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/magnetar-io/magnetar/tools/perfclient"
)

func main() {
	// The same runtime settings as magnetar perf's clients, so both
	// systems' load generators cost the shared cores alike.
	if err := perfclient.ExecAsLoadGenerator(); err != nil {
		fmt.Fprintf(os.Stderr, "natsperf: %v; going on with the runtime's default\n", err)
	}
	perfclient.SetLoadGeneratorGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command, minus the process: exit code 2 for bad flags,
// 1 for a failed run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "natsperf: %v\n", err)
		return 2
	}
	rep, err := bench(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "natsperf: %v\n", err)
		return 1
	}
	if !cfg.JSON {
		formatSummary(stdout, rep)
		return 0
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		fmt.Fprintf(stderr, "natsperf: writing the report: %v\n", err)
		return 1
	}
	return 0
}
