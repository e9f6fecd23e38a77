package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
)

// The in-memory yardstick (issue 37). Every durable latency target is
// measured against the same rate on in-memory storage, so that yardstick
// must itself be sound: memory holding only what cursors need (a store
// that kept every message made the garbage collector the limit: 124K
// msg/s and 5.3 GiB after 40 s), at fixed rates the durable runs share.

// memoryBoundWindow is how long the bounded-memory runs publish: long
// enough that a store keeping every message would be gigabytes.
const memoryBoundWindow = 60 * time.Second

// commonRates are the fixed rates (1 KiB msg/s) measured on in-memory
// storage and on every durable variant, so each durable p99 has an
// in-memory p99 at the same rate beside it.
var commonRates = [...]float64{20000, 40000, 60000}

// memoryP99At40kMs is the in-memory publish p99 target at 40,000 msg/s
// (what it was on 2 Dec, before the store grew without bound).
const (
	memoryP99At40kMs = 3.5
	memoryMaxTarget  = 200000.0
)

// MemoryBound is the in-memory standalone's resident memory after
// memoryBoundWindow at its maximum with no subscription, and with a
// consumer acknowledging everything at the durable maximum's rate.
type MemoryBound struct {
	NoSubscription *Run    `json:"noSubscription,omitempty"`
	NoSubRSSMiB    float64 `json:"noSubscriptionPeakRssMiB"`
	Acked          *Run    `json:"acked,omitempty"`
	AckedRSSMiB    float64 `json:"ackedPeakRssMiB"`
	// CacheMiB is what in-memory storage is configured to hold beyond
	// backlogs: the broker's entry cache and one ledger per topic
	// (managedLedgerMaxSizePerLedgerMbytes, DefaultMemoryLedgerSize).
	CacheMiB float64 `json:"cacheMiB"`
}

// runMemory runs in-memory storage, each run on a fresh standalone: the
// bounded-memory runs, the 1 KiB maximum, the durable standalone's 50%
// rate and the common rates.
func (r *runner) runMemory(ctx context.Context) error {
	d := &r.res.Memory
	d.Ran, d.Setup = true, "the standalone with --storage memory (not durable): broker, network and clients without the storage path"
	d.CacheMiB = standaloneEntryCacheMiB(r.o.config) + managedledger.DefaultMemoryLedgerSize>>20
	start, dir := r.standaloneOn("memory", r.o.config, "--storage", "memory"), filepath.Join(r.o.work, "memory")
	if err := r.memoryBound(ctx, start, dir, d); err != nil {
		return err
	}
	if half := r.res.Standalone.fixedAt(50); half != nil {
		if err := r.fresh(start, dir, d, func(t target) error {
			return r.fixedRun(ctx, t, d, "in-memory storage e2e at the standalone's 50%", 50, half.Report.TargetRate)
		}); err != nil {
			return err
		}
	}
	return r.ratesOn(ctx, start, dir, d, "in-memory storage", commonRates[:])
}

// memoryBound runs the maximum with no subscription (also the in-memory
// 1 KiB maximum) and e2e with an acknowledging consumer, each for
// memoryBoundWindow on a fresh standalone, keeping each one's peak RSS.
func (r *runner) memoryBound(ctx context.Context, start starter, dir string, d *Deployment) error {
	b := &MemoryBound{CacheMiB: d.CacheMiB}
	r.res.MemoryBound = b
	window := max(memoryBoundWindow, r.o.duration)
	if r.o.quick {
		window = r.o.duration
	}
	var one Deployment
	err := r.fresh(start, dir, &one, func(t target) error {
		run, err := r.perf(ctx, t, "in-memory storage max 1024 B, no subscription", "produce", "--size", "1024",
			"--topic", "persistent://public/default/mem-max", "--rate", "0", "--max-pending", itoa(maxWindow),
			"--duration", window.String())
		if err == nil {
			d.Max = append(d.Max, run)
			b.NoSubscription = &run // a copy: d.Max may move when it grows
		}
		return err
	})
	b.NoSubRSSMiB, d.PeakRSSMiB = one.PeakRSSMiB, max(d.PeakRSSMiB, one.PeakRSSMiB)
	if err != nil {
		return err
	}
	rate := 100000.0
	if m := r.res.Standalone.maxOf(1024); m != nil {
		rate = m.Report.PublishPS
	}
	one = Deployment{}
	err = r.fresh(start, dir, &one, func(t target) error {
		run, err := r.perf(ctx, t, "in-memory storage e2e at the durable maximum, acknowledging", "e2e", "--size", "1024",
			"--topic", "persistent://public/default/mem-acked", "--rate", ftoa(rate), "--duration", window.String())
		if err == nil {
			b.Acked = &run
		}
		return err
	})
	b.AckedRSSMiB, d.PeakRSSMiB = one.PeakRSSMiB, max(d.PeakRSSMiB, one.PeakRSSMiB)
	return err
}

