package main

import (
	"strings"
	"testing"
	"time"
)

// natscliOneClient is natscli v0.5.0's stdout for `nats bench js pub async
// benchsubject --create --size 1024 --batch 500 --clients 1 --storage file
// --maxbytes 8GiB --msgs 500000 --no-progress` against nats-server v2.15.2.
const natscliOneClient = `
NATS JetStream asynchronous publisher stats: 66,580 msgs/sec ~ 65 MiB/sec ~ min: 3,870.96us ~ avg: 7,501.26us ~ max: 36,387.65us ~ P50: 7,277.12us ~ P90: 9,843.06us ~ P99: 13,450.34us ~ P99.9: 36,387.65us

`

// natscliTwoClients is the same with --clients 2 --msgs 100000: per-client
// lines, then the aggregate.
const natscliTwoClients = `
  [1] 36,166 msgs/sec ~ 35 MiB/sec ~ min: 4,503.08us ~ avg: 13,809.23us ~ max: 40,639.60us ~ P50: 12,840.86us ~ P90: 19,962.61us ~ P99: 24,529.35us ~ P99.9: 40,639.60us (50,000 msgs)
  [2] 35,792 msgs/sec ~ 35 MiB/sec ~ min: 4,039.54us ~ avg: 13,957.69us ~ max: 34,118.29us ~ P50: 13,124.08us ~ P90: 18,821.63us ~ P99: 32,745.31us ~ P99.9: 34,118.29us (50,000 msgs)

 NATS JetStream asynchronous publisher aggregated stats: 71,584 msgs/sec ~ 70 MiB/sec
 message rates min 35,792 | avg 35,979 | max 36,166 | stddev 187 msgs
 latencies per operation min 4,039.54us | avg 13,883.46us | max 40,639.60us | stddev 14,693.97us | P50 12,867.43us | P90 19,434.08us | P99 32,745.31us | P99.9: 40,639.60us

`

func TestParseNATSBench(t *testing.T) {
	for _, c := range []struct {
		out, line string
		ps        float64
	}{
		{natscliOneClient, "NATS JetStream asynchronous publisher stats: 66,580 msgs/sec ~ 65 MiB/sec", 66580},
		{natscliTwoClients, "NATS JetStream asynchronous publisher aggregated stats: 71,584 msgs/sec ~ 70 MiB/sec", 71584},
		{"x stats: 950 msgs/sec ~ 950 B/sec\n", "x stats: 950 msgs/sec", 950},
	} {
		ps, line, err := parseNATSBench(c.out)
		if err != nil || ps != c.ps || !strings.HasPrefix(line, c.line) {
			t.Errorf("got %v %q %v, want %v %q...", ps, line, err, c.ps, c.line)
		}
	}
	for _, out := range []string{"", "No publisher or subscribers. Nothing to report.\n", "stats: 0 msgs/sec ~ 0 B/sec\n",
		"  [1] 36,166 msgs/sec ~ 35 MiB/sec (50,000 msgs)\n"} {
		if ps, _, err := parseNATSBench(out); err == nil {
			t.Errorf("%q: parsed %v, want an error", out, ps)
		}
	}
}

// TestNATSCLIMessages: a full run aims at 25 s of natsperf's rate, never
// under the floor; --quick at its window.
func TestNATSCLIMessages(t *testing.T) {
	full := options{duration: 20 * time.Second}
	long := options{duration: 60 * time.Second}
	quick := options{duration: 3 * time.Second, quick: true}
	for _, c := range []struct {
		rate float64
		o    options
		want int64
	}{
		{80000, full, 2_000_000},
		{10000, full, natscliMinMessages}, // 250,000 < the floor
		{0, full, natscliMinMessages},     // natsperf did not run
		{80000, long, 4_800_000},          // a longer window, a longer run
		{80000, quick, 240_000},
		{0, quick, natscliQuickMessages},
	} {
		if got := natscliMessages(c.rate, c.o); got != c.want {
			t.Errorf("natscliMessages(%v, %+v) = %d, want %d", c.rate, c.o, got, c.want)
		}
	}
}

func TestNATSCLIMaxBytes(t *testing.T) {
	if got, want := natscliMaxBytes(1_000_000, 100<<30), int64(2*1_000_000*(1024+natscliMsgOverhead)); got != want {
		t.Errorf("plenty of space: %d, want %d", got, want)
	}
	if got := natscliMaxBytes(1_000_000, 1<<30); got != 1<<29 {
		t.Errorf("1 GiB free: %d, want half of it", got)
	}
}

// TestNATSCLIArgs: the command is the (1 KiB, one client, async
// publish in batches of 500, file storage) on our server, with our count.
func TestNATSCLIArgs(t *testing.T) {
	got := strings.Join(natscliArgs("nats://127.0.0.1:4222", 2_000_000, 5<<30), " ")
	for _, want := range []string{"--no-context --server nats://127.0.0.1:4222 bench js pub async ", "--size 1024",
		"--batch 500", "--clients 1", "--storage file", "--create", "--msgs 2000000", "--maxbytes 5368709120"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
