package perfclient

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/broker"
)

// TestTxnSendsKeepTransactionsApart sends in two transactions through
// one lane, as a lane that opens transactions ahead does (both opened,
// their first messages sent, before either is filled), with a batch
// delay long enough that the first transaction's messages still wait in
// their batch while the second fills; one transaction is committed and
// the other aborted. Only the committed one's messages may reach a
// consumer. Through one Go client producer all of them went out in one
// batch tagged with the first message's transaction, so the aborted
// transaction's messages were delivered with the committed one.
func TestTxnSendsKeepTransactionsApart(t *testing.T) {
	_, r, cons, lanes := txnTestSetup(t, "persistent://public/default/perf-txn-apart", 3, 300*time.Millisecond)
	lane, pace, stop := newTxnLane(lanes[0]), newPacer(0), make(chan struct{})
	kept, ok1 := r.openHeld(lane, pace, stop)
	dropped, ok2 := r.openHeld(lane, pace, stop)
	if !ok1 || !ok2 || !kept.more || !dropped.more {
		t.Fatal("could not open two transactions and send their first messages")
	}
	r.fillTxn(&kept, pace, stop)
	r.fillTxn(&dropped, pace, stop)
	if len(kept.sends) != 3 || len(dropped.sends) != 3 {
		t.Fatalf("sent %d and %d messages, want 3 in each transaction", len(kept.sends), len(dropped.sends))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Each ended as the fill loop ends a transaction (commitTxn): its
	// producer flushed first, since the lane's batch timer (the
	// transaction timeout) would not send the batch in time.
	aborted := make(chan error, 1)
	go func() {
		if err := dropped.h.p.FlushWithCtx(ctx); err != nil {
			aborted <- err
			return
		}
		aborted <- dropped.tx.Abort(ctx)
	}()
	if err := kept.h.p.FlushWithCtx(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := kept.tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := <-aborted; err != nil {
		t.Fatalf("abort: %v", err)
	}
	var got []pulsar.MessageID
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := cons.Receive(rctx)
		rcancel()
		if err != nil {
			break
		}
		got = append(got, m.ID())
		_ = cons.Ack(m)
	}
	if len(got) != 3 {
		t.Fatalf("received %d messages %v, want the committed transaction's 3 only", len(got), got)
	}
	// Each transaction held a producer of its own from its first message
	// on, so the committed one is one batch: one entry, not its first
	// message alone and the rest in another.
	for _, id := range got {
		if id.LedgerID() != got[0].LedgerID() || id.EntryID() != got[0].EntryID() {
			t.Fatalf("received %v: want the committed transaction's messages in one entry", got)
		}
	}
}

// TestTxnMessagesGoAsOneBatch fills a transaction slowly (20 messages
// over about 20 ms, many batch-timer periods of 1 ms) and commits it
// the way the fill loop does: its messages must reach the broker as one
// batch, one entry, not one per timer tick. On the 1 ms timer alone the
// transaction was stored as about ten entries (a 100-message transaction
// of the benchmark as 1.7 on average), and every entry costs the broker
// and the client more than its messages do.
func TestTxnMessagesGoAsOneBatch(t *testing.T) {
	if entries := oneTxnEntries(t, "persistent://public/default/perf-txn-one-batch", 20, 0); len(entries) != 1 {
		t.Fatalf("the transaction's 20 messages were stored as %d entries %v, want one batch", len(entries), entries)
	}
}

// A transaction opened ahead waits, its first message in its producer's
// batch, until the fill loop takes it: however long that is, the
// producer's own timer must not send that message alone (at 32 opened
// ahead, an eighth of the benchmark's transactions were two entries when
// the timer was 1 s).
func TestTxnOpenedAheadWaitsAsOneBatch(t *testing.T) {
	if entries := oneTxnEntries(t, "persistent://public/default/perf-txn-waits", 5, 1500*time.Millisecond); len(entries) != 1 {
		t.Fatalf("a transaction that waited 1.5 s to be filled was stored as %d entries %v, want one batch", len(entries), entries)
	}
}

// oneTxnEntries opens a transaction of size messages on topic (batch
// timer 1 ms), waits wait before filling it (as one opened ahead waits for
// the fill loop), fills and commits it as the fill loop does, and returns
// how many of its messages each entry holds.
func oneTxnEntries(t *testing.T, topic string, size int, wait time.Duration) map[[2]int64]int {
	t.Helper()
	cfg, r, cons, lanes := txnTestSetup(t, topic, size, time.Millisecond)
	lane, pace, stop := newTxnLane(lanes[0]), newPacer(1000), make(chan struct{})
	o, ok := r.openHeld(lane, pace, stop)
	if !ok || !o.more {
		t.Fatal("could not open a transaction and send its first message")
	}
	time.Sleep(wait)
	r.fillTxn(&o, pace, stop)
	if len(o.sends) != cfg.TxnSize {
		t.Fatalf("sent %d messages, want %d", len(o.sends), cfg.TxnSize)
	}
	r.commitTxn(o, 0)
	if n := r.n.pubErrsAll.Load(); n != 0 {
		t.Fatalf("%d messages failed with the commit", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entries := map[[2]int64]int{}
	for range cfg.TxnSize {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive: %v (entries so far %v)", err, entries)
		}
		entries[[2]int64{m.ID().LedgerID(), m.ID().EntryID()}]++
	}
	return entries
}

// txnTestSetup starts a broker with transactions, and a runner in
// transaction mode (txnSize messages per transaction, batch delay delay)
// on topic with its lanes of producers, and a consumer subscribed to the
// topic; all closed when the test ends.
func txnTestSetup(t *testing.T, topic string, txnSize int, delay time.Duration) (Config, *runner, pulsar.Consumer, [][]pulsar.Producer) {
	t.Helper()
	url, _ := startBrokerWith(t, broker.Config{TransactionCoordinatorEnabled: true})
	cfg := testConfig(ModeProduce, url, topic)
	cfg.TxnSize, cfg.BatchDelay = txnSize, delay
	r := newRunner(cfg)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, EnableTransaction: true, Logger: clientLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	r.client = client
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "check"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	lanes, err := r.createProducers(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeProducers(lanes) })
	return cfg, r, cons, lanes
}

// slowFlush is a producer whose flush takes flushTook; commitNothing a
// transaction whose commit returns at once.
type slowFlush struct {
	pulsar.Producer
	flushTook time.Duration
}

func (p slowFlush) FlushWithCtx(context.Context) error { time.Sleep(p.flushTook); return nil }

type commitNothing struct{ pulsar.Transaction }

func (commitNothing) Commit(context.Context) error { return nil }

// TestTxnCommitPhaseCountsTheFlush: a transaction's commit phase (the
// report's "commit" column) runs from the end of its filling to the
// commit's answer, so it covers the wait for its batch's receipts, as when
// the client's Commit itself waited for them. With the flush that sends
// the batch put before the commit, the phase had started after it: the
// commits in the report looked 40% shorter for no faster commit.
func TestTxnCommitPhaseCountsTheFlush(t *testing.T) {
	r := newRunner(testConfig(ModeProduce, "pulsar://unused", "persistent://public/default/unused"))
	lane := &txnLane{free: make(chan pulsar.Producer, 1)}
	o := openedTxn{tx: commitNothing{}, h: lane.hold(slowFlush{flushTook: 50 * time.Millisecond})}
	r.commitTxn(o, 0)
	if got := time.Duration(r.txn.commitNs.Load()); got < 50*time.Millisecond {
		t.Fatalf("commit phase %v, want at least the 50 ms flush", got)
	}
}
