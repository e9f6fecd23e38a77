package broker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/managedledger"
)

// TestLargeMessagesUnderBackPressureKeepTheConnection: a producer of
// large messages whose window (here 200 × 256 KiB = 50 MiB) stays within
// a Pulsar client's default memory limit keeps its connection while the
// broker pauses reading it for back-pressure. The network layer cannot
// stop reading the socket, so the broker must allow what such a client
// has in flight; an earlier bound of 2 frames + 1 MiB closed it as
// "client ignored back-pressure".
func TestLargeMessagesUnderBackPressureKeepTheConnection(t *testing.T) {
	var logs lockedBuffer
	b := New(Config{ClusterName: "test", MaxPendingPublishRequestsPerConnection: 4,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, slowAdds{managedledger.NewMemoryFactory(managedledger.MemoryOptions{})})
	c := newClient(t, serveTestBroker(t, b))
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "large", DisableBatching: true, MaxPendingMessages: 200})
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 256<<10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for range 300 {
		wg.Add(1)
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d sends failed, first: %v", len(failed), failed[0])
	}
	if out := logs.String(); strings.Contains(out, "ignored back-pressure") {
		t.Fatalf("the broker disconnected a well-behaved producer:\n%s", out)
	}
}

// slowAdds delays every add's acknowledgement by a millisecond, in order,
// off the caller's goroutine: storage slower than the network, so SENDs
// pile up and the connection is paused.
type slowAdds struct{ managedledger.Factory }

func (f slowAdds) Open(ctx context.Context, name string) (managedledger.ManagedLedger, error) {
	ml, err := f.Factory.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	s := &slowML{ManagedLedger: ml, acks: make(chan func(), 1<<16)}
	go s.run()
	return s, nil
}

type slowML struct {
	managedledger.ManagedLedger
	acks chan func()
}

func (s *slowML) AddEntry(data []byte, cb func(managedledger.Position, error)) {
	s.ManagedLedger.AddEntry(data, func(pos managedledger.Position, err error) {
		s.acks <- func() { cb(pos, err) }
	})
}

func (s *slowML) run() {
	for ack := range s.acks {
		time.Sleep(time.Millisecond)
		ack()
	}
}

// lockedBuffer is a bytes.Buffer safe for the broker's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
