package main

// The geo-replication section (geo issue, "the benchmark row"): two
// durable standalones, clusters bench-a and bench-b, each with its own
// metadata store in which both clusters are registered and the namespace
// geo/rep replicates to both (docs/geo-replication.md runs clusters on a
// shared configuration store; standalone keeps its configuration in its
// own store, so the registrations are made in each). A consumer on B
// subscribes first; then a producer publishes 1 KiB batched messages into
// A at a fixed rate. What B receives is replicated: its rate is the
// replication throughput, and its end-to-end latency (the producer's send
// time in A, carried in the payload, to receipt in B, one clock) the
// replication latency.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

const (
	geoTopic = "persistent://geo/rep/t"
	// geoLead is how long the consumer on B runs before the producer on
	// A starts: it must be subscribed before the first message.
	geoLead = 3 * time.Second
)

// runGeo measures replication from A to B on shared cores, then (with
// --geo-pinned) with each cluster on its own core (geopin.go). A failed
// pinned pass is noted in its own rows, not the section's.
func (r *runner) runGeo(ctx context.Context) error {
	dir := filepath.Join(r.o.work, "geo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := r.runGeoShared(ctx, dir); err != nil || !r.o.geoPinned {
		return err
	}
	pinned := &GeoPinned{}
	r.res.Geo.Pinned = pinned
	if err := r.runGeoPinned(ctx, filepath.Join(dir, "pinned"), pinned); err != nil {
		pinned.Skipped = err.Error()
		fmt.Fprintf(os.Stderr, "== geo pinned: %v\n", err)
	}
	return ctx.Err()
}

// runGeoShared is the unpinned passes: both standalones and their
// clients share every core.
func (r *runner) runGeoShared(ctx context.Context, dir string) error {
	d := &r.res.Geo
	var ts []target
	defer func() {
		for _, t := range ts {
			_ = t.servers[0].stop()
		}
	}()
	for _, c := range []string{"bench-a", "bench-b"} {
		t, err := r.startStandalone(filepath.Join(dir, c), "--cluster", c)
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		t.name = c
		ts = append(ts, t)
	}
	a, b := ts[0], ts[1]
	if err := geoSetup(ctx, a, b); err != nil {
		return err
	}
	d.Ran = true
	// Unthrottled first: B's receive rate is the replication throughput;
	// then the latency pass at half of it (or --geo-rate if that is lower).
	mp, mc, err := r.geoPass(ctx, a, b, geoTopic+"-max", 0, nil)
	if err != nil {
		return err
	}
	d.MaxProducer, d.MaxConsumer = &mp, &mc
	rate := r.o.geoRate
	if half := mc.Report.ConsumePS / 2; half > 0 && half < rate {
		rate = half
	}
	d.Setup = fmt.Sprintf("two durable standalones on this machine (clusters bench-a and bench-b, each its own metadata store with both "+
		"clusters registered); namespace geo/rep replicated to both; 1 KiB, batching on; a producer in A unthrottled, then at "+
		"%.0f msg/s (half of what B received unthrottled, at most --geo-rate); a consumer in B", rate)
	prod, cons, err := r.geoPass(ctx, a, b, geoTopic, rate, nil)
	if err != nil {
		return err
	}
	d.Producer, d.Consumer = &prod, &cons
	return nil
}

// geoPass publishes into topic in A at rate (0: unthrottled) while a
// consumer in B, subscribed first, receives what is replicated. watch, if
// not nil, is called as A's producer starts and what it returns when the
// producer ends.
func (r *runner) geoPass(ctx context.Context, a, b target, topic string, rate float64, watch func() func()) (prod, cons Run, err error) {
	type result struct {
		run Run
		err error
	}
	consumed := make(chan result, 1)
	go func() {
		run, err := r.perf(ctx, b, "geo consumer in B", "consume", "--topic", topic, "--subscription", "geo-bench",
			"--warmup", (r.o.warmup + geoLead).String())
		consumed <- result{run, err}
	}()
	select {
	case <-time.After(geoLead):
	case <-ctx.Done():
		return prod, cons, ctx.Err()
	}
	// The same window paced or not: with the client's 1,000 a paced
	// producer on a loaded core is held by its window (1,000 / a batch's
	// round trip), not by its pace, and publishes less than asked.
	args := []string{"--size", "1024", "--topic", topic, "--rate", ftoa(rate), "--max-pending", itoa(maxWindow)}
	stop := func() {}
	if watch != nil {
		stop = watch()
	}
	prod, perr := r.perf(ctx, a, "geo producer in A", "produce", args...)
	stop()
	c := <-consumed
	if err := errorsJoin(perr, c.err); err != nil {
		return prod, cons, err
	}
	if c.run.Report.Consumed == 0 {
		return prod, cons, fmt.Errorf("nothing arrived in B (see the standalones' logs in %s)", r.logDir)
	}
	return prod, c.run, nil
}

// geoSetup registers each cluster in the other's store and creates the
// replicated namespace in both.
func geoSetup(ctx context.Context, a, b target) error {
	clusters := fmt.Sprintf(`["%s","%s"]`, a.name, b.name)
	for _, here := range []target{a, b} {
		for _, c := range []target{a, b} {
			if err := httpSend(ctx, "PUT", here.admin+"/admin/v2/clusters/"+c.name,
				fmt.Sprintf(`{"serviceUrl":%q,"brokerServiceUrl":%q}`, c.admin, c.service)); err != nil {
				return err
			}
		}
		if err := httpSend(ctx, "PUT", here.admin+"/admin/v2/tenants/geo", `{"allowedClusters":`+clusters+`}`); err != nil {
			return err
		}
		if err := httpSend(ctx, "PUT", here.admin+"/admin/v2/namespaces/geo/rep", `{"replication_clusters":`+clusters+`}`); err != nil {
			return err
		}
	}
	return nil
}

// writeGeo is the geo-replication section of the report.
func writeGeo(w io.Writer, res *Results) {
	d := res.Geo
	if !d.Ran || d.Producer == nil || d.Consumer == nil {
		skippedSection(w, "Geo-replication", d.Skipped)
		return
	}
	p, c := d.Producer.Report, d.Consumer.Report
	l := lat(c.E2ELatency)
	fmt.Fprintf(w, "## Geo-replication: 1 KiB from cluster A to cluster B\n\n%s. Replication latency: the producer's send "+
		"time in A (in the payload) to the consumer's receipt in B.\n\n"+
		"| rate | published in A | A publish p99 | received in B | MiB/s | replication p50 | p99 | p99.9 | max |\n"+
		"|---|---|---|---|---|---|---|---|---|\n", d.Setup)
	if d.MaxProducer != nil && d.MaxConsumer != nil {
		mp, mc := d.MaxProducer.Report, d.MaxConsumer.Report
		ml := lat(mc.E2ELatency)
		fmt.Fprintf(w, "| unthrottled | %.0f msg/s | %s | %.0f msg/s | %.1f | %s | %s | %s | %s |\n", mp.PublishPS,
			us(lat(mp.PublishLatency).P99), mc.ConsumePS, mc.ConsumeMiB, us(ml.P50), us(ml.P99), us(ml.P999), us(ml.Max))
	}
	fmt.Fprintf(w, "| %.0f | %.0f msg/s | %s | %.0f msg/s | %.1f | %s | %s | %s | %s |\n\n", p.TargetRate, p.PublishPS,
		us(lat(p.PublishLatency).P99), c.ConsumePS, c.ConsumeMiB, us(l.P50), us(l.P99), us(l.P999), us(l.Max))
	writeGeoPinned(w, d.Pinned)
}
