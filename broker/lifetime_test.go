package broker

// Lifetimes (issue 17): a broker closed under load leaves nothing
// running: its loops, the goroutines its commands started, its
// connections' work.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

func TestBrokerCloseUnderLoadLeavesNothingRunning(t *testing.T) {
	before := goleak.IgnoreCurrent()
	store := metadata.NewMemoryServer().NewSession()
	b := New(Config{ClusterName: "test", Metadata: store, KeepAliveInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		// In-memory topics: the storage's own goroutines (an in-process
		// bookie) end at the test's cleanup, after this check.
		managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: 20}))
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "pulsar://" + srv.Addr().String()
	// The load comes from raw protocol clients, not the Go client: its own
	// goroutines race with each other when a broker closes connections
	// under them (pulsar-client-go v0.19), which the race detector would
	// report here as this test's failure.
	var wg sync.WaitGroup
	var conns []*rawClient
	for i := range 3 {
		topic := fmt.Sprintf("lifetime-%d", i)
		prod := dialRaw(t, url)
		prod.connect()
		if cmd := prod.openProducer(topic, 1, 1, pb.ProducerAccessMode_Shared); cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatalf("producer: %v", cmd)
		}
		cons, _ := rawConsumer(t, url, topic, pb.CommandSubscribe_Shared, 0)
		frames := make([][]byte, 2000)
		for j := range frames {
			frames[j] = sendFrame(t, 1, uint64(j))
		}
		conns = append(conns, prod, cons)
		wg.Add(3)
		go func() { // produce until the broker goes away
			defer wg.Done()
			for _, f := range frames {
				if _, err := prod.conn.Write(f); err != nil {
					return
				}
			}
		}()
		go func() { defer wg.Done(); drainFrames(prod) }()
		go func() { defer wg.Done(); consumeAndAck(cons) }()
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
	wg.Wait() // each load goroutine ends when its connection does
	for _, c := range append(conns, raw) {
		c.conn.Close()
	}
	store.Close()
	// goleak retries for about 2 s; on a loaded machine (make test runs
	// packages in parallel) goroutines ending with closed connections can
	// take longer, so keep asking for up to 20 s.
	var leak error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if leak = goleak.Find(before); leak == nil {
			return
		}
	}
	t.Fatal(leak)
}

// readFrame reads one frame from c, without a test to fail (load
// goroutines call it).
func readFrame(c net.Conn) (*pb.BaseCommand, error) {
	buf, err := nextFrame(c, 30*time.Second)
	if err != nil {
		return nil, err
	}
	var cmd pb.BaseCommand
	_, _, err = wire.ParseFrame(buf, len(buf), &cmd)
	return &cmd, err
}

// drainFrames reads (and drops) what the broker sends until the
// connection ends.
func drainFrames(r *rawClient) {
	for {
		if _, err := readFrame(r.conn); err != nil {
			return
		}
	}
}

// consumeAndAck acknowledges every message and asks for more until the
// connection ends.
func consumeAndAck(r *rawClient) {
	for {
		cmd, err := readFrame(r.conn)
		if err != nil {
			return
		}
		if cmd.GetType() != pb.BaseCommand_MESSAGE {
			continue
		}
		ack, _ := wire.AppendSimpleFrame(nil, &pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{
			ConsumerId: ptr(uint64(1)), AckType: pb.CommandAck_Individual.Enum(),
			MessageId: []*pb.MessageIdData{cmd.GetMessage().GetMessageId()}}})
		flow, _ := wire.AppendSimpleFrame(nil, &pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{
			ConsumerId: ptr(uint64(1)), MessagePermits: ptr(uint32(1))}})
		if _, err := r.conn.Write(append(ack, flow...)); err != nil {
			return
		}
	}
}
