package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

func freePort(t *testing.T) int {
	t.Helper()
	return testPorts.take(t)
}

// freePorts returns n distinct free ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		ports = append(ports, freePort(t))
	}
	return ports
}

// portBook hands out loopback ports that the servers and child processes of
// the tests bind later. Two races stand between the choice and the bind:
//   - bind(0) readily answers a port again once its listener closed, while
//     the process it was meant for has not bound it yet (CI of 4 and 7 Dec:
//     two bookies of one test on one port). So the book never gives a port
//     twice in this test binary.
//   - any process's bind(0) or outgoing connection may take a port of the
//     kernel's ephemeral range meanwhile (CI of 7 Dec: a broker's "address
//     already in use"). So the ports come from [testPortsLow, 20000): below
//     the ephemeral range, where the kernel never assigns one by itself, and
//     below the range scripts/testports.sh gives the ZooKeeper and etcd
//     servers (20000-31999). Where the ephemeral range starts lower than
//     that, the kernel picks, as bind(0) does.
type portBook struct {
	mu    sync.Mutex
	given map[int]bool
	rng   *rand.Rand
}

// testPortsLow is the first port of the book's range, below scripts/testports.sh's.
const testPortsLow = 10000

// testPorts is the test binary's one book: tests run in parallel, and a
// port must not go to two of them either.
var testPorts = &portBook{given: map[int]bool{}, rng: rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))}

func (b *portBook) take(t *testing.T) int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	low, _, err := ephemeralPorts()
	if err != nil {
		t.Fatal(err)
	}
	high := min(low, 20000) // scripts/testports.sh's range starts there
	for range 1000 {
		addr := "127.0.0.1:0"
		if high > testPortsLow {
			addr = fmt.Sprintf("127.0.0.1:%d", testPortsLow+b.rng.IntN(high-testPortsLow))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !b.given[p] {
			b.given[p] = true
			return p
		}
	}
	t.Fatalf("no free loopback port in [%d, %d) not handed out before, in 1000 tries (%d given)", testPortsLow, high, len(b.given))
	return 0
}

// ephemeralPorts is the kernel's range for bind(0) and outgoing connections.
func ephemeralPorts() (low, high int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0, 0, fmt.Errorf("ip_local_port_range %q: %w", b, err)
	}
	return low, high, nil
}

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
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

