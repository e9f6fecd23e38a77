package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// runNATSSection measures NATS JetStream with natsperf (runNATS), then
// with natscli's own benchmark (runNATSCLI); each notes its own failure,
// so one tool's figure is kept when the other's is missing.
func (r *runner) runNATSSection(ctx context.Context) error {
	n := &r.res.NATS
	server, err := r.natsServerBin()
	if err != nil {
		n.CLI = &NATSCLI{Skipped: "not run: no nats-server to run it against"}
		return err
	}
	n.Server = server + " (" + natsVersion(server) + ")"
	switch {
	case r.o.natsperf == "":
		n.Skipped = "natsperf not run (--natsperf empty)"
	default:
		if err := r.runNATS(ctx, server); err != nil {
			n.Skipped = err.Error()
			fmt.Fprintf(os.Stderr, "== nats: %v\n", err)
		}
	}
	n.CLI = r.runNATSCLI(ctx, server)
	return ctx.Err()
}

// runNATS measures NATS JetStream with natsperf and the same message
// size: the maximum async publish rate with its default sync and with
// every write fsynced, and latency at Magnetar's 50% rate. Both variants
// run on the same server binary so the comparison is of the setting
// alone; natsperf starts a fresh server in a fresh directory for each.
func (r *runner) runNATS(ctx context.Context, server string) error {
	n := &r.res.NATS
	dir := filepath.Join(r.o.work, "nats")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := []string{"--server-bin", server, "--dir", dir, "--size", "1024", "--json", "--progress", "5s",
		"--duration", r.o.duration.String(), "--warmup", r.o.warmup.String()}
	natsRun := func(label string, args ...string) (*Run, error) {
		// No client CPU: natsperf's own usage includes the nats-server it
		// started and waited for.
		rep, _, err := r.client(ctx, label, r.o.natsperf, append(append([]string{}, base...), args...)...)
		if err != nil {
			return nil, err
		}
		return &Run{Label: label, Report: rep}, nil
	}
	window := "--max-pending=" + itoa(maxWindow)
	var err error
	if n.Default, err = natsRun("nats default max", "--sync", "default", "--mode", "produce", "--rate", "0", window); err != nil {
		return err
	}
	if half := r.res.Standalone.fixedAt(50); half != nil {
		rate := half.Report.TargetRate
		if n.DefaultFixed, err = natsRun("nats default e2e at magnetar's 50%", "--sync", "default", "--mode", "e2e",
			"--rate", ftoa(rate)); err != nil {
			return err
		}
	}
	n.Always, err = natsRun("nats always max", "--sync", "always", "--mode", "produce", "--rate", "0", window)
	if err != nil {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("NATS with sync_interval: always did not run: %v", err))
	}
	return nil
}

// natsServerBin is the server both variants run on: the newer build if
// there is one (it supports sync_interval: always), else nats-server on
// PATH.
func (r *runner) natsServerBin() (string, error) {
	if r.o.natsServer != "" {
		if abs, err := filepath.Abs(r.o.natsServer); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return abs, nil
			}
		}
	}
	p, err := exec.LookPath("nats-server")
	if err != nil {
		return "", fmt.Errorf("no nats-server (scripts/install-nats.sh installs one): %w", err)
	}
	return p, nil
}

// natsVersion is what the server says it is.
func natsVersion(bin string) string {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "unknown version"
	}
	return strings.TrimSpace(string(out))
}
