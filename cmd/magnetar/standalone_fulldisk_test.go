package main

// A whole standalone (broker, bookie, embedded metadata) on a small real
// file system that fills up and is freed again (issue 30): nothing
// acknowledged is lost, reads go on while the disk is full, and writes
// resume by themselves. The producer is a raw protocol client that sees
// the broker's refusal (PersistenceError naming the full bookie) and opens
// a new producer after it, as clients do; the consumer is the official Go
// client.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/magnetar-io/magnetar/internal/testdisk"
)

// fullDiskRun is what the producer and the consumer saw.
type fullDiskRun struct {
	mu       sync.Mutex
	acked    []string
	received map[string]bool
}

func (r *fullDiskRun) missing() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.acked {
		if !r.received[m] {
			out = append(out, m)
		}
	}
	return out
}

func TestStandaloneSurvivesFullDisk(t *testing.T) {
	disk := testdisk.MountTmpfs(t, "128m")
	f := standaloneFlags{dataDir: disk, listenFlags: listenFlags{bindAddr: "127.0.0.1", advertised: "127.0.0.1",
		brokerPort: freePort(t), webPort: freePort(t), cluster: "standalone"},
		brokerSettings: defaultBrokerSettings(), journal: defaultJournalSettings()}
	f.storage.logSizeLimit = 16 << 20
	f.disk = diskSettings{checkInterval: 100 * time.Millisecond}
	stop := runStandaloneFor(t, f)
	defer func() { stop() }()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: fmt.Sprintf("pulsar://127.0.0.1:%d", f.brokerPort),
		OperationTimeout: 10 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const topic = "persistent://public/default/full-disk"
	run := &fullDiskRun{received: map[string]bool{}}
	consumeAll(t, client, topic, run)
	// The producer is a raw protocol client (rawproducer_test.go): the Go
	// client's producer races with itself on every reconnect while it
	// sends, which a refused send causes here. After a refusal it opens
	// a new producer, as a client must (the topic is fenced until then).
	addr := fmt.Sprintf("127.0.0.1:%d", f.brokerPort)
	var prod *rawProducer
	defer func() {
		if prod != nil {
			prod.close()
		}
	}()
	filler := testdisk.Fill(t, disk, 24<<20)

	// Fill: 16 KiB messages until one is refused.
	payload := strings.Repeat("x", 16<<10)
	send := func(i int) error {
		body := fmt.Sprintf("m%05d:%s", i, payload)
		if prod == nil {
			p, err := dialRawProducer(addr, topic)
			if err != nil {
				return err
			}
			prod = p
		}
		err := prod.send([]byte(body))
		if err != nil {
			prod.close()
			prod = nil
			return err
		}
		run.mu.Lock()
		run.acked = append(run.acked, body[:6])
		run.mu.Unlock()
		return nil
	}
	start, i := time.Now(), 0
	var refused error
	for ; i < 5000 && refused == nil; i++ {
		refused = send(i)
	}
	if refused == nil {
		t.Fatalf("5000 messages of 16 KiB fit on a disk with 24 MiB free")
	}
	toReadOnly := time.Since(start)
	t.Logf("disk full after %d messages (%v): the producer saw %v", len(run.acked), toReadOnly, refused)

	// Reads go on while the disk is full: everything acknowledged arrives.
	waitReceived(t, run, "while the disk is full")

	// Free the space: writes resume by themselves.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	var resumed time.Duration
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); i++ {
		if err := send(i); err == nil {
			resumed = time.Since(freed)
			break
		}
		time.Sleep(20 * time.Millisecond) // refused at once while read-only
	}
	if resumed == 0 {
		t.Fatalf("no send succeeded in the 60 s after space was freed")
	}
	for j := 0; j < 20; j++ {
		if err := send(i + 1 + j); err != nil {
			t.Fatalf("send after resuming: %v", err)
		}
	}
	waitReceived(t, run, "after space was freed")
	t.Logf("standalone on a 128 MiB tmpfs: read-only after %v of 16 KiB sends (%d acknowledged); first send accepted %v after space was freed; all %d acknowledged messages received",
		toReadOnly, len(run.acked)-21, resumed, len(run.acked))
}

// consumeAll subscribes before anything is sent and records every message.
func consumeAll(t *testing.T, client pulsar.Client, topic string, run *fullDiskRun) {
	t.Helper()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "all"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := cons.Receive(ctx)
			if err != nil {
				return
			}
			run.mu.Lock()
			run.received[string(m.Payload()[:6])] = true
			run.mu.Unlock()
			_ = cons.Ack(m)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cons.Close() })
}

func waitReceived(t *testing.T, run *fullDiskRun, when string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(run.missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m := run.missing(); len(m) > 0 {
		t.Fatalf("%s: %d acknowledged messages not received, e.g. %v", when, len(m), m[:min(5, len(m))])
	}
}
