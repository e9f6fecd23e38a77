package broker

// Lifetimes (issue 17): a broker closed under load leaves nothing
// running: its loops, the goroutines its commands started, its
// connections' work.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/goleak"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/pb"
)

func TestBrokerCloseUnderLoadLeavesNothingRunning(t *testing.T) {
	before := goleak.IgnoreCurrent()
	store := metadata.NewMemoryServer().NewSession()
	b := New(Config{ClusterName: "test", Metadata: store, KeepAliveInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		// In-memory topics: the storage's own goroutines (an in-process
		// bookie) end at the test's cleanup, after this check.
		managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: 20}))
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "pulsar://" + srv.Addr().String()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 3 {
		topic := fmt.Sprintf("lifetime-%d", i)
		cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
		if err != nil {
			t.Fatal(err)
		}
		prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { // produce until the broker goes away
			defer wg.Done()
			for j := 0; j < 10000; j++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")})
				cancel()
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				m, err := cons.Receive(ctx)
				cancel()
				if err != nil {
					return
				}
				_ = cons.Ack(m)
			}
		}()
	}
	// Commands that start goroutines, in flight when the broker closes.
	raw := dialRaw(t, url)
	raw.connect()
	for i := range 50 {
		raw.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
			Topic: ptr(fmt.Sprintf("lookup-%d", i)), RequestId: ptr(uint64(i))}})
	}
	time.Sleep(300 * time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Close(ctx)
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	client.Close()
	wg.Wait()
	raw.conn.Close()
	store.Close()
	// The Go client leaves a timer goroutine per producer whose broker went
	// away (its own leak, not the broker's).
	// goleak retries for about 2 s; on a loaded machine (make test runs
	// packages in parallel) the client's goroutines can take longer to
	// notice their connections closed, so keep asking for up to 20 s.
	opts := []goleak.Option{before,
		goleak.IgnoreAnyFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages")}
	var leak error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if leak = goleak.Find(opts...); leak == nil {
			return
		}
	}
	t.Fatal(leak)
}
