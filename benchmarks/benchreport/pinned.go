package main

// The pinned section (issue 37): the standalone on one core and every
// client on the other (taskset -c, set at exec: every thread and child
// inherits it). In the other sections server and clients share both
// cores, so "the client is the limit" can only be argued; here it is
// measured: each run reports the clients' CPU beside the server's, and a
// client below its one core did not set the pace. The runs are the
// report's headline ones: the 1 KiB maximum, e2e at 50% of it (and
// in-memory storage at the same rate, the yardstick), the largest
// many-topics count spread over client processes, and the cold catch-up.

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// PinnedResult is the pinned section's runs.
type PinnedResult struct {
	Ran   bool   `json:"ran"`
	Setup string `json:"setup"`
	// ServerCPU and ClientCPU are taskset CPU lists.
	ServerCPU string `json:"serverCpu"`
	ClientCPU string `json:"clientCpu"`
	// Durable has the maximum, the 50% point, the many-topics run and the
	// catch-up; Memory in-memory storage at the durable 50% point's rate.
	Durable Deployment `json:"durable"`
	Memory  Deployment `json:"memory"`
	Skipped string     `json:"skipped,omitempty"`
}

// pinnedOn is a starter of standalones whose process runs on server and
// whose clients run on client.
func (r *runner) pinnedOn(name, config string, server, client pin, extra ...string) starter {
	return func(dir string) (target, func() error, error) {
		t, err := r.startStandaloneOn(config, dir, server, extra...)
		if err != nil {
			return target{}, nil, err
		}
		t.name, t.pin = name, client
		return t, t.servers[0].stop, nil
	}
}

// runPinned runs the pinned section, each run on a fresh standalone (the
// catch-up on its fill's data, as in the standalone section).
func (r *runner) runPinned(ctx context.Context) error {
	p := &r.res.Pinned
	server, client, err := geoPins()
	if err != nil {
		return err
	}
	p.ServerCPU, p.ClientCPU = server.cpus, client.cpus
	p.Ran = true
	p.Setup = fmt.Sprintf("the standalone on CPU %s, every client process on CPU %s (taskset -c); a fresh standalone per run", server.cpus, client.cpus)
	d, dir := &p.Durable, filepath.Join(r.o.work, "pinned")
	d.Ran, d.Setup, d.CacheMiB = true, p.Setup, standaloneCacheMiB(r.o.config)
	start := r.pinnedOn("pinned", r.o.config, server, client)
	if err := r.fresh(start, dir, d, func(t target) error { return r.maxRun(ctx, t, d, 1024, false) }); err != nil {
		return err
	}
	rate := d.maxOf(1024).Report.PublishPS / 2
	if err := r.fresh(start, dir, d, func(t target) error {
		return r.fixedRun(ctx, t, d, "pinned e2e 50%", 50, rate)
	}); err != nil {
		return err
	}
	mem := &p.Memory
	mem.Ran, mem.Setup = true, p.Setup+"; --storage memory"
	memStart := r.pinnedOn("pinned in-memory", r.o.config, server, client, "--storage", "memory")
	if err := r.fresh(memStart, filepath.Join(r.o.work, "pinned-memory"), mem, func(t target) error {
		return r.fixedRun(ctx, t, mem, "pinned in-memory storage e2e at the pinned 50%", 50, rate)
	}); err != nil {
		return err
	}
	if n := slices.Max(r.o.topics); n > 0 {
		if err := r.fresh(start, dir, d, func(t target) error {
			run, err := r.manyTopicsRun(ctx, t, n, min(float64(n), rate))
			if err == nil {
				d.Topics = append(d.Topics, run)
			}
			return err
		}); err != nil {
			return err
		}
	}
	return r.backlogAndCatchUp(ctx, start, dir, d)
}

// pinnedPrefix names a pinned target row.
const pinnedPrefix = "server and clients on separate cores: "

