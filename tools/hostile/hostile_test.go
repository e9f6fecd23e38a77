package hostile

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// envInt reads a count from the environment (make test-long raises them).
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// The broker under hostile input, with an official Go client producing
// and consuming alongside: no input may crash it (a recovered panic
// counts as a crash here: it is a bug), hang it, lose a message the
// client had acknowledged, or leave goroutines or file descriptors
// behind. MAGNETAR_HOSTILE_INPUTS and MAGNETAR_HOSTILE_SEEDS set the size
// (make test runs a short one, make test-long a long one).
func TestHostileInputAgainstBroker(t *testing.T) {
	inputs, seeds := envInt("MAGNETAR_HOSTILE_INPUTS", 1000), envInt("MAGNETAR_HOSTILE_SEEDS", 1)
	maxIDs := envInt("MAGNETAR_HOSTILE_MAX_IDS", 20_000)
	first := uint64(envInt("MAGNETAR_HOSTILE_SEED", 1))
	for seed := first; seed < first+uint64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runHostile(t, seed, inputs, maxIDs) })
	}
}

func runHostile(t *testing.T, seed uint64, inputs, maxIDs int) {
	b, addr, httpAddr := startBroker(t)
	const topic = "persistent://public/default/well-behaved"
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	client := startWellBehaved(t, "pulsar://"+addr, topic)
	// A bound that scales with the run: seed 2 of 20,000 inputs needed
	// about 40 ms per input (huge ACKs and slow consumers take longest).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute+time.Duration(inputs)*50*time.Millisecond)
	defer cancel()
	rep, err := Run(ctx, Config{Addr: addr, HTTPAddr: httpAddr, Seed: seed, Inputs: inputs, Topic: topic,
		Timeout: 15 * time.Second, MaxIDs: maxIDs})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %d inputs %v; %d closed, %d served; HTTP %v; time by category %v", seed, rep.Inputs,
		rep.ByCategory, rep.Closed, rep.Served, rep.HTTPStatus, rep.Elapsed)
	for _, f := range rep.Failures {
		t.Error(f)
	}
	client.finish(t)
	if n := b.RecoveredPanics(); n != 0 {
		t.Errorf("%d panics recovered: each is a bug (the broker's log has the stacks)", n)
	}
	expectSettled(t, "goroutines", goroutines, runtime.NumGoroutine)
	expectSettled(t, "file descriptors", fds, func() int { return openFDs(t) })
}

// expectSettled waits for a resource count to come back to its level
// before the run (a margin for the runtime's own), or fails.
func expectSettled(t *testing.T, what string, before int, now func() int) {
	t.Helper()
	const margin = 20
	deadline := time.Now().Add(20 * time.Second)
	for now() > before+margin && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := now(); n > before+margin {
		if what == "goroutines" {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
		t.Errorf("%s grew from %d to %d", what, before, n)
	}
}

func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(entries)
}

