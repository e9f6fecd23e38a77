package perfclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// startBroker serves an in-process broker on loopback (in-memory managed
// ledgers and metadata, as the broker's own client tests run it) and
// returns its pulsar:// and admin http:// URLs.
func startBroker(t *testing.T) (serviceURL, adminURL string) {
	return startBrokerWith(t, broker.Config{})
}

func startBrokerWith(t *testing.T, cfg broker.Config) (serviceURL, adminURL string) {
	t.Helper()
	cfg.ClusterName, cfg.Metadata, cfg.Logger = "test", metadata.NewMemoryServer().NewSession(), slog.New(slog.DiscardHandler)
	b := broker.New(cfg, managedledger.NewMemoryFactory(managedledger.MemoryOptions{}))
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		web.Close()
		srv.Close(ctx)
		b.Close(ctx)
	})
	return "pulsar://" + srv.Addr().String(), web.URL
}

// syncBuffer collects the live lines, written from the run's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testConfig(mode, url, topic string) Config {
	cfg := DefaultConfig(mode)
	cfg.ServiceURL, cfg.Topics = url, []string{topic}
	cfg.Warmup, cfg.Progress, cfg.Drain = 300*time.Millisecond, 500*time.Millisecond, 5*time.Second
	return cfg
}

// TestPerfClientE2E runs e2e at a fixed rate for 2s and checks that
// nothing is lost, the rate is paced (never over the target) and the
// report is whole. How close to the target the rate gets is the machine's
// business, not the tool's: in a loaded make test run (race detector, four
// packages at once) a 2 s run published 1,325 msg/s of 2,000 with a
// publish p50 of 610 ms, and a lower bound failed the test.
func TestPerfClientE2E(t *testing.T) {
	url, _ := startBroker(t)
	cfg := testConfig(ModeE2E, url, "persistent://public/default/perf-e2e")
	cfg.Rate, cfg.Duration, cfg.Variant = 2000, 2*time.Second, "test"
	var live syncBuffer
	rep, err := Run(context.Background(), cfg, &live)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d (%.0f/s), consumed %d, publish %+v, e2e %+v", rep.Published, rep.PublishPS,
		rep.Consumed, *rep.PublishLatency, *rep.E2ELatency)
	if rep.Published == 0 || rep.Consumed != rep.Published || rep.PublishErr != 0 {
		t.Fatalf("published %d, consumed %d, errors %d: want all published consumed", rep.Published, rep.Consumed, rep.PublishErr)
	}
	if rep.PublishPS > 1.1*cfg.Rate {
		t.Errorf("publish rate %.0f msg/s, want at most the %.0f asked (paced)", rep.PublishPS, cfg.Rate)
	}
	if rep.Seconds < 1.5 || rep.Seconds > 3 {
		t.Errorf("window %.2fs, want about 2s", rep.Seconds)
	}
	checkLatency(t, "publish", rep.PublishLatency, rep.PublishCurve)
	checkLatency(t, "e2e", rep.E2ELatency, rep.E2ECurve)
	if len(rep.Timeline) < 3 || !strings.Contains(live.String(), "measuring") {
		t.Errorf("timeline %v, live output %q: want a point and a line per progress interval", rep.Timeline, live.String())
	}
	if rep.System != "magnetar" || rep.Mode != ModeE2E || rep.Topics != 1 || rep.MessageSize != 1024 ||
		rep.Producers != 1 || rep.Consumers != 1 || rep.Variant != "test" {
		t.Errorf("report header %+v", rep)
	}
	checkRoundTrip(t, rep)
}

// TestPerfClientTransactions publishes in transactions of 10, opened one
// at a time and 1 or 4 ahead: every message is published by a commit and
// consumed (a transaction's messages reach consumers only once it
// committed), and the report says where the time per transaction went.
func TestPerfClientTransactions(t *testing.T) {
	url, _ := startBrokerWith(t, broker.Config{TransactionCoordinatorEnabled: true})
	for _, ahead := range []int{0, 1, 4} {
		t.Run(fmt.Sprintf("open-ahead-%d", ahead), func(t *testing.T) {
			cfg := testConfig(ModeE2E, url, fmt.Sprintf("persistent://public/default/perf-txn-%d", ahead))
			cfg.TxnSize, cfg.TxnOpenAhead, cfg.NumMessages, cfg.Warmup = 10, ahead, 300, 0
			rep, err := Run(context.Background(), cfg, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Published != 300 || rep.PublishErr != 0 || rep.Consumed != rep.Published {
				t.Fatalf("published %d (errors %d), consumed %d: want 300 committed and consumed", rep.Published, rep.PublishErr, rep.Consumed)
			}
			tx := rep.Txn
			if tx == nil || tx.Transactions < 30 || tx.NewUs <= 0 || tx.FirstSendUs <= 0 || tx.CommitUs <= 0 {
				t.Fatalf("transaction phases %+v: want 30 or more transactions, each phase timed", tx)
			}
			checkRoundTrip(t, rep)
		})
	}
}

func checkLatency(t *testing.T, what string, l *perfkit.Latency, curve []CurvePoint) {
	t.Helper()
	if l == nil || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
		t.Errorf("%s latency %+v: want non-zero, p50 <= p99 <= max", what, l)
	}
	if len(curve) != len(CurvePercentiles()) {
		t.Fatalf("%s curve has %d points, want %d", what, len(curve), len(CurvePercentiles()))
	}
	for i := 1; i < len(curve); i++ {
		if curve[i].Micros < curve[i-1].Micros {
			t.Errorf("%s curve falls at p%v: %v", what, curve[i].Percentile, curve)
		}
	}
}

