package perfclient

// Transaction mode: publishing in transactions of cfg.TxnSize messages.
//
// A batch carries one transaction id, its first message's, and the Go
// client's batcher puts whatever is sent next into the open batch
// (pulsar-client-go v0.19.0; the Java client starts a new batch when the
// transaction changes, Pulsar #8415). A message sent in transaction B
// while A's messages wait in the producer's batch is stored as A's,
// committed or aborted with A. So one producer must never hold two
// transactions' messages at once, and each of cfg.Producers is a lane of
// batched producers: a transaction takes one that no other transaction's
// unreceipted messages are in before it sends its first message, sends
// all its messages there, and gives it back once they are all receipted
// (its batch then holds none of them). The first send is the one that
// waits for the coordinator to add the partition; with TxnOpenAhead the
// transactions opened ahead make it early, each holding its producer
// until it is filled, so a lane has a producer for each of them besides
// txnFillProducers. Every transaction is then one batch, one entry.
// (Until 7 Dec the transactions opened ahead sent their first message
// alone through an unbatched producer: two entries per transaction, and
// 9-18% less throughput at 32 ahead, TUNING.md.) The Go client's
// key-based batcher would also keep transactions apart, with a
// transaction's id as ordering key, but it grows a fresh buffer per key
// and batch: measured, 12% more client CPU per message and 15-20% less
// throughput here.
//
// A transaction's batch is sent when the transaction is filled
// (commitTxn flushes its producer before committing); the batched
// producers' own timer is txnBatchTimer, so the run's batch delay does not
// cut a transaction into several batches while it fills.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// txnFillProducers is how many batched producers a lane has besides one
// per transaction opened ahead: enough that a transaction rarely waits
// for an earlier one's receipts before it can fill, few enough that their
// batch timers cost little.
const txnFillProducers = 4

// txnBatchedProducers is how many batched producers a lane has:
// txnFillProducers, and one more for each transaction opened ahead,
// which holds a producer of its own from its first message on.
func txnBatchedProducers(c Config) int { return txnFillProducers + max(c.TxnOpenAhead, 0) }

// txnTimeout is the timeout of every transaction the run opens.
const txnTimeout = time.Minute

// txnBatchTimer is the batch timer of a lane's batched producers:
// commitTxn sends a transaction's batch when it is filled, so the timer
// only sends what a flush missed. At the run's --batch-delay it would cut
// each transaction into several batches; at 1 s it still sent the first
// message alone of the transactions it found waiting to be filled (opened
// ahead: an eighth of them at 32 ahead, 7 Dec). No transaction outlives
// its timeout, so at that the timer cuts none.
const txnBatchTimer = txnTimeout

// txnLane is one producer slot's producers in transaction mode.
type txnLane struct {
	free chan pulsar.Producer // batched producers holding no unreceipted message
}

// newTxnLane makes a lane of producers (batched, createProducers).
func newTxnLane(producers []pulsar.Producer) *txnLane {
	l := &txnLane{free: make(chan pulsar.Producer, len(producers))}
	for _, p := range producers {
		l.free <- p
	}
	return l
}

// take returns a batched producer no other transaction's unreceipted
// messages are in; false if stop closed first.
func (l *txnLane) take(stop <-chan struct{}) (pulsar.Producer, bool) {
	select {
	case p := <-l.free:
		return p, true
	case <-stop:
		return nil, false
	}
}

// holder gives a taken producer back once the transaction has stopped
// sending through it (release) and every message it sent there has its
// receipt or failed (received, once per message).
type holder struct {
	lane    *txnLane
	p       pulsar.Producer
	pending atomic.Int64 // messages without receipt, +1 while filling
}

func (l *txnLane) hold(p pulsar.Producer) *holder {
	h := &holder{lane: l, p: p}
	h.pending.Store(1)
	return h
}

func (h *holder) sending()  { h.pending.Add(1) }
func (h *holder) received() { h.done() }
func (h *holder) release()  { h.done() }

func (h *holder) done() {
	if h.pending.Add(-1) == 0 {
		h.lane.free <- h.p // never blocks: the channel has room for every producer
	}
}

// txnSend is a message sent in the open transaction, recorded at its
// commit.
type txnSend struct {
	sent     time.Time
	bytes    int
	inWindow bool
}

// produceTxnLoop publishes in transactions of cfg.TxnSize messages. As
// pulsar-perf, a transaction is committed in the background once its
// messages are sent (the client's Commit waits for their receipts) while
// the next one fills; at most maxCommits commits are outstanding per
// lane. Every message counts as published, with its latency, when its
// commit returns. With TxnOpenAhead, transactions are opened (and their
// first message sent) ahead, while the current one fills.
func (r *runner) produceTxnLoop(l *txnLane, client int, pace *pacer, stop <-chan struct{}) {
	commits := make(chan struct{}, r.maxCommits())
	var wg sync.WaitGroup
	defer wg.Wait()
	commit := func(o openedTxn) {
		commits <- struct{}{}
		r.inflight.Add(1)
		wg.Go(func() {
			defer func() { <-commits; r.inflight.Done() }()
			r.commitTxn(o, client)
		})
	}
	next, finish := r.txnOpener(l, pace, stop)
	defer finish(commit)
	for {
		o, ok := next()
		if !ok {
			return
		}
		filling := time.Now()
		r.fillTxn(&o, pace, stop)
		r.txn.n.Add(1)
		r.txn.newNs.Add(int64(o.newTook))
		r.txn.firstNs.Add(int64(o.firstTook))
		r.txn.restNs.Add(int64(time.Since(filling)))
		commit(o)
		if !o.more {
			return
		}
	}
}

