package broker

// An unload and a reload of the same topic (issue 42): a client that
// reconnects while the unload still closes the topic must get a topic of
// its own over an open managed ledger, never the one being closed.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// gatedLedgers holds the first Close of a managed ledger at a gate, so a
// test can act while an unload is inside its close.
type gatedLedgers struct {
	inner   managedledger.Factory
	opens   chan string   // every Open's name
	closing chan struct{} // closed when the first Close arrives
	gate    chan struct{} // that Close goes on once this is closed
	once    sync.Once
}

func (g *gatedLedgers) Open(ctx context.Context, name string) (managedledger.ManagedLedger, error) {
	ml, err := g.inner.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	select {
	case g.opens <- name:
	default:
	}
	return &gatedLedger{ManagedLedger: ml, g: g}, nil
}

type gatedLedger struct {
	managedledger.ManagedLedger
	g *gatedLedgers
}

func (l *gatedLedger) Close(ctx context.Context) error {
	first := false
	l.g.once.Do(func() { first = true; close(l.g.closing) })
	if first {
		<-l.g.gate
	}
	return l.ManagedLedger.Close(ctx)
}

func TestReloadDuringUnloadGetsAnOpenLedger(t *testing.T) {
	g := &gatedLedgers{inner: managedledger.NewMemoryFactory(managedledger.MemoryOptions{}),
		opens: make(chan string, 8), closing: make(chan struct{}), gate: make(chan struct{})}
	store := metadata.NewMemoryServer().NewSession()
	b := New(Config{ClusterName: "test", Metadata: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, g)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	ctx := context.Background()
	name, err := ParseTopicName("persistent://public/default/reload")
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.getTopic(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	<-g.opens
	unloaded := make(chan struct{})
	go func() {
		b.unloadWhere(ctx, func(x *topic) bool { return x == first })
		close(unloaded)
	}()
	<-g.closing // the unload is inside the managed ledger's Close
	type loaded struct {
		t   *topic
		err error
	}
	reload := make(chan loaded, 1)
	go func() {
		t, err := b.getTopic(ctx, name)
		reload <- loaded{t, err}
	}()
	// The reload must not open the ledger while the unload closes it. It
	// gets a moment to do so (and shows the defect when it does); either
	// way the unload then goes on.
	select {
	case <-g.opens:
	case <-time.After(300 * time.Millisecond):
	}
	close(g.gate)
	<-unloaded
	got := <-reload
	if got.err != nil {
		t.Fatalf("reload during the unload: %v", got.err)
	}
	if got.t == first {
		t.Fatal("the reload got the topic being unloaded")
	}
	added := make(chan error, 1)
	got.t.ml.AddEntry([]byte("after"), func(_ managedledger.Position, err error) { added <- err })
	if err := <-added; err != nil {
		t.Fatalf("the reloaded topic's managed ledger: %v", err)
	}
}

// barrierLedgers makes every managed ledger's Close wait until n closes
// have begun (or 2 s, counted in waitedOut).
type barrierLedgers struct {
	inner     managedledger.Factory
	begun     sync.WaitGroup
	mu        sync.Mutex
	waitedOut int
}

func (f *barrierLedgers) Open(ctx context.Context, name string) (managedledger.ManagedLedger, error) {
	ml, err := f.inner.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &barrierLedger{ManagedLedger: ml, f: f}, nil
}

type barrierLedger struct {
	managedledger.ManagedLedger
	f    *barrierLedgers
	once sync.Once
}

func (l *barrierLedger) Close(ctx context.Context) error {
	l.once.Do(func() {
		l.f.begun.Done()
		all := make(chan struct{})
		go func() { l.f.begun.Wait(); close(all) }()
		select {
		case <-all:
		case <-time.After(2 * time.Second):
			l.f.mu.Lock()
			l.f.waitedOut++
			l.f.mu.Unlock()
		}
	})
	return l.ManagedLedger.Close(ctx)
}

// A bundle's topics close side by side: one after another, each closing
// its replicators and its managed ledger, a geo bundle of 8 topics took
// most of a second to hand over, its clients waiting all along (the
// fault suite's rolling-restart seed 8). Each close here waits until
// every close has begun, which one after another never happens.
func TestUnloadClosesTopicsTogether(t *testing.T) {
	const topics = 4
	f := &barrierLedgers{inner: managedledger.NewMemoryFactory(managedledger.MemoryOptions{})}
	f.begun.Add(topics)
	b := New(Config{ClusterName: "test", Metadata: metadata.NewMemoryServer().NewSession(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, f)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	ctx := context.Background()
	for i := range topics {
		if _, err := b.getTopic(ctx, mustTopic(t, fmt.Sprintf("persistent://public/default/together-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.unloadWhere(ctx, func(*topic) bool { return true }); n != topics {
		t.Fatalf("unloaded %d topics, want %d", n, topics)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waitedOut > 0 {
		t.Fatalf("%d of %d topic closes waited 2 s for the others to begin: topics were closed one at a time", f.waitedOut, topics)
	}
}
