package perfjournal

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

func smallConfig(dir string) Config {
	cfg := DefaultConfig(dir)
	cfg.Backends = []string{engine.BackendStd}
	cfg.EntrySizes = []int{1 << 10}
	cfg.Writers = []int{1, TargetWriters}
	// Long enough that one slow datasync on a loaded CI disk (tens to
	// hundreds of milliseconds) cannot leave a point empty.
	cfg.Duration, cfg.Warmup, cfg.DiskDuration = 700*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	cfg.MaxFileSize = 8 << 20
	return cfg
}

func TestRunSmall(t *testing.T) {
	rep, err := Run(smallConfig(t.TempDir()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Baselines) != 1 || rep.Baselines[0].PerEntry.OpsPerSec <= 0 || perfkit.Lat(rep.Baselines[0].Datasync).P99 <= 0 {
		t.Fatalf("baselines: %+v", rep.Baselines)
	}
	if len(rep.Points) != 4 { // pipeline off and on x 1 and 64 writers
		t.Fatalf("%d points, want 4", len(rep.Points))
	}
	for _, p := range rep.Points {
		checkPoint(t, p)
	}
	if len(rep.Targets) != 2 {
		t.Fatalf("%d targets, want one per pipeline mode", len(rep.Targets))
	}
	for _, tg := range rep.Targets {
		if tg.RateRatio <= 0 || tg.OneWriterRatio <= 0 || tg.BandwidthFraction <= 0 || tg.P99Ratio <= 0 {
			t.Fatalf("target without figures: %+v", tg)
		}
	}
	var out bytes.Buffer
	Format(&out, rep)
	for _, want := range []string{"std disk: 4KiB write+datasync", "targets at 1KiB entries x 64 writers", "pipeline=on reuse=off wait=1ms"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

// checkPoint asserts a point's figures are consistent with each other.
func checkPoint(t *testing.T, p Point) {
	t.Helper()
	l := p.LatencyUS
	switch {
	case p.Entries <= 0 || p.EntriesPerSec <= 0 || p.MiBPerSec <= 0:
		t.Fatalf("no throughput: %+v", p)
	case l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max:
		t.Fatalf("latencies out of order: %+v", l)
	// A window's edges can split a group's write from its datasync (pipeline),
	// so bytes per datasync may miss one group's worth: allow 10%.
	case p.Datasyncs <= 0 || p.BytesPerSync < 0.9*journal.BlockSize || p.WrittenMiBPerSec < 0.9*p.MiBPerSec:
		t.Fatalf("group figures: %+v", p)
	case p.Disk == nil || p.DiskBlock%journal.BlockSize != 0 || p.Disk.BlockSize != p.DiskBlock || p.BandwidthFraction <= 0:
		t.Fatalf("disk limit: %+v", p)
	}
	// One writer waiting for each add can only ever make one-entry groups.
	if p.Writers == 1 && (p.EntriesPerSync < 0.8 || p.EntriesPerSync > 1.2 || p.DiskBlock != journal.BlockSize) {
		t.Fatalf("one writer: %.2f entries and %d-byte block per datasync", p.EntriesPerSync, p.DiskBlock)
	}
}

// TestPrimeRecycled checks the primer leaves a full pool of written files
// and a nearly full current one.
func TestPrimeRecycled(t *testing.T) {
	fs := engine.NewMem()
	const size = 8 << 20
	opts := journal.Options{MaxFileSize: size, Logger: discardLogger()}
	if err := primeRecycled(fs, "/j", opts); err != nil {
		t.Fatal(err)
	}
	names, err := fs.List("/j")
	if err != nil {
		t.Fatal(err)
	}
	var recycled, current int
	for _, n := range names {
		if !strings.HasSuffix(n, ".journal") {
			continue
		}
		st, err := fs.Stat("/j/" + n)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size < size-3<<20 { // the primer stops within about 2 MiB of rotating
			t.Fatalf("%s holds only %d bytes", n, st.Size)
		}
		if strings.HasPrefix(n, "recycle-") {
			recycled++
		} else {
			current++
		}
	}
	if recycled != 2 || current != 1 {
		t.Fatalf("files %v: want 2 recycled and 1 current", names)
	}
}

func TestConfigRejects(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"no writers":    func(c *Config) { c.Writers = nil },
		"zero inflight": func(c *Config) { c.Inflight = 0 },
		"queue":         func(c *Config) { c.Writers, c.Inflight = []int{256}, 100 },
		"tiny files":    func(c *Config) { c.MaxFileSize = 1 << 20 },
	} {
		cfg := smallConfig(t.TempDir())
		mod(&cfg)
		if _, err := Run(cfg, nil); err == nil || !strings.HasPrefix(err.Error(), "perf journal:") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestRunSkipSync: without a datasync per group there is no disk limit to
// compare with and the durability targets do not apply.
func TestRunSkipSync(t *testing.T) {
	cfg := smallConfig(t.TempDir())
	cfg.Writers, cfg.SkipSync = []int{TargetWriters}, true
	rep, err := Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 1 || len(rep.Targets) != 0 { // pipeline on and off are the same without syncs
		t.Fatalf("%d points and %d targets, want 1 and 0", len(rep.Points), len(rep.Targets))
	}
	if p := rep.Points[0]; p.EntriesPerSec <= 0 || p.Disk != nil || p.Pipeline || !p.SkipSync {
		t.Fatalf("point %+v", p)
	}
}