// fillTxn sends o's messages after its first, up to cfg.TxnSize, through
// the producer o holds, then lets go of it; o.more turns false when the
// run stops.
func (r *runner) fillTxn(o *openedTxn, pace *pacer, stop <-chan struct{}) {
	defer o.h.release()
	for o.more && len(o.sends) < r.cfg.TxnSize {
		if !pace.wait(stop) || closed(stop) {
			o.more = false
			return
		}
		s, ok := r.sendInTxn(o.tx, o.h)
		if !ok {
			o.more = false
			return
		}
		o.sends = append(o.sends, s)
	}
}

// openedTxn is a transaction opened with its first message sent.
type openedTxn struct {
	tx                 pulsar.Transaction
	h                  *holder // the batched producer it holds
	sends              []txnSend
	more               bool // the run goes on: fill it
	newTook, firstTook time.Duration
}

// openTxn opens a transaction and sends its first message through the
// producer h holds; false when the run stopped before a transaction
// could be opened.
func (r *runner) openTxn(h *holder, pace *pacer, stop <-chan struct{}) (openedTxn, bool) {
	for !closed(stop) {
		began := time.Now()
		tx, err := r.client.NewTransaction(txnTimeout)
		if err != nil {
			r.warnOnce("new transaction", err)
			if !pace.sleep(100*time.Millisecond, stop) {
				return openedTxn{}, false
			}
			continue
		}
		opened := time.Now()
		o := openedTxn{tx: tx, h: h, newTook: opened.Sub(began)}
		if pace.wait(stop) && !closed(stop) {
			s, ok := r.sendInTxn(tx, h)
			o.more = ok
			if ok {
				o.sends = append(o.sends, s)
			}
		}
		o.firstTook = time.Since(opened)
		return o, true
	}
	return openedTxn{}, false
}

// txnOpener returns where the fill loop takes its next transaction, and
// finish, which commits what was opened and not taken. Without
// TxnOpenAhead next opens one then and there; with it that many
// goroutines keep transactions opened ahead, so the round trips of a
// transaction's opening (and of its first send: the Go client adds the
// partition to the transaction there and waits for the coordinator's log)
// overlap each other and the filling of the one before. One lane then
// has several transactions in progress, as an application pipelining its
// work would; one at a time, its coordinator round trips bound its rate.
func (r *runner) txnOpener(l *txnLane, pace *pacer, stop <-chan struct{}) (next func() (openedTxn, bool), finish func(commit func(openedTxn))) {
	if r.cfg.TxnOpenAhead <= 0 {
		return func() (openedTxn, bool) { return r.openHeld(l, pace, stop) }, func(func(openedTxn)) {}
	}
	ahead, done := make(chan openedTxn), make(chan struct{})
	var openers sync.WaitGroup
	for range r.cfg.TxnOpenAhead {
		openers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				o, ok := r.openHeld(l, pace, stop)
				if !ok {
					return
				}
				ahead <- o // the fill loop, or finish, takes it
				if !o.more {
					return
				}
			}
		})
	}
	go func() { openers.Wait(); close(ahead) }()
	next = func() (openedTxn, bool) { o, ok := <-ahead; return o, ok }
	finish = func(commit func(openedTxn)) {
		close(done)
		for o := range ahead {
			commit(o)
		}
	}
	return next, finish
}

// openHeld opens a transaction whose messages, the first too, go through
// one batched producer it takes from l and holds until it is filled.
func (r *runner) openHeld(l *txnLane, pace *pacer, stop <-chan struct{}) (openedTxn, bool) {
	p, ok := l.take(stop)
	if !ok {
		return openedTxn{}, false
	}
	h := l.hold(p)
	o, ok := r.openTxn(h, pace, stop)
	if !ok {
		h.release()
	}
	return o, ok
}

// maxCommits bounds a lane's outstanding commits: its pending messages'
// worth of transactions, 1 to 64.
func (r *runner) maxCommits() int {
	return max(1, min(64, r.cfg.MaxPending/max(r.cfg.TxnSize, 1)))
}

// commitTxn sends o's batch, then commits o, and counts its messages.
// The lane's batched producers wait txnBatchTimer before sending a batch
// on their own, so a transaction's messages go as one batch when it is
// filled rather than as many as batch-timer ticks passed while it filled
// (a 100-message transaction made 1.7 entries on the 1 ms timer, and an
// entry costs the broker and the client more than its messages do). The
// commit phase includes the flush: the client's Commit waits for the
// receipts anyway, and Flush only stops it waiting for a timer.
func (r *runner) commitTxn(o openedTxn, client int) {
	began := time.Now()
	if o.h != nil {
		// A failed flush fails the messages' sends, and so the commit,
		// which reports it.
		_ = o.h.p.FlushWithCtx(context.Background())
	}
	err := o.tx.Commit(context.Background())
	done := time.Now()
	r.txn.commitNs.Add(int64(done.Sub(began)))
	for _, s := range o.sends {
		r.n.acked(s.bytes, s.inWindow, err, done.Sub(r.start))
		if err == nil {
			r.pub.record(client, done.Sub(s.sent), s.inWindow)
		}
	}
	if err != nil {
		r.warnOnce("commit", err)
	}
}

// sendInTxn sends one message in tx unless the window has closed (as
// send), through the producer h holds for tx; its outcome counts at the
// commit, and h is told of the receipt.
func (r *runner) sendInTxn(tx pulsar.Transaction, h *holder) (txnSend, bool) {
	now := time.Now()
	inWindow, ok := r.admit(now)
	if !ok {
		return txnSend{}, false
	}
	m := r.outgoing.get(now)
	m.holder, m.msg.Transaction = h, tx
	h.sending()
	bytes := len(m.payload)
	h.p.SendAsync(context.Background(), &m.msg, m.onReceipt)
	return txnSend{sent: now, bytes: bytes, inWindow: inWindow}, true
}
