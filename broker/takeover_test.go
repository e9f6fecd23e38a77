package broker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// A topic whose managed ledger another owner opened (fencing this one)
// is unloaded at its first failed add, so the producer's resend loads it
// again and is stored, instead of failing for as long as the topic stays
// loaded. Found by the fault suite (tools/chaos, rolling-restart seed 1).
func TestTopicUnloadsWhenItsManagedLedgerIsTakenOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, tr := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	bk := ledgertest.StartBookie(t, engine.NewMem(), meta, tr, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(tr) })
	factory := func() managedledger.Factory {
		store := meta.NewSession()
		lc, err := ledger.New(ctx, ledger.Config{Store: store, Transport: tr, Logger: ledgertest.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lc.Close(); store.Close() })
		f, err := managedledger.NewBKFactory(managedledger.Config{Store: store, Ledgers: lc, MarkDeleteRate: 20, Logger: ledgertest.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, factory())
	client := newClient(t, serveTestBroker(t, b))
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "taken", DisableBatching: true, SendTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	name := mustTopicName(t, "taken")
	loaded := b.loadedTopic(name)
	// Another owner opens the managed ledger: it recovers and fences the
	// ledger this broker writes.
	other, err := factory().Open(ctx, name.ManagedLedgerName())
	if err != nil {
		t.Fatal(err)
	}
	_ = other.Close(ctx)
	sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
	defer scancel()
	if _, err := p.Send(sctx, &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatalf("a send after the takeover: %v (the topic stayed loaded over a closed managed ledger)", err)
	}
	if now := b.loadedTopic(name); now == loaded {
		t.Fatal("the topic whose managed ledger was taken over is still the one loaded")
	}
}