// pinnedTargetRows are the headline targets measured with the server
// and the clients on separate cores, each miss with the clients' CPU.
func pinnedTargetRows(res *Results) []targetRow {
	p := res.Pinned
	if !p.Ran {
		if slices.Contains(res.Sections, "pinned") {
			return []targetRow{{name: pinnedPrefix + "the report's latency targets"}}
		}
		return nil
	}
	var rows []targetRow
	if half := p.Durable.fixedAt(50); half != nil {
		pub := latencyTarget(pinnedPrefix+"publish p99 at 50% of the maximum ≤ 5 ms", half.Report.PublishLatency, targetPublishP99Ms)
		pub.why = pinnedWhy(half) + " " + stagesWhy(half.Stages, nil)
		rows = append(rows, pub)
		if mem := p.Memory.fixedAt(50); mem != nil && res.Disk.SyncP99Micros > 0 {
			tail := durableTailTarget(half, mem, res.Disk, nil)
			tail.name = pinnedPrefix + tail.name
			tail.why = pinnedWhy(half) + " " + tail.why
			rows = append(rows, tail)
		}
	}
	for _, row := range catchUpTargets(&p.Durable, res.Disk.ColdReadMiBSec, pinnedWhy) {
		row.name = pinnedPrefix + row.name
		rows = append(rows, row)
	}
	for i := range p.Durable.Topics {
		if run := &p.Durable.Topics[i]; run.Report.Topics*max(run.Report.Producers, 1) == targetTopics {
			row := topicsTarget(run)
			row.name = pinnedPrefix + row.name
			rows = append(rows, row)
		}
	}
	return rows
}

// pinnedWhy says which side of a pinned run was at its core's limit.
func pinnedWhy(run *Run) string {
	client := fmt.Sprintf("the clients (%d process(es)) used %.2f of their core", max(run.ClientProcesses, 1), run.ClientCores)
	server := fmt.Sprintf("the server %.2f of its own", run.ServerCores)
	switch {
	case run.ClientCores >= 0.9:
		return client + ", so they set the pace; " + server + "."
	case run.ServerCores >= 0.9:
		return server + " core: the server is CPU-bound; " + client + "."
	}
	return strings.ToUpper(server[:1]) + server[1:] + " core and " + client + ": neither was CPU-bound on average."
}

// writePinned is the pinned section's table.
func writePinned(w io.Writer, res *Results) {
	p := res.Pinned
	if !p.Ran {
		return
	}
	fmt.Fprintf(w, "## Server and clients on separate cores\n\n%s. Client cores: the client processes' CPU time over their "+
		"lives (producer creation included), summed; below 1, the clients were not the limit.\n\n"+
		"| run | rate | achieved | publish p50 | p99 | p99.9 | e2e p99 | server cores | client cores (processes) | errors |\n"+
		"|---|---|---|---|---|---|---|---|---|---|\n", p.Setup)
	var runs []Run
	runs = append(runs, p.Durable.Max...)
	runs = append(runs, p.Durable.Fixed...)
	runs = append(runs, p.Memory.Fixed...)
	runs = append(runs, p.Durable.Topics...)
	for _, run := range runs {
		r, l, e := run.Report, lat(run.Report.PublishLatency), lat(run.Report.E2ELatency)
		rate := "unthrottled"
		if r.TargetRate > 0 {
			rate = fmt.Sprintf("%.0f", r.TargetRate)
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s | %s | %.2f | %.2f (%d) | %d |\n", run.Label, rate, r.PublishPS,
			us(l.P50), us(l.P99), us(l.P999), us(e.P99), run.ServerCores, run.ClientCores, max(run.ClientProcesses, 1), r.PublishErr)
	}
	if c := p.Durable.CatchUp; c != nil {
		fmt.Fprintf(w, "\nCold catch-up of %.0f MiB: %.0f msg/s, %.1f MiB/s; server %.2f cores, client %.2f.\n",
			p.Durable.BacklogMiB, c.Report.ConsumePS, c.Report.ConsumeMiB, c.ServerCores, c.ClientCores)
		if warm := p.Durable.CatchUpWarm; warm != nil {
			fmt.Fprintf(w, "The same broker then read the second backlog: %.0f msg/s, %.1f MiB/s; server %.2f cores, client %.2f.\n",
				warm.Report.ConsumePS, warm.Report.ConsumeMiB, warm.ServerCores, warm.ClientCores)
		}
	}
	fmt.Fprintln(w)
}
