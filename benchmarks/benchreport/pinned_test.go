package main

import (
	"bytes"
	"strings"
	"testing"
)

// pinnedResults is sampleResults with a pinned section: a durable 50%
// point at p99 3 ms against in-memory 1 ms, a catch-up at 0.6 of the disk,
// 10,000 topics at p99 25 ms with four client processes.
func pinnedResults() *Results {
	res := sampleResults()
	res.Disk.SyncP99Micros = 500
	half := sampleRun("pinned e2e 50%", 1024, 40000, 40000, 3000)
	half.Percent, half.ServerCores, half.ClientCores, half.ClientProcesses = 50, 0.6, 0.95, 1
	mem := sampleRun("pinned in-memory", 1024, 40000, 40000, 1000)
	mem.Percent = 50
	catchUp := sampleRun("catch-up", 1024, 0, 400000, 1000)
	catchUp.Report.ConsumeMiB, catchUp.ServerCores, catchUp.ClientCores = 360, 0.95, 0.5
	topics := sampleRun("pinned 10000 topics", 1024, 10000, 10000, 25000)
	topics.Report.Topics, topics.ServerCores, topics.ClientCores, topics.ClientProcesses = 10000, 0.5, 0.4, 4
	res.Pinned = PinnedResult{Ran: true, Setup: "the standalone on CPU 0, every client process on CPU 1", ServerCPU: "0", ClientCPU: "1",
		Durable: Deployment{Ran: true, Max: []Run{sampleRun("pinned max", 1024, 0, 80000, 40000)}, Fixed: []Run{half},
			Topics: []Run{topics}, CatchUp: &catchUp, BacklogMiB: 1024},
		Memory: Deployment{Ran: true, Fixed: []Run{mem}}}
	return res
}

func TestPinnedTargets(t *testing.T) {
	want := map[string]struct {
		ratio string
		met   bool
		why   string
	}{
		pinnedPrefix + "publish p99 at 50%":         {"0.60", true, ""},
		pinnedPrefix + "durable publish p99 at 50%": {"1.50", false, "clients (1 process(es)) used 0.95 of their core, so they set the pace"},
		pinnedPrefix + "cold catch-up":              {"0.60", true, ""},
		pinnedPrefix + "10000 topics":               {"1.25", false, "4 client process(es) 0.40"},
	}
	found := 0
	for _, r := range targetRows(pinnedResults()) {
		for key, w := range want {
			if !strings.HasPrefix(r.name, key) {
				continue
			}
			found++
			if r.ratio != w.ratio || r.met != w.met || !r.ran {
				t.Errorf("%s: ratio %s met %v ran %v, want %s %v", r.name, r.ratio, r.met, r.ran, w.ratio, w.met)
			}
			if !strings.Contains(r.why, w.why) {
				t.Errorf("%s: why %q, want it to say %q", r.name, r.why, w.why)
			}
		}
	}
	if found != len(want) {
		t.Fatalf("matched %d of %d pinned targets", found, len(want))
	}
}

// A pinned section selected but not run has its row, not measured.
func TestPinnedNotRun(t *testing.T) {
	res := sampleResults()
	res.Sections = []string{"pinned"}
	rows := pinnedTargetRows(res)
	if len(rows) != 1 || rows[0].ran {
		t.Fatalf("rows of a pinned section that did not run: %+v", rows)
	}
	res.Sections = []string{"standalone"}
	if rows := pinnedTargetRows(res); len(rows) != 0 {
		t.Fatalf("rows of a pinned section not selected: %+v", rows)
	}
}

func TestPinnedWhy(t *testing.T) {
	for _, c := range []struct {
		server, client float64
		want           string
	}{
		{0.5, 0.95, "so they set the pace"},
		{0.97, 0.3, "the server is CPU-bound"},
		{0.5, 0.3, "neither was CPU-bound"},
	} {
		if got := pinnedWhy(&Run{ServerCores: c.server, ClientCores: c.client}); !strings.Contains(got, c.want) {
			t.Errorf("server %.2f client %.2f: %q, want %q", c.server, c.client, got, c.want)
		}
	}
}

func TestPinnedSectionInReport(t *testing.T) {
	var b bytes.Buffer
	writeReport(&b, pinnedResults(), nil)
	out := b.String()
	for _, s := range []string{"## Server and clients on separate cores", "| pinned 10000 topics | 10000 | 10000 |",
		"0.40 (4)", "Cold catch-up of 1024 MiB"} {
		if !strings.Contains(out, s) {
			t.Errorf("report lacks %q", s)
		}
	}
}

func TestTopicShare(t *testing.T) {
	for _, c := range []struct{ n, procs int }{{10000, 4}, {10, 3}, {3, 3}, {7, 1}} {
		sum := 0
		for i := range c.procs {
			s := topicShare(c.n, c.procs, i)
			if s < c.n/c.procs || s > c.n/c.procs+1 {
				t.Errorf("n %d over %d: client %d gets %d", c.n, c.procs, i, s)
			}
			sum += s
		}
		if sum != c.n {
			t.Errorf("n %d over %d: shares sum to %d", c.n, c.procs, sum)
		}
	}
}