func checkRoundTrip(t *testing.T, rep Report) {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("JSON round trip changed the report:\n%s\n%+v", b, back)
	}
}

// TestPerfClientProducePartitioned sends a fixed count, unthrottled, to a
// partitioned topic made through the admin API (twice: the second finds
// it made).
func TestPerfClientProducePartitioned(t *testing.T) {
	url, admin := startBroker(t)
	cfg := testConfig(ModeProduce, url, "persistent://public/default/perf-parts")
	cfg.AdminURL, cfg.Partitions, cfg.NumMessages, cfg.Warmup = admin, 2, 500, 0
	for range 2 {
		rep, err := Run(context.Background(), cfg, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Published != 500 || rep.PublishErr != 0 || rep.Consumed != 0 || rep.E2ELatency != nil || rep.Partitions != 2 {
			t.Fatalf("report %+v: want 500 published without errors, nothing consumed", rep)
		}
	}
}

// TestPerfClientConsume consumes a fixed count that a second run
// produces, then stops that run by canceling it.
func TestPerfClientConsume(t *testing.T) {
	url, adminURL := startBroker(t)
	topic := "persistent://public/default/perf-consume"
	con := testConfig(ModeConsume, url, topic)
	con.NumMessages, con.Warmup, con.Progress = 200, 0, 0
	pro := testConfig(ModeProduce, url, topic)
	pro.Rate, pro.Duration, pro.Progress = 1000, time.Minute, 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := make(chan error, 1)
	go func() {
		// The consumer must subscribe before messages it is to count
		// are sent.
		if err := waitConsumer(ctx, adminURL+"/admin/v2/persistent/public/default/perf-consume/stats"); err != nil {
			produced <- err
			return
		}
		_, err := Run(ctx, pro, io.Discard)
		produced <- err
	}()
	rep, err := Run(context.Background(), con, io.Discard)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if rep.Consumed != 200 || rep.ConsumePS <= 0 || rep.MessageSize != 1024 || rep.Published != 0 {
		t.Fatalf("report %+v: want 200 consumed of 1024 bytes", rep)
	}
	checkLatency(t, "e2e", rep.E2ELatency, rep.E2ECurve)
}

func TestPerfClientConfig(t *testing.T) {
	if got := TopicNames([]string{"a", "b"}, 2); !reflect.DeepEqual(got, []string{"a-0", "a-1", "b-0", "b-1"}) {
		t.Errorf("TopicNames: %v", got)
	}
	if got := TopicNames([]string{"a"}, 1); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("TopicNames n=1: %v", got)
	}
	bad := DefaultConfig(ModeE2E)
	bad.Size, bad.Producers = 4, 0
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "size 4") || !strings.Contains(err.Error(), "producers 0") {
		t.Errorf("Validate: %v, want size and producers named", err)
	}
	if _, err := ParseSubscriptionType("key_shared"); err != nil {
		t.Error(err)
	}
	if _, err := ParseCompression("brotli"); err == nil {
		t.Error("ParseCompression accepted brotli")
	}
}

// TestPacerReachesHighRates checks the pacer is not limited by one sleep
// per message: 200k msg/s for 100ms.
func TestPacerReachesHighRates(t *testing.T) {
	stop := make(chan struct{})
	loop := func(rate float64) float64 {
		p := newPacer(rate)
		begin, n := time.Now(), 0
		for time.Since(begin) < 100*time.Millisecond && p.wait(stop) {
			n++
		}
		return float64(n) / time.Since(begin).Seconds()
	}
	// What this loop reaches here with a pacer that never waits: under
	// the race detector on a loaded machine it can be below 200,000/s,
	// and then the pacer must not hold it back further (a loaded make
	// test once measured 113,341/s against a fixed bound).
	capacity := loop(1e12)
	want := min(200_000, capacity)
	if rate := loop(200_000); rate < 0.7*want || rate > 1.3*200_000 {
		t.Errorf("paced %.0f/s, want about %.0f (the loop reaches %.0f/s unpaced)", rate, want, capacity)
	}
}

// TestPacersSpreadTheirFirstSends: n producers paced together send at an
// even rate, not all at once each interval. The old pacers all sent their
// first message when started, so 10,000 topics at 1 msg/s each were one
// burst of 10,000 messages a second.
func TestPacersSpreadTheirFirstSends(t *testing.T) {
	const n = 4
	start := time.Now()
	var firsts []time.Duration
	for i := range n {
		p := newPacer(1) // one a second
		p.spread(start, i, n)
		firsts = append(firsts, p.next.Sub(start))
	}
	for i, d := range firsts {
		if want := time.Duration(i) * time.Second / n; d != want {
			t.Fatalf("producer %d of %d first sends %v after the start, want %v (spread %v)", i, n, d, want, firsts)
		}
	}
	one := newPacer(1)
	one.spread(start, 0, 1)
	unthrottled := newPacer(0)
	unthrottled.spread(start, 3, n)
	if !one.next.IsZero() && !one.next.Equal(start) || !unthrottled.next.IsZero() {
		t.Fatalf("a single or unthrottled producer was delayed: %v %v", one.next, unthrottled.next)
	}
}

// waitConsumer polls a topic's stats URL until a subscription has a
// consumer (or ctx ends, or 30 s pass).
func waitConsumer(ctx context.Context, statsURL string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			Subscriptions map[string]struct {
				Consumers []json.RawMessage `json:"consumers"`
			} `json:"subscriptions"`
		}
		if resp, err := http.Get(statsURL); err == nil {
			if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil {
				for _, sub := range st.Subscriptions {
					if len(sub.Consumers) > 0 {
						resp.Body.Close()
						return nil
					}
				}
			}
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no consumer within 30 s", statsURL)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
