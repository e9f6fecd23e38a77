package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// perfLedgerArgs is a short run on two in-process bookies with the real
// ledger storage: quorums 1,1,1 and 2,2,2 with 1 KiB entries, and 3,2,2,
// which needs a third bookie and is skipped.
func perfLedgerArgs(t *testing.T, extra ...string) []string {
	return append([]string{"perf", "ledger", "--dir", t.TempDir(), "--io-backend", "std", "--bookies", "2",
		"--quorums", "1,1,1 2,2,2 3,2,2", "--sizes", "1k", "--writers", "1", "--outstanding", "16",
		"--duration", "300ms", "--warmup", "50ms", "--disk-duration", "50ms", "--progress", "100ms"}, extra...)
}

type perfLedgerPoint struct {
	Quorum struct {
		Ensemble    int `json:"ensemble"`
		WriteQuorum int `json:"write_quorum"`
		AckQuorum   int `json:"ack_quorum"`
	}
	EntriesPerSec float64 `json:"entries_per_sec"`
	MiBPerSec     float64 `json:"mib_per_sec"`
	Latency       struct {
		P50, P95, P99, P999, P9999, Max int64
	} `json:"latency_us"`
	Appended, Verified int64
	DiskFraction       float64 `json:"disk_fraction_qw"`
}

func TestPerfLedgerJSON(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "prof")
	var out, errOut bytes.Buffer
	if code := run(perfLedgerArgs(t, "--json", "--verify", "all", "--profile", prof), &out, &errOut); code != 0 {
		t.Fatalf("code %d: %s", code, errOut.String())
	}
	var rep struct {
		Target  string
		Bookies int
		Storage string
		Verify  string `json:"verify_per_ledger"`
		Disk    *struct {
			WriteSync struct {
				MiBPerSec float64 `json:"mib_per_sec"`
			} `json:"write_datasync"`
		} `json:"disk_limits"`
		Points []perfLedgerPoint
		Notes  []string
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if rep.Target != "in-process" || rep.Bookies != 2 || rep.Storage != "entrylog" || rep.Verify != "all" ||
		rep.Disk == nil || rep.Disk.WriteSync.MiBPerSec <= 0 || len(rep.Points) != 2 || len(rep.Notes) != 1 {
		t.Fatalf("report %s", out.String())
	}
	for i, p := range rep.Points {
		l := p.Latency
		if p.Quorum.WriteQuorum != i+1 || p.EntriesPerSec <= 0 || p.MiBPerSec <= 0 || p.DiskFraction <= 0 ||
			l.P50 <= 0 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.P999 || l.P999 > l.P9999 || l.P9999 > l.Max {
			t.Fatalf("point %d: %+v", i, p)
		}
		// Every entry appended was read back and compared.
		if p.Appended <= 0 || p.Verified != p.Appended {
			t.Fatalf("point %d: %d appended, %d verified", i, p.Appended, p.Verified)
		}
	}
	if !strings.Contains(errOut.String(), "measuring") || !strings.Contains(errOut.String(), "2,2,2         1   1KiB") {
		t.Fatalf("no live lines or rows on stderr:\n%s", errOut.String())
	}
	for _, name := range []string{"cpu.pprof", "allocs.pprof"} {
		if st, err := os.Stat(filepath.Join(prof, name)); err != nil || st.Size() == 0 {
			t.Fatalf("profile %s: %v", name, err)
		}
	}
}

func TestPerfLedgerTable(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(perfLedgerArgs(t, "--quorums", "2,2,1 3,3,3", "--disk-duration", "0"), &out, &errOut); code != 0 {
		t.Fatalf("code %d: %s", code, errOut.String())
	}
	for _, want := range []string{"ledger client -> 2 bookies in-process (entrylog storage", "E,Qw,Qa writers  entry",
		"2,2,1         1   1KiB", "note: quorum 3,3,3 skipped", "note: disk limits not measured"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in the table:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "measuring") || !strings.Contains(errOut.String(), "measuring") {
		t.Fatalf("live lines belong on stderr only:\nstdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
}

func TestPerfLedgerBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--quorums", "2,3,1"}, {"--quorums", "3,2"}, {"--sizes", "1q"}, {"--writers", "0"}, {"--digest", "sha1"},
		{"--verify", "0"}, {"--verify", "some"}, {"--metadata-store", "zk:nohost"}, {"--bookies", "0"}, {"--outstanding", "-1"},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"perf", "ledger"}, args...), &out, &errOut); code != 2 ||
			!strings.Contains(errOut.String(), args[0]) {
			t.Fatalf("%v: code %d err %q", args, code, errOut.String())
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--io-backend", "spdk"}, `unknown io backend "spdk"`},
		{[]string{"--bookies", "33"}, "33 bookies: want 1..32"},
		{[]string{"--quorums", "3,2,2", "--bookies", "2", "--disk-duration", "0"}, "no quorum fits 2 bookies"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"perf", "ledger", "--dir", t.TempDir()}, tc.args...)
		if code := run(args, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.want) {
			t.Fatalf("%v: code %d err %q", tc.args, code, errOut.String())
		}
	}
}
