package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/magnetar-io/magnetar/tools/perfclient"
)

// natscli's run: what the issue filer ran, `nats bench js pub async
// --size 1024 --batch 500 --clients 1 --storage file`, long enough that
// the stream's early, cheap part does not decide the rate.
const (
	natscliSize  = 1024
	natscliBatch = 500
	// natscliMinSeconds is the shortest full run that counts;
	// natscliAimSeconds is what the message count aims at from natsperf's
	// rate, with room for natscli being somewhat faster.
	natscliMinSeconds = 20
	natscliAimSeconds = 25
	// natscliMinMessages is the count's floor (natsperf gave no rate, or a
	// low one); natscliQuickMessages the floor with --quick.
	natscliMinMessages   = 1_000_000
	natscliQuickMessages = 50_000
	// natscliMsgOverhead over-counts a stored message's bytes beside its
	// payload (subject, headers, record framing), for --maxbytes.
	natscliMsgOverhead = 128
	natscliSubject     = "benchreport.natscli"
)

// runNATSCLI runs natscli's JetStream publish benchmark against a fresh
// nats-server with the default sync, sized from natsperf's default
// maximum if it ran. A full run that ends under natscliMinSeconds (natscli
// outran natsperf) is run once more, sized from its own rate.
func (r *runner) runNATSCLI(ctx context.Context, server string) *NATSCLI {
	c := &NATSCLI{}
	bin, err := r.natscliBin()
	if err != nil {
		c.Skipped = err.Error()
		return c
	}
	c.Version = natsVersion(bin)
	var rate float64
	if d := r.res.NATS.Default; d != nil {
		rate = d.Report.PublishPS
	}
	err = r.natscliRun(ctx, server, bin, natscliMessages(rate, r.o), c)
	if err == nil && !r.o.quick && c.Run.Report.Seconds < natscliMinSeconds {
		err = r.natscliRun(ctx, server, bin, natscliMessages(c.Run.Report.PublishPS, r.o), c)
	}
	if err != nil {
		c.Run, c.Skipped = nil, err.Error()
		fmt.Fprintf(os.Stderr, "== natscli: %v\n", err)
	}
	return c
}

// natscliRun is one natscli run of msgs messages on a nats-server started
// for it on an emptied store; c takes its command, figures and stats line.
func (r *runner) natscliRun(ctx context.Context, server, bin string, msgs int64, c *NATSCLI) error {
	dir := filepath.Join(r.o.work, "nats", "natscli")
	return inEmptyDir(dir, func() error {
		s, url, err := r.startNATSServer(server, dir)
		if err != nil {
			return err
		}
		defer s.stop()
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return fmt.Errorf("free space of %s: %w", dir, err)
		}
		args := natscliArgs(url, msgs, natscliMaxBytes(msgs, int64(st.Bavail)*st.Bsize))
		c.Command = "nats " + strings.Join(args, " ")
		m := meterCPU(s)
		out, _, err := r.command(ctx, "natscli bench js pub async 1024 B", bin, args...)
		cores := m.cores()
		if err != nil {
			return err
		}
		ps, line, err := parseNATSBench(string(out))
		if err != nil {
			return fmt.Errorf("natscli output: %w", err)
		}
		fmt.Fprintf(os.Stderr, "   %s\n", line)
		c.Summary, c.Run = line, natscliResult(msgs, ps, cores)
		return nil
	})
}

// natscliResult is natscli's figures as a Run, so the report's tables
// take them beside natsperf's.
func natscliResult(msgs int64, ps, cores float64) *Run {
	return &Run{Label: "natscli bench js pub async", ServerCores: cores, Report: perfclient.Report{
		System: "nats-jetstream", Variant: "natscli, default sync", Mode: "produce", Topics: 1, Producers: 1,
		MessageSize: natscliSize, Seconds: float64(msgs) / ps, Published: msgs, PublishPS: ps,
		PublishMiB: ps * natscliSize / (1 << 20)}}
}

