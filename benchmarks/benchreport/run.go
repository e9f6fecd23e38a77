package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// run measures everything and writes the report. A failed cluster or
// NATS part is noted in the report rather than ending the run: the rest
// is still worth having. The standalone part is required.
func run(ctx context.Context, o options) error {
	r := &runner{o: o, res: &Results{Started: time.Now().UTC(), Machine: describeMachine(),
		Options: fmt.Sprintf("duration %s, warm-up %s, backlog %d MiB, topics %v, metadata %d operations and %d topics, geo %.0f msg/s, geo pinned %v",
			o.duration, o.warmup, o.backlogMB, o.topics, o.metaOps, o.metaTopics, o.geoRate, o.geoPinned)}}
	r.logDir = filepath.Join(o.work, "logs")
	for _, d := range []string{o.out, r.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, d := range dataDirs {
		if err := os.RemoveAll(filepath.Join(o.work, d)); err != nil {
			return err
		}
	}
	defer r.cleanup()
	only := o.only
	r.res.Sections = sectionList(only)
	if only["machine"] {
		if err := r.measureMachine(ctx); err != nil {
			return err
		}
	}
	if only["standalone"] {
		if err := r.runStandalone(ctx); err != nil {
			return fmt.Errorf("standalone: %w", err)
		}
	}
	if only["cluster"] && o.cluster {
		if err := r.runCluster(ctx); err != nil {
			r.res.Cluster.Skipped = err.Error()
		}
	} else if only["cluster"] {
		r.res.Cluster.Skipped = "not run (--cluster=false)"
	}
	switch {
	case !only["nats"]:
	case o.natsperf == "":
		r.res.NATS.Skipped = "not run (--natsperf empty)"
	default:
		if err := r.runNATS(ctx); err != nil {
			r.res.NATS.Skipped = err.Error()
		}
	}
	if r.res.NATS.Server != "" {
		r.res.NATS.Server += " (" + natsVersion(r.res.NATS.Server) + ")"
	}
	// The issue sections: each failure is noted in its own section.
	for _, s := range []struct {
		name    string
		run     func(context.Context) error
		skipped *string
	}{{"tls", r.runTLS, &r.res.TLS.Skipped}, {"proxy", r.runProxy, &r.res.Proxy.Skipped},
		{"metadata", r.runMetadata, &r.res.Metadata.Skipped}, {"geo", r.runGeo, &r.res.Geo.Skipped},
		{"syncgeo", r.runSyncGeo, &r.res.SyncGeo.Skipped}} {
		if !only[s.name] {
			continue
		}
		if err := s.run(ctx); err != nil {
			*s.skipped = err.Error()
			fmt.Fprintf(os.Stderr, "== %s: %v\n", s.name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	r.res.Seconds = time.Since(r.res.Started).Seconds()
	return r.write()
}

func (r *runner) measureMachine(ctx context.Context) error {
	dir := filepath.Join(r.o.work, "disk")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	disk, err := r.measureDisk(ctx, dir)
	if err != nil {
		return err
	}
	r.res.Disk = disk
	r.res.Loopback, err = measureLoopback()
	return err
}

// cleanup removes the servers' data (the logs stay).
func (r *runner) cleanup() {
	for _, d := range dataDirs {
		_ = os.RemoveAll(filepath.Join(r.o.work, d))
	}
}

// write puts results.json, the charts and REPORT.md into the output
// directory.
func (r *runner) write() error {
	b, err := json.MarshalIndent(r.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.o.out, "results.json"), b, 0o644); err != nil {
		return err
	}
	charts, err := writeCharts(r.o.out, r.res)
	if err != nil {
		return err
	}
	var md strings.Builder
	writeReport(&md, r.res, charts)
	if err := os.WriteFile(filepath.Join(r.o.out, "REPORT.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "== report: %s (logs in %s)\n", filepath.Join(r.o.out, "REPORT.md"), r.logDir)
	return nil
}

// sectionList is the selected sections in run order.
func sectionList(only map[string]bool) []string {
	var out []string
	for _, n := range sectionNames {
		if only[n] {
			out = append(out, n)
		}
	}
	return out
}

func errorsJoin(errs ...error) error { return errors.Join(errs...) }

// dataDirs are the servers' directories under the work directory.
var dataDirs = []string{"standalone", "memory", "cluster", "nats", "disk", "tls", "proxy", "metadata", "geo", "syncgeo"}