// startBroker starts a broker with ledger-backed topics on an in-process
// bookie, the admin API over a configuration store, and the web service
// with the limits the real binary uses.
func startBroker(t *testing.T) (b *broker.Broker, addr, httpAddr string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	meta, tr := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	bk := ledgertest.StartBookie(t, engine.NewMem(), meta, tr, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(tr) })
	lc, store := ledgertest.Client(t, meta, tr)
	ml, err := managedledger.NewBKFactory(managedledger.Config{Store: store, Ledgers: lc, MaxEntriesPerLedger: 500,
		MinLedgerRolloverTime: 1, MarkDeleteRate: 20, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	res, err := resources.New(context.Background(), store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	reg, err := schema.New(schema.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	b = broker.New(broker.Config{ClusterName: "hostile", Metadata: store, Resources: res, Schemas: reg, Logger: log}, ml)
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := broker.NewHTTPServer(b.HTTPHandler())
	go func() { _ = web.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = web.Shutdown(ctx)
		srv.Close(ctx)
		b.Close(ctx)
	})
	return b, srv.Addr().String(), ln.Addr().String()
}

// wellBehaved produces numbered messages and consumes them during the
// run; finish checks every acknowledged send was received.
type wellBehaved struct {
	client   pulsar.Client
	producer pulsar.Producer
	consumer pulsar.Consumer
	// stopProducing and stopConsuming end the two goroutines, in that
	// order: everything acknowledged is consumed before the second.
	stopProducing, stopConsuming chan struct{}
	producing, consuming         sync.WaitGroup
	mu                           sync.Mutex
	acked                        map[string]bool
	received                     map[string]bool
	sendErrs                     int
}

func startWellBehaved(t *testing.T, url, topic string) *wellBehaved {
	t.Helper()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second,
		ConnectionTimeout: 10 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	w := &wellBehaved{client: client, stopProducing: make(chan struct{}), stopConsuming: make(chan struct{}),
		acked: map[string]bool{}, received: map[string]bool{}}
	if w.consumer, err = client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "well-behaved",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest}); err != nil {
		t.Fatal(err)
	}
	if w.producer, err = client.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err != nil {
		t.Fatal(err)
	}
	w.producing.Add(1)
	w.consuming.Add(1)
	go w.produce()
	go w.consume()
	return w
}

func (w *wellBehaved) produce() {
	defer w.producing.Done()
	for i := 0; ; i++ {
		select {
		case <-w.stopProducing:
			return
		case <-time.After(2 * time.Millisecond):
		}
		body := strconv.Itoa(i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := w.producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(body)})
		cancel()
		w.mu.Lock()
		if err != nil {
			w.sendErrs++
		} else {
			w.acked[body] = true
		}
		w.mu.Unlock()
	}
}

func (w *wellBehaved) consume() {
	defer w.consuming.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		m, err := w.consumer.Receive(ctx)
		cancel()
		if err == nil {
			w.mu.Lock()
			w.received[string(m.Payload())] = true
			w.mu.Unlock()
			_ = w.consumer.Ack(m)
			continue
		}
		select {
		case <-w.stopConsuming:
			return
		default:
		}
	}
}

// finish stops producing, waits for every acknowledged message to be
// received (up to 30 s), and closes the client.
func (w *wellBehaved) finish(t *testing.T) {
	t.Helper()
	close(w.stopProducing)
	w.producing.Wait()
	deadline := time.Now().Add(30 * time.Second)
	var missing []string
	for {
		w.mu.Lock()
		missing = missing[:0]
		for body := range w.acked {
			if !w.received[body] {
				missing = append(missing, body)
			}
		}
		acked := len(w.acked)
		w.mu.Unlock()
		if len(missing) == 0 || time.Now().After(deadline) {
			t.Logf("well-behaved client: %d sends acknowledged, %d failed, %d missing", acked, w.sendErrs, len(missing))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(w.stopConsuming)
	w.consuming.Wait()
	w.consumer.Close()
	w.producer.Close()
	w.client.Close()
	if len(missing) > 0 {
		t.Errorf("%d acknowledged messages never received, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	if w.sendErrs > 0 {
		t.Errorf("the well-behaved producer saw %d failed sends", w.sendErrs)
	}
}

// TestRunReportsAStoppedRun: a run that runs out of time says so, and its
// last probe is not failed by the spent context (seed 2 of make test-long
// reported "a new connection was not served" for exactly that).
func TestRunReportsAStoppedRun(t *testing.T) {
	_, addr, httpAddr := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	rep, err := Run(ctx, Config{Addr: addr, HTTPAddr: httpAddr, Seed: 1, Inputs: 1_000_000,
		Topic: "persistent://public/default/stopped", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var stopped bool
	for _, f := range rep.Failures {
		switch {
		case strings.Contains(f, "stopped after"):
			stopped = true
		case strings.Contains(f, "at the end"):
			t.Errorf("the last probe failed: %s", f)
		}
	}
	if !stopped {
		t.Errorf("a run of %d of 1,000,000 inputs was not reported as stopped: %v", rep.Inputs, rep.Failures)
	}
}
