package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// pulsarPerfBin is where `make pulsar-perf` (a prerequisite of make test)
// puts the Go client's own perf tool.
var pulsarPerfBin = filepath.Join("..", "..", "bin", "pulsar-perf-go")

// The Go client's perf tool (pulsar-perf-go) produces and consumes against
// a standalone, as users run it: both report a non-zero rate for their
// first 10-second interval, and the consumer receives what was produced.
func TestPulsarPerfGoAgainstStandalone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pulsar-perf-go (make pulsar-perf) as child processes for about a minute: skipped under -short; make test runs it")
	}
	if _, err := os.Stat(pulsarPerfBin); err != nil {
		t.Fatalf("%s: %v (make pulsar-perf installs it)", pulsarPerfBin, err)
	}
	f := standaloneFlags{dataDir: t.TempDir(), listenFlags: listenFlags{bindAddr: "127.0.0.1", advertised: "127.0.0.1",
		brokerPort: freePort(t), webPort: freePort(t), cluster: "standalone"}}
	stop := runStandaloneFor(t, f)
	defer stop()
	url := fmt.Sprintf("pulsar://127.0.0.1:%d", f.brokerPort)
	const topic = "persistent://public/default/pulsar-perf-go"
	// --metrics -1: no Prometheus listener (8000 may be taken).
	consume := startPerf(t, "consume", "-u", url, "--metrics", "-1", topic)
	waitSubscribed(t, f.webPort, "public/default/pulsar-perf-go") // before the first message
	produce := startPerf(t, "produce", "-u", url, "--metrics", "-1", "-r", "500", topic)
	published := produce.firstRate(t, `Publish rate:\s+([0-9.]+) msg/s`)
	consumed := consume.firstRate(t, `Consume rate:\s+([0-9.]+) msg/s`)
	produce.interrupt(t)
	consume.interrupt(t)
	// Paced at 500 msg/s; the consumer's interval started a second earlier.
	if published < 250 || consumed < 250 {
		t.Fatalf("publish rate %.1f, consume rate %.1f msg/s; want both near the 500 asked\nproducer:\n%s\nconsumer:\n%s",
			published, consumed, produce.out.String(), consume.out.String())
	}
}

type perfProcess struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

func startPerf(t *testing.T, args ...string) *perfProcess {
	t.Helper()
	skipProcessesIfShort(t)
	p := &perfProcess{cmd: exec.Command(pulsarPerfBin, args...), out: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

// firstRate waits for the first stats line (every 10 s) and returns its
// rate.
func (p *perfProcess) firstRate(t *testing.T, pattern string) float64 {
	t.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			return v
		}
		select {
		case err := <-p.exited:
			t.Fatalf("%v exited: %v\n%s", p.cmd.Args, err, p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("%v printed no stats line in 40 s:\n%s", p.cmd.Args, p.out.String())
	return 0
}

// interrupt stops the tool as a user would (Ctrl-C) and waits for it.
// The wait is longer than the client's 30 s operation timeout: on Ctrl-C
// pulsar-perf-go's producer stops reading its latency channel while send
// callbacks still write to it (perf/perf-producer.go), so a receipt that
// arrives after the interrupt blocks the client's connection goroutine,
// and closing the producer waits for its CLOSE_PRODUCER answer until that
// timeout (seen under load in make test).
func (p *perfProcess) interrupt(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(45 * time.Second):
		t.Fatalf("%v did not stop on SIGINT:\n%s", p.cmd.Args, p.out.String())
	}
}

// waitSubscribed waits until the topic (tenant/namespace/local name) has
// a subscription with a consumer, as the standalone's admin API reports.
func waitSubscribed(t *testing.T, webPort int, topic string) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/admin/v2/persistent/%s/stats", webPort, topic)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st struct {
			Subscriptions map[string]struct {
				Consumers []json.RawMessage `json:"consumers"`
			} `json:"subscriptions"`
		}
		if resp, err := http.Get(url); err == nil {
			if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil {
				for _, sub := range st.Subscriptions {
					if len(sub.Consumers) > 0 {
						resp.Body.Close()
						return
					}
				}
			}
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no consumer subscribed within 60 s", topic)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
