package broker

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// conflictingStore answers the next Put under a path containing match
// with a version conflict, as if another owner had written the node.
type conflictingStore struct {
	metadata.Store
	match string
	armed atomic.Bool
}

func (s *conflictingStore) Put(ctx context.Context, path string, value []byte, version int64) (metadata.Stat, error) {
	if strings.Contains(path, s.match) && s.armed.CompareAndSwap(true, false) {
		return metadata.Stat{}, metadata.ErrBadVersion
	}
	return s.Store.Put(ctx, path, value, version)
}

// A topic whose managed ledger is fenced while saving an acknowledgement
// in a transaction unloads, so it loads afresh and the next transaction
// works; it stayed loaded with the fenced managed ledger and failed every
// later transaction (the fault suite's txn-pipeline seed 1 of 5 Dec).
func TestTxnAckOnAFencedTopicUnloadsIt(t *testing.T) {
	meta, tr := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	bk := ledgertest.StartBookie(t, engine.NewMem(), meta, tr, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(tr) })
	lc, store := ledgertest.Client(t, meta, tr)
	const topic = "persistent://t/ns/txn-fenced"
	cs := &conflictingStore{Store: store, match: "/t/ns/persistent/txn-fenced"}
	f, err := managedledger.NewBKFactory(managedledger.Config{Store: cs, Ledgers: lc, MarkDeleteRate: 20, Logger: ledgertest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	_, url := startTxnBroker(t, f)
	c := newTxnClient(t, url)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, c, topic, 1, false)
	ackIn := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			return err
		}
		tx := newTxn(t, c, time.Minute)
		if err := cons.AckWithTxn(m, tx); err != nil {
			_ = tx.Abort(context.Background())
			cons.Nack(m)
			return err
		}
		return tx.Commit(context.Background())
	}
	cs.armed.Store(true)
	began := time.Now()
	first := ackIn()
	if first == nil {
		t.Fatal("the acknowledgement whose save was refused succeeded")
	}
	deadline := time.Now().Add(20 * time.Second)
	var errs []string // each retry's outcome, for a failure's message
	for {
		err := ackIn()
		if err == nil {
			break
		}
		errs = append(errs, fmt.Sprintf("%.1fs: %v", time.Since(began).Seconds(), err))
		if time.Now().After(deadline) {
			// Seen once in CI (6 Dec), not reproduced: say whether the
			// refused save was the first try's and what each retry met.
			t.Fatalf("transactions on the topic still fail 20 s after its managed ledger was fenced: first try %v "+
				"(conflict still armed: %v); retries: %s", first, cs.armed.Load(), strings.Join(errs, "; "))
		}
	}
}