// startNATSServer starts the nats-server bin with JetStream on (the default sync) and
// its store in dir, as natsperf starts it; it returns the client URL.
func (r *runner) startNATSServer(bin, dir string) (*server, string, error) {
	port, err1 := freePort()
	monitor, err2 := freePort()
	if err1 != nil || err2 != nil {
		return nil, "", fmt.Errorf("free ports: %v %v", err1, err2)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	s, err := startServer("nats-server", bin, filepath.Join(r.logDir, fmt.Sprintf("%02d-nats-server.log", r.nextSeq())),
		"-js", "-a", "127.0.0.1", "-p", itoa(port), "-m", itoa(monitor), "-sd", filepath.Join(dir, "store"))
	if err != nil {
		return nil, "", err
	}
	if err := s.waitReady(time.Minute); err != nil { // "Server is ready"
		_ = s.stop()
		return nil, "", err
	}
	return s, fmt.Sprintf("nats://127.0.0.1:%d", port), nil
}

// natscliBin is --natscli made absolute, or why natscli does not run.
func (r *runner) natscliBin() (string, error) {
	if r.o.natscli == "" {
		return "", fmt.Errorf("not run (--natscli empty)")
	}
	abs, err := filepath.Abs(r.o.natscli)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		return "", fmt.Errorf("not run: %w (make nats builds bin/nats)", err)
	}
	return abs, nil
}

// natscliMessages is the run's message count: natscliAimSeconds (or the
// measured window, if longer) at rate msg/s, at least natscliMinMessages;
// with --quick, the measured window (3 s) at least natscliQuickMessages.
func natscliMessages(rate float64, o options) int64 {
	aim, floor := max(natscliAimSeconds, o.duration.Seconds()), int64(natscliMinMessages)
	if o.quick {
		aim, floor = o.duration.Seconds(), natscliQuickMessages
	}
	return max(floor, int64(rate*aim))
}

// natscliMaxBytes is the stream's byte limit: twice what msgs take, at
// most half the free space (the server refuses a stream over its own
// limit, by default 75% of it).
func natscliMaxBytes(msgs, free int64) int64 {
	return min(2*msgs*(natscliSize+natscliMsgOverhead), free/2)
}

// natscliArgs is the natscli command line: one client publishing msgs
// 1 KiB messages asynchronously, 500 at a time, to a file-stored stream it
// creates (replicas 1, its default) on the server at url. --no-context
// keeps a user's natscli context out of it.
func natscliArgs(url string, msgs, maxBytes int64) []string {
	return []string{"--no-context", "--server", url, "bench", "js", "pub", "async", natscliSubject,
		"--create", "--storage", "file", "--maxbytes", strconv.FormatInt(maxBytes, 10),
		"--size", itoa(natscliSize), "--batch", itoa(natscliBatch), "--clients", "1",
		"--msgs", strconv.FormatInt(msgs, 10), "--no-progress"}
}

// natsBenchRE is the rate in natscli bench's stats line, "... publisher
// stats: 66,580 msgs/sec ~ 65 MiB/sec ~ ..." with one client, "...
// publisher aggregated stats: 71,584 msgs/sec ~ ..." with several (whose
// per-client lines have no "stats:").
var natsBenchRE = regexp.MustCompile(`stats: ([0-9][0-9,]*) msgs/sec`)

// parseNATSBench reads natscli bench's stdout: the message rate of its
// stats line, and the line.
func parseNATSBench(out string) (float64, string, error) {
	for _, line := range strings.Split(out, "\n") {
		m := natsBenchRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ps, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
		if err != nil || ps <= 0 {
			return 0, "", fmt.Errorf("rate %q in %q", m[1], line)
		}
		return ps, strings.TrimSpace(line), nil
	}
	return 0, "", fmt.Errorf("no \"stats: N msgs/sec\" line in %q", truncate(out, 300))
}