// ratesOn runs 1 KiB e2e at each rate, each on a fresh deployment from
// start, into d.Fixed (Percent 0: fixedAtRate finds them).
func (r *runner) ratesOn(ctx context.Context, start starter, dir string, d *Deployment, name string, rates []float64) error {
	for _, rate := range rates {
		if err := r.fresh(start, dir, d, func(t target) error {
			run, err := r.perf(ctx, t, fmt.Sprintf("%s e2e at %.0f msg/s", name, rate), "e2e", "--size", "1024",
				"--topic", fmt.Sprintf("persistent://public/default/rate-%.0f", rate), "--rate", ftoa(rate))
			if err == nil {
				d.Fixed = append(d.Fixed, run)
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// fixedAtRate is the fixed-rate run at rate msg/s that is not a percent
// point (ratesOn's), or nil.
func (d Deployment) fixedAtRate(rate float64) *Run {
	for i := range d.Fixed {
		if d.Fixed[i].Percent == 0 && d.Fixed[i].Report.TargetRate == rate {
			return &d.Fixed[i]
		}
	}
	return nil
}

// standaloneEntryCacheMiB is the broker's entry cache of config
// (managedLedgerCacheSizeMB or its default): the one cache in-memory
// storage uses.
func standaloneEntryCacheMiB(config string) float64 {
	v := confFloat(config, "managedLedgerCacheSizeMB")
	if v <= 0 {
		return managedledger.DefaultCacheSize >> 20
	}
	return v
}

// memoryTargetRows are the in-memory yardstick's own targets.
func memoryTargetRows(res *Results) []targetRow {
	var rows []targetRow
	if b := res.MemoryBound; b != nil {
		limit := b.CacheMiB + targetRSSSlackMiB
		for _, c := range []struct {
			what string
			rss  float64
			run  *Run
		}{{"no subscription, at the maximum", b.NoSubRSSMiB, b.NoSubscription}, {"a consumer acknowledging, at the durable maximum's rate", b.AckedRSSMiB, b.Acked}} {
			if c.run == nil || c.rss <= 0 {
				continue
			}
			row := targetRow{name: fmt.Sprintf("in-memory storage peak RSS, %.0f s with %s ≤ configured caches + 300 MiB", c.run.Report.Seconds, c.what),
				measured: fmt.Sprintf("%.0f MiB vs %.0f + 300 MiB", c.rss, b.CacheMiB),
				ratio:    fmt.Sprintf("%.2f", c.rss/limit), met: c.rss <= limit, ran: true}
			if rep := c.run.Report; rep.Consumed > 0 && rep.Consumed < rep.Published {
				row.why = fmt.Sprintf("the consumer received %d of %d messages: the rest is a backlog, which memory must keep", rep.Consumed, rep.Published)
			}
			rows = append(rows, row)
		}
	}
	if m := res.Memory.maxOf(1024); m != nil {
		rows = append(rows, targetRow{name: fmt.Sprintf("in-memory 1 KiB maximum ≥ %.0f msg/s", memoryMaxTarget),
			measured: fmt.Sprintf("%.0f msg/s", m.Report.PublishPS), ratio: fmt.Sprintf("%.2f", m.Report.PublishPS/memoryMaxTarget),
			met: m.Report.PublishPS >= memoryMaxTarget, ran: true, why: cpuWhy(m, res.Machine.CPUs)})
	}
	if run := res.Memory.fixedAtRate(40000); run != nil {
		rows = append(rows, latencyTarget(fmt.Sprintf("in-memory publish p99 at 40,000 msg/s ≤ %.1f ms", memoryP99At40kMs),
			run.Report.PublishLatency, memoryP99At40kMs))
	}
	return rows
}
