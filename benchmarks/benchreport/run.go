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

// run measures everything and writes the report.
func run(ctx context.Context, o options) error {
	r := &runner{o: o, logDir: filepath.Join(o.work, "logs"), res: &Results{Started: time.Now().UTC(), Machine: describeMachine(),
		Options: fmt.Sprintf("duration %s, warm-up %s, backlog %d MiB, topics %v, metadata %d operations and %d topics, geo %.0f msg/s, geo pinned %v",
			o.duration, o.warmup, o.backlogMB, o.topics, o.metaOps, o.metaTopics, o.geoRate, o.geoPinned)}}
	return r.measure(ctx)
}

// measure runs the selected sections in order, removing each one's data
// when it ends, and writes the report. A failed cluster, NATS or issue
// section is noted in the report rather than ending the run: the rest is
// still worth having. The machine and standalone parts are required.
func (r *runner) measure(ctx context.Context) error {
	for _, d := range []string{r.o.out, r.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := r.cleanup(); err != nil {
		return err
	}
	defer r.cleanup()
	r.res.Sections = sectionList(r.o.only)
	for _, s := range r.sections() {
		if !r.o.only[s.name] {
			continue
		}
		err := s.run(ctx)
		// The next section needs the disk: a full run once filled it with
		// earlier sections' data.
		err = errors.Join(err, removeAll(r.o.work, s.dirs))
		switch {
		case err != nil && s.skipped == nil:
			return fmt.Errorf("%s: %w", s.name, err)
		case err != nil:
			// After what the section noted itself, if anything.
			*s.skipped = strings.TrimPrefix(*s.skipped+"; "+err.Error(), "; ")
			fmt.Fprintf(os.Stderr, "== %s: %v\n", s.name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	r.res.Seconds = time.Since(r.res.Started).Seconds()
	return r.write()
}

// section is one part of the report (sectionNames).
type section struct {
	name string
	run  func(context.Context) error
	// dirs are its data under the work directory, removed when it ends.
	dirs []string
	// skipped notes its failure in the report; nil: a failure ends the run.
	skipped *string
}

// sections are the report's parts in run order.
func (r *runner) sections() []section {
	res := r.res
	return []section{
		{"machine", r.measureMachine, []string{"disk"}, nil},
		{"standalone", r.runStandalone, []string{"standalone", "memory", "traced", "traced.conf"}, nil},
		{"catchup", r.runCatchUpSection, []string{"catchup"}, nil},
		{"pinned", r.runPinned, []string{"pinned", "pinned-memory"}, &res.Pinned.Skipped},
		{"journaldev", r.runJournalDevice, []string{"journaldev", "journaldev.conf"}, &res.JournalDev.Skipped},
		{"cluster", r.runClusterSection, []string{"cluster"}, &res.Cluster.Skipped},
		{"nats", r.runNATSSection, []string{"nats"}, &res.NATS.Skipped},
		{"tls", r.runTLS, []string{"tls"}, &res.TLS.Skipped},
		{"proxy", r.runProxy, []string{"proxy"}, &res.Proxy.Skipped},
		{"metadata", r.runMetadata, []string{"metadata"}, &res.Metadata.Skipped},
		{"geo", r.runGeo, []string{"geo"}, &res.Geo.Skipped},
		{"syncgeo", r.runSyncGeo, []string{"syncgeo"}, &res.SyncGeo.Skipped},
		{"txn", r.runTxn, []string{"txn"}, &res.Txn.Skipped},
	}
}

// runClusterSection runs the cluster unless --cluster=false.
func (r *runner) runClusterSection(ctx context.Context) error {
	if !r.o.cluster {
		r.res.Cluster.Skipped = "not run (--cluster=false)"
		return nil
	}
	return r.runCluster(ctx)
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

// cleanup removes every section's data (the logs stay).
func (r *runner) cleanup() error {
	var errs []error
	for _, s := range r.sections() {
		errs = append(errs, removeAll(r.o.work, s.dirs))
	}
	return errors.Join(errs...)
}

// removeAll removes names under dir.
func removeAll(dir string, names []string) error {
	var errs []error
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
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