// TestStandaloneServesClients starts standalone, checks the ready line,
// the HTTP endpoints and a produce/consume round trip with the official
// client, then shuts it down cleanly.
func TestStandaloneServesClients(t *testing.T) {
	f := standaloneFlags{dataDir: t.TempDir(), listenFlags: listenFlags{bindAddr: "127.0.0.1", advertised: "127.0.0.1",
		brokerPort: freePort(t), webPort: freePort(t), cluster: "standalone"}}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- serveStandalone(ctx, f, slog.New(slog.NewTextHandler(io.Discard, nil)), &out) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line; output %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	web := fmt.Sprintf("http://127.0.0.1:%d", f.webPort)
	for _, path := range []string{"/lookup/v2/topic/persistent/public/default/t", "/metrics", "/admin/v2/persistent/public/default/t/partitions"} {
		resp, err := http.Get(web + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, resp, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/metrics" && !strings.Contains(string(body), "pulsar_ml_cache_used_size") {
			t.Fatalf("/metrics lacks the managed-ledger cache metrics")
		}
	}
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: fmt.Sprintf("pulsar://127.0.0.1:%d", f.brokerPort),
		Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "hello", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("world")}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	m, err := cons.Receive(rctx)
	if err != nil || string(m.Payload()) != "world" {
		t.Fatalf("received %v %v", m, err)
	}
	// The publish went through every stage of the write path, each
	// recorded (internal/stage; the journal here is not pipelined, so it
	// has no separate sync stage).
	resp, err := http.Get(web + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, st := range []string{"broker_to_storage", "ml_queue", "ledger_add", "bookie_queue", "bookie_add", "journal_queue",
		"journal_write", "ledger_deliver", "storage_add", "receipt"} {
		if !regexp.MustCompile(`magnetar_publish_stage_seconds_count\{stage="` + st + `"\} [1-9]`).Match(body) {
			t.Errorf("/metrics has no %s stage observation", st)
		}
	}
	client.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// runStandaloneFor starts standalone on f and returns a stop function.
func runStandaloneFor(t *testing.T, f standaloneFlags) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- serveStandalone(ctx, f, slog.New(slog.NewTextHandler(io.Discard, nil)), &out) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "ready") {
		select {
		case err := <-done:
			t.Fatalf("standalone exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line; output %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
}

// TestStandaloneRestartKeepsMessages: messages and acknowledgements
// survive a restart (the official Go client on both sides).
func TestStandaloneRestartKeepsMessages(t *testing.T) {
	f := standaloneFlags{dataDir: t.TempDir(), listenFlags: listenFlags{bindAddr: "127.0.0.1", advertised: "127.0.0.1",
		brokerPort: freePort(t), webPort: freePort(t), cluster: "standalone"}}
	url := fmt.Sprintf("pulsar://127.0.0.1:%d", f.brokerPort)
	stop := runStandaloneFor(t, f)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// Acks with receipts: each Ack returns once the broker has it, so
	// the restart below follows all 40.
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "durable", SubscriptionName: "s", AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "durable"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 40 {
		m, err := cons.Receive(ctx)
		if err != nil || string(m.Payload()) != fmt.Sprintf("m%03d", i) {
			t.Fatalf("before restart: message %d: %v %v", i, m, err)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	client.Close()
	stop()

	stop = runStandaloneFor(t, f)
	defer stop()
	client, err = pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cons, err = client.Subscribe(pulsar.ConsumerOptions{Topic: "durable", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 40; i < 100; i++ {
		m, err := cons.Receive(ctx)
		if err != nil || string(m.Payload()) != fmt.Sprintf("m%03d", i) {
			t.Fatalf("after restart: want m%03d, got %v %v", i, m, err)
		}
		cons.Ack(m)
	}
}

// TestStandaloneDeleteTopicStaysDeleted: a topic deleted through the admin
// API on real storage is gone after a restart, and using the name again
// starts an empty topic (nothing of the old one comes back).
func TestStandaloneDeleteTopicStaysDeleted(t *testing.T) {
	f := standaloneFlags{dataDir: t.TempDir(), listenFlags: listenFlags{bindAddr: "127.0.0.1", advertised: "127.0.0.1",
		brokerPort: freePort(t), webPort: freePort(t), cluster: "standalone"}}
	url := fmt.Sprintf("pulsar://127.0.0.1:%d", f.brokerPort)
	web := fmt.Sprintf("http://127.0.0.1:%d", f.webPort)
	const topic = "persistent://public/default/deleted"
	stop := runStandaloneFor(t, f)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("old%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	cons.Close()
	prod.Close()
	client.Close()
	deleteTopic(t, web, topic)
	if listed := listTopics(t, web); strings.Contains(listed, "deleted") {
		t.Fatalf("listed after delete: %s", listed)
	}
	stop()

	stop = runStandaloneFor(t, f)
	defer stop()
	if listed := listTopics(t, web); strings.Contains(listed, "deleted") {
		t.Fatalf("listed after delete and restart: %s", listed)
	}
	client, err = pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cons, err = client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s2",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	prod, err = client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "new" {
		t.Fatalf("first message of the recreated topic: %v %v (want \"new\", nothing of the deleted one)", m, err)
	}
}

func deleteTopic(t *testing.T, web, topic string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, web+"/admin/v2/"+strings.Replace(topic, "://", "/", 1), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete %s: %s %s", topic, resp.Status, body)
	}
}

func listTopics(t *testing.T, web string) string {
	t.Helper()
	resp, err := http.Get(web + "/admin/v2/persistent/public/default")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list topics: %s %s", resp.Status, body)
	}
	return string(body)
}

// TestStandaloneMemoryStorage: --storage memory serves clients without a
// bookie (nothing under the data directory's bookie path), and a bad
// --storage value is refused naming the flag.
func TestStandaloneMemoryStorage(t *testing.T) {
	var errOut bytes.Buffer
	if _, err := parseStandaloneFlags([]string{"--storage", "tape", "--config", "/dev/null"}, &errOut,
		slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "--storage") {
		t.Fatalf("--storage tape: %v", err)
	}
	dir := t.TempDir()
	f := standaloneFlags{dataDir: dir, storageKind: "memory", listenFlags: listenFlags{bindAddr: "127.0.0.1",
		advertised: "127.0.0.1", brokerPort: freePort(t), webPort: freePort(t), cluster: "standalone"}}
	stop := runStandaloneFor(t, f)
	defer stop()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: fmt.Sprintf("pulsar://127.0.0.1:%d", f.brokerPort), Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "mem", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "mem"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "m" {
		t.Fatalf("receive: %v %v", m, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bookie")); !os.IsNotExist(err) {
		t.Fatalf("memory storage made a bookie directory: %v", err)
	}
}
