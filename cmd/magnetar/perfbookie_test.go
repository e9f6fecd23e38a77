package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// perfBookieArgs is a short run on the real ledger storage: two points of
// two rows each and a 1 MiB cold backlog.
func perfBookieArgs(t *testing.T, extra ...string) []string {
	return append([]string{"perf", "bookie", "--dir", t.TempDir(), "--io-backend", "std", "--clients", "1,2",
		"--sizes", "1k", "--outstanding", "16", "--duration", "300ms", "--warmup", "50ms", "--hot-window", "64k",
		"--backlog-mb", "1", "--backlog-entry", "4k", "--backlog-ledgers", "2", "--disk-duration", "50ms", "--progress", "100ms"}, extra...)
}

type perfBookieLatency struct{ P50, P99, Max int64 }

type perfBookiePoint struct {
	Op            string
	Clients       int
	EntriesPerSec float64           `json:"entries_per_sec"`
	MiBPerSec     float64           `json:"mib_per_sec"`
	Latency       perfBookieLatency `json:"latency_us"`
}

func TestPerfBookieJSON(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "prof")
	var out, errOut bytes.Buffer
	if code := run(perfBookieArgs(t, "--json", "--profile", prof), &out, &errOut); code != 0 {
		t.Fatalf("code %d: %s", code, errOut.String())
	}
	var rep struct {
		Target  string
		Storage string
		Adds    []perfBookiePoint
		Reads   []perfBookiePoint `json:"cache_reads"`
		Cold    *struct {
			Entries int64
			Read    perfBookiePoint
		} `json:"cold_read"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if rep.Target != "in-process" || rep.Storage != "entrylog" || len(rep.Adds) != 2 || len(rep.Reads) != 2 || rep.Cold == nil {
		t.Fatalf("report %s", out.String())
	}
	points := append(append([]perfBookiePoint{}, rep.Adds...), rep.Reads...)
	for i, p := range append(points, rep.Cold.Read) {
		l := p.Latency
		if p.EntriesPerSec <= 0 || p.MiBPerSec <= 0 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
			t.Fatalf("point %d: %+v", i, p)
		}
	}
	// 1 MiB of 4 KiB entries over 2 ledgers, every one read back and
	// checked (a wrong byte fails the run).
	if rep.Cold.Entries != 256 || rep.Cold.Read.Clients != 2 {
		t.Fatalf("cold read %+v", rep.Cold)
	}
	if !strings.Contains(errOut.String(), "measuring") || !strings.Contains(errOut.String(), "add        2   1KiB") {
		t.Fatalf("no live lines or rows on stderr:\n%s", errOut.String())
	}
	for _, name := range []string{"cpu.pprof", "allocs.pprof"} {
		if st, err := os.Stat(filepath.Join(prof, name)); err != nil || st.Size() == 0 {
			t.Fatalf("profile %s: %v", name, err)
		}
	}
}

func TestPerfBookieTable(t *testing.T) {
	var out, errOut bytes.Buffer
	args := perfBookieArgs(t, "--clients", "1", "--backlog-mb", "0", "--disk-duration", "0")
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("code %d: %s", code, errOut.String())
	}
	for _, want := range []string{"bookie in-process (entrylog storage", "op   clients  entry  entries/s",
		"add        1   1KiB", "read       1   1KiB", "note: cold read not measured (backlog 0)"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in the table:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "measuring") || !strings.Contains(errOut.String(), "measuring") {
		t.Fatalf("live lines belong on stderr only:\nstdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
}

func TestPerfBookieBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--clients", "0"}, {"--sizes", "1q"}, {"--hot-window", "1m,2m"}, {"--backlog-entry", "x"},
		{"--backlog-mb", "-1"}, {"--addr", "localhost"},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"perf", "bookie"}, args...), &out, &errOut); code != 2 ||
			!strings.Contains(errOut.String(), args[0]) {
			t.Fatalf("%v: code %d err %q", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"perf", "bookie", "--io-backend", "spdk", "--dir", t.TempDir()}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), `unknown io backend "spdk"`) {
		t.Fatalf("code %d err %q", code, errOut.String())
	}
}
