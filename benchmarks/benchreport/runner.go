package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
// servers' CPU use over the run is recorded with it, and the client's.
func (r *runner) perf(ctx context.Context, t target, label, mode string, args ...string) (Run, error) {
	full := append([]string{"perf", mode}, r.clientArgs(t)...)
	full = append(full, args...)
	m := meterCPU(t.servers...)
	bin, full := t.pin.command(r.o.magnetar, full)
	rep, cpu, err := r.client(ctx, label, bin, full...)
	if err != nil {
		return Run{}, err
	}
	return Run{Label: label, Report: rep, ServerCores: m.cores(), MachineCores: m.machineCores(), ClientCores: clientCores(rep, cpu),
		ClientProcesses: 1}, nil
}

// perfSpread runs `magnetar perf <mode>` as n client processes at once
// against t, process i with args(i), and sums their reports
// (perfclient.MergeReports: the latencies are those of every message of
// every process). ClientCores is the processes' CPU summed: below 1 per
// core they ran on, the clients were not the limit. The processes start
// their warm-up together (a start barrier, released once every one has
// created its clients): otherwise one that created its producers first
// measures while the others still load their topics.
func (r *runner) perfSpread(ctx context.Context, t target, label, mode string, n int, args func(i int) []string) (Run, error) {
	if n <= 1 {
		return r.perf(ctx, t, label, mode, args(0)...)
	}
	barrier, err := os.MkdirTemp("", "benchreport-barrier-")
	if err != nil {
		return Run{}, err
	}
	defer os.RemoveAll(barrier)
	m := meterCPU(t.servers...)
	reps := make([]perfclient.Report, n)
	cpus := make([]clientCPU, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	oneExited := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { oneExited <- struct{}{} }()
			full := append(append([]string{"perf", mode, "--start-barrier", barrier}, r.clientArgs(t)...), args(i)...)
			bin, full := t.pin.command(r.o.magnetar, full)
			reps[i], cpus[i], errs[i] = r.client(ctx, fmt.Sprintf("%s, client %d of %d", label, i+1, n), bin, full...)
		}()
	}
	if err := perfclient.ReleaseBarrier(ctx, barrier, n, oneExited); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", label, err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Run{}, err
	}
	rep, err := perfclient.MergeReports(reps)
	if err != nil {
		return Run{}, fmt.Errorf("%s: %w", label, err)
	}
	var cores float64
	for i, c := range cpus {
		cores += clientCores(reps[i], c)
	}
	return Run{Label: label, Report: rep, ServerCores: m.cores(), MachineCores: m.machineCores(), ClientCores: cores,
		ClientProcesses: n}, nil
}

// clientCores is the CPU a client process used in its measured window
// (its report's own figure), else over its life.
func clientCores(rep perfclient.Report, life clientCPU) float64 {
	if rep.CPUCores > 0 {
		return rep.CPUCores
	}
	return life.cores()
}

// clientCPU is a client process's CPU time (user + system) and how long
// it ran.
type clientCPU struct {
	cpu, wall time.Duration
}

// cores is the CPU the process used on average over its life (producer
// creation included), 0 if unknown.
func (c clientCPU) cores() float64 {
	if c.wall <= 0 {
		return 0
	}
	return c.cpu.Seconds() / c.wall.Seconds()
}

// client runs a client command (command) and decodes the JSON report it
// prints on stdout.
func (r *runner) client(ctx context.Context, label, bin string, args ...string) (perfclient.Report, clientCPU, error) {
	out, cpu, err := r.command(ctx, label, bin, args...)
	if err != nil {
		return perfclient.Report{}, cpu, err
	}
	var rep perfclient.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return perfclient.Report{}, cpu, fmt.Errorf("%s: report: %w: %q", label, err, truncate(string(out), 200))
	}
	return rep, cpu, nil
}

// command runs a client command to completion, echoing its progress lines
// (stderr) to ours and into a log, and returns its stdout and the CPU it
// used (taskset execs the client, so the process measured is the client).
func (r *runner) command(ctx context.Context, label, bin string, args ...string) ([]byte, clientCPU, error) {
	logPath := filepath.Join(r.logDir, fmt.Sprintf("%02d-%s.log", r.nextSeq(), sanitize(label)))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, clientCPU{}, err
	}
	defer logFile.Close()
	fmt.Fprintf(os.Stderr, "== %s: %s %s\n", label, filepath.Base(bin), strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(logFile, prefixWriter{w: os.Stderr, prefix: "   "})
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err = cmd.Run()
	var cpu clientCPU
	if ps := cmd.ProcessState; ps != nil {
		cpu = clientCPU{cpu: ps.UserTime() + ps.SystemTime(), wall: time.Since(start)}
	}
	if err != nil {
		return nil, cpu, fmt.Errorf("%s: %w (log: %s)", label, err, logPath)
	}
	return stdout.Bytes(), cpu, nil
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
