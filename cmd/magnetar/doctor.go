package main

// magnetar doctor: the preflight check of a host (internal/preflight),
// run by hand or by the systemd units' ExecStartPre.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/preflight"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

type doctorFlags struct {
	config      string
	journalDirs string
	ledgerDirs  string
	metadataURL string
	threshold   float64
	diskTest    time.Duration
	output      string
}

func parseDoctorFlags(args []string, stderr io.Writer) (doctorFlags, error) {
	var f doctorFlags
	fs := flag.NewFlagSet("magnetar doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "a bookkeeper.conf, standalone.conf or broker.conf to take the directories and metadata store from")
	fs.StringVar(&f.journalDirs, "journal-dirs", "", "journalDirectories: comma-separated")
	fs.StringVar(&f.ledgerDirs, "ledger-dirs", "", "ledgerDirectories: comma-separated")
	fs.StringVar(&f.metadataURL, "metadata-store", "", "metadataServiceUri / metadataStoreUrl to connect to (zk:..., etcd:... or local:...; empty: not checked)")
	fs.Float64Var(&f.threshold, "disk-usage-threshold", 0.95, "diskUsageThreshold: past it a bookie turns read-only")
	fs.DurationVar(&f.diskTest, "disk-test", 2*time.Second, "how long to measure each journal device's sync latency (0: skip)")
	fs.StringVar(&f.output, "output", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.output != "text" && f.output != "json" {
		return f, fmt.Errorf("--output: want text or json, got %q", f.output)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.config != "" {
		conf, err := readConf(f.config)
		if err != nil {
			return f, err
		}
		f.fromConf(conf, set)
	}
	return f, nil
}

// fromConf takes what flags did not set from a Pulsar or BookKeeper
// configuration file (either's key names).
func (f *doctorFlags) fromConf(conf map[string]string, set map[string]bool) {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := strings.TrimSpace(conf[k]); v != "" {
				return v
			}
		}
		return ""
	}
	if !set["journal-dirs"] {
		f.journalDirs = first("journalDirectories", "journalDirectory")
	}
	if !set["ledger-dirs"] {
		f.ledgerDirs = first("ledgerDirectories")
	}
	if !set["metadata-store"] {
		f.metadataURL = first("metadataServiceUri", "metadataStoreUrl")
	}
}

// dirList is splitDirs allowing none (a broker host has no journal).
func dirList(s string) []string {
	dirs, _ := splitDirs(s)
	return dirs
}

func runDoctor(args []string, stdout, stderr io.Writer) int {
	f, err := parseDoctorFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "magnetar doctor: %v\n", err)
		return 2
	}
	findings := doctor(f)
	if f.output == "json" {
		out, _ := json.MarshalIndent(findings, "", "  ")
		fmt.Fprintln(stdout, string(out))
	} else {
		writeFindings(stdout, findings)
	}
	if preflight.Worst(findings) == preflight.Fail {
		return 1
	}
	return 0
}

// doctor runs every check f asks for.
func doctor(f doctorFlags) []preflight.Finding {
	host := preflight.Machine{ProbeIOUring: probeIOUring}
	var out []preflight.Finding
	out = append(out, preflight.Limits(host)...)
	out = append(out, preflight.IOUring(host))
	out = append(out, preflight.Kernel(host)...)
	out = append(out, preflight.Clock(host))
	dirs := preflight.Dirs{Journal: dirList(f.journalDirs), Ledgers: dirList(f.ledgerDirs), UsageThreshold: f.threshold}
	out = append(out, preflight.Disks(host, dirs)...)
	if f.metadataURL != "" {
		out = append(out, checkMetadata(f.metadataURL))
	}
	if f.diskTest > 0 {
		for _, dir := range dirs.Journal {
			out = append(out, measureJournal(dir, f.diskTest))
		}
	}
	return out
}

func probeIOUring() error {
	fs, err := engine.NewUring(engine.UringOptions{})
	if err != nil {
		return err
	}
	return fs.Close()
}

// checkMetadata connects to the metadata store and lists its root.
func checkMetadata(url string) preflight.Finding {
	const name = "metadata store"
	url = bookieMetadataURL(url) // a bookkeeper.conf's metadataServiceUri forms, too
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := metadata.Open(ctx, url, metadata.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return preflight.Finding{Check: name, Status: preflight.Fail, Detail: fmt.Sprintf("%s: %v", url, err),
			Advice: "check the address and that ZooKeeper or etcd answers from this host (nc -z host 2181, or 2379); a bookie or broker cannot start without it"}
	}
	defer store.Close()
	if _, err := store.Children(ctx, "/"); err != nil {
		return preflight.Finding{Check: name, Status: preflight.Fail, Detail: fmt.Sprintf("%s: connected, but listing failed: %v", url, err)}
	}
	return preflight.Finding{Check: name, Status: preflight.OK, Detail: url + ": connected"}
}

// measureJournal times 4 KiB appends with fdatasync in dir for d.
func measureJournal(dir string, d time.Duration) preflight.Finding {
	cfg := perfdisk.DefaultConfig(dir)
	cfg.Duration = d
	fs := engine.NewStd()
	defer fs.Close()
	r, err := perfdisk.DatasyncLatency(fs, cfg)
	if err != nil || r.LatencyUS == nil {
		return preflight.Finding{Check: "journal speed " + dir, Status: preflight.Warn, Detail: fmt.Sprintf("not measured: %v", err)}
	}
	return preflight.JournalSpeed(dir, preflight.SyncLatency{P50: time.Duration(r.LatencyUS.P50) * time.Microsecond,
		P99: time.Duration(r.LatencyUS.P99) * time.Microsecond, Ops: r.Ops})
}

func writeFindings(w io.Writer, findings []preflight.Finding) {
	for _, f := range findings {
		fmt.Fprintf(w, "%-5s %s: %s\n", f.Status, f.Check, f.Detail)
		if f.Advice != "" {
			fmt.Fprintf(w, "      -> %s\n", f.Advice)
		}
	}
	switch preflight.Worst(findings) {
	case preflight.Fail:
		fmt.Fprintln(w, "\nverdict: FAIL: fix the findings above before running a bookie or broker here")
	case preflight.Warn:
		fmt.Fprintln(w, "\nverdict: ok to run, with the warnings above")
	default:
		fmt.Fprintln(w, "\nverdict: ok")
	}
}
