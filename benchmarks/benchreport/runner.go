package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfclient"
)

// runner runs one report: the options, the results so far and where the
// logs go.
type runner struct {
	o      options
	res    *Results
	logDir string
	seqMu  sync.Mutex // clients may run at once (geo)
	seq    int        // numbers logs in run order
}

// nextSeq is the next log number.
func (r *runner) nextSeq() int {
	r.seqMu.Lock()
	defer r.seqMu.Unlock()
	r.seq++
	return r.seq
}

// target is a running Magnetar deployment the clients talk to.
type target struct {
	name    string
	service string // pulsar://...
	admin   string // http://...
	servers []*server
	// metrics are the servers' /metrics URLs (the publish-stage
	// histograms are read there).
	metrics []string
	// pin is the CPUs its servers and the clients run against it are
	// pinned to (the zero pin: none).
	pin pin
}

// clientArgs are the flags every client run shares.
func (r *runner) clientArgs(t target) []string {
	return []string{"--service-url", t.service, "--admin-url", t.admin, "--json",
		"--duration", r.o.duration.String(), "--warmup", r.o.warmup.String(), "--progress", "5s",
		"--system-label", "magnetar", "--variant", t.name}
}

// perf runs `magnetar perf <mode>` against t and decodes its report. The
// servers' CPU use over the run is recorded with it.
func (r *runner) perf(ctx context.Context, t target, label, mode string, args ...string) (Run, error) {
	full := append([]string{"perf", mode}, r.clientArgs(t)...)
	full = append(full, args...)
	m := meterCPU(t.servers...)
	bin, full := t.pin.command(r.o.magnetar, full)
	rep, err := r.client(ctx, label, bin, full...)
	if err != nil {
		return Run{}, err
	}
	return Run{Label: label, Report: rep, ServerCores: m.cores(), MachineCores: m.machineCores()}, nil
}

// client runs a client command (command) and decodes the JSON report it
// prints on stdout.
func (r *runner) client(ctx context.Context, label, bin string, args ...string) (perfclient.Report, error) {
	out, err := r.command(ctx, label, bin, args...)
	if err != nil {
		return perfclient.Report{}, err
	}
	var rep perfclient.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return perfclient.Report{}, fmt.Errorf("%s: report: %w: %q", label, err, truncate(string(out), 200))
	}
	return rep, nil
}

// command runs a client command to completion, echoing its progress lines
// (stderr) to ours and into a log, and returns its stdout.
func (r *runner) command(ctx context.Context, label, bin string, args ...string) ([]byte, error) {
	logPath := filepath.Join(r.logDir, fmt.Sprintf("%02d-%s.log", r.nextSeq(), sanitize(label)))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	fmt.Fprintf(os.Stderr, "== %s: %s %s\n", label, filepath.Base(bin), strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(logFile, prefixWriter{w: os.Stderr, prefix: "   "})
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w (log: %s)", label, err, logPath)
	}
	return stdout.Bytes(), nil
}

// magnetarCmd runs a magnetar subcommand to completion (setup steps).
func (r *runner) magnetarCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, r.o.magnetar, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("magnetar %s: %w: %s", strings.Join(args, " "), err, truncate(string(out), 500))
	}
	return nil
}

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			fmt.Fprint(p.w, p.prefix+line)
		}
	}
	return len(b), nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }
