package perfclient

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// maxLag is how far a paced producer may fall behind its schedule (say,
// blocked on a full pending queue) and still catch up by sending what is
// due at once; beyond it the missed sends are dropped from the schedule,
// so a long stall ends in a burst of at most this long's worth.
const maxLag = time.Second

// pacer spaces one producer's sends at a fixed rate. It sleeps only when
// ahead of its schedule and lets every send that is due go without
// sleeping, so rates far above the timer's resolution are reached in
// small bursts rather than lost to one sleep per message.
type pacer struct {
	// mu serialises a producer's senders (a transaction opened ahead is
	// sent to beside the one filling); held while waiting, so they take
	// turns at the rate.
	mu    sync.Mutex
	every time.Duration // 0: unthrottled
	next  time.Time
	timer *time.Timer
}

func newPacer(rate float64) *pacer {
	p := &pacer{}
	if rate > 0 {
		p.every = time.Duration(float64(time.Second) / rate)
	}
	return p
}

// spread sets the first send of producer i of n at i/n of the interval
// after start, so that n paced producers together send at an even rate,
// as pulsar-perf's one rate limiter over all its producers does. Started
// together, they would all send at once every interval: 10,000 topics at
// 1 msg/s each were 10,000 unbatched messages in one burst each second,
// not 10,000 msg/s.
func (p *pacer) spread(start time.Time, i, n int) {
	if p.every > 0 && n > 1 {
		p.next = start.Add(time.Duration(float64(p.every) * float64(i) / float64(n)))
	}
}

// wait returns when the next send is due: true, or false if stop closed
// first.
func (p *pacer) wait(stop <-chan struct{}) bool {
	if p.every <= 0 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.next.IsZero() || now.Sub(p.next) > maxLag {
		p.next = now
	}
	if d := p.next.Sub(now); d > 0 && !p.sleepLocked(d, stop) {
		return false
	}
	p.next = p.next.Add(p.every)
	return true
}

func (p *pacer) sleep(d time.Duration, stop <-chan struct{}) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sleepLocked(d, stop)
}

func (p *pacer) sleepLocked(d time.Duration, stop <-chan struct{}) bool {
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d) // since Go 1.23 Reset needs no drain
	}
	select {
	case <-p.timer.C:
		return true
	case <-stop:
		return false
	}
}

// newTemplate is the payload every message starts from: random but the
// same in every run, so that compression sees the same bytes each time.
func newTemplate(size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// createProducers opens cfg.Producers producers on each topic.
func (r *runner) createProducers(client pulsar.Client) ([]pulsar.Producer, error) {
	var out []pulsar.Producer
	for _, topic := range r.cfg.Topics {
		for range r.cfg.Producers {
			p, err := client.CreateProducer(r.producerOptions(topic))
			if err != nil {
				closeProducers(out)
				return nil, fmt.Errorf("create producer on %s: %w", topic, err)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func (r *runner) producerOptions(topic string) pulsar.ProducerOptions {
	c := r.cfg
	return pulsar.ProducerOptions{Topic: topic, DisableBatching: !c.Batching,
		BatchingMaxMessages: c.BatchMaxMessages, BatchingMaxSize: c.BatchMaxBytes,
		BatchingMaxPublishDelay: c.BatchDelay, MaxPendingMessages: c.MaxPending,
		CompressionType: c.Compression}
}

func closeProducers(ps []pulsar.Producer) {
	for _, p := range ps {
		p.Close()
	}
}

// produce runs every producer until the window closes or stop does, then
// waits for every message in flight to be acknowledged or to fail.
func (r *runner) produce(producers []pulsar.Producer, stop <-chan struct{}) {
	rate := r.cfg.Rate / float64(len(producers))
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range producers {
		pace := newPacer(rate)
		pace.spread(start, i, len(producers))
		wg.Go(func() { r.produceLoop(p, i, pace, stop) })
	}
	wg.Wait()
	r.draining.Store(true)
	for _, p := range producers {
		// Flush so that a long batch delay does not hold the last batch.
		if err := p.FlushWithCtx(context.Background()); err != nil {
			r.warnOnce("flush", err)
		}
	}
	r.inflight.Wait()
}

func (r *runner) produceLoop(p pulsar.Producer, client int, pace *pacer, stop <-chan struct{}) {
	if r.cfg.TxnSize > 0 {
		r.produceTxnLoop(p, client, pace, stop)
		return
	}
	for pace.wait(stop) && !closed(stop) && r.send(p, client) {
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
// producer. Every message counts as published, with its latency, when
// its commit returns. With TxnOpenAhead, transactions are opened (and
// their first message sent) ahead, while the current one fills.
func (r *runner) produceTxnLoop(p pulsar.Producer, client int, pace *pacer, stop <-chan struct{}) {
	commits := make(chan struct{}, r.maxCommits())
	var wg sync.WaitGroup
	defer wg.Wait()
	commit := func(o openedTxn) {
		commits <- struct{}{}
		r.inflight.Add(1)
		wg.Go(func() {
			defer func() { <-commits; r.inflight.Done() }()
			r.commit(o.tx, o.sends, client)
		})
	}
	next, finish := r.txnOpener(p, pace, stop)
	defer finish(commit)
	for {
		o, ok := next()
		if !ok {
			return
		}
		filling := time.Now()
		for o.more && len(o.sends) < r.cfg.TxnSize {
			if !pace.wait(stop) || closed(stop) {
				o.more = false
				break
			}
			s, ok := r.sendInTxn(p, o.tx)
			if !ok {
				o.more = false
				break
			}
			o.sends = append(o.sends, s)
		}
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

// openedTxn is a transaction opened with its first message sent.
type openedTxn struct {
	tx                 pulsar.Transaction
	sends              []txnSend
	more               bool // the run goes on: fill it
	newTook, firstTook time.Duration
}

// openTxn opens a transaction and sends its first message; false when
// the run stopped before a transaction could be opened.
func (r *runner) openTxn(p pulsar.Producer, pace *pacer, stop <-chan struct{}) (openedTxn, bool) {
	for !closed(stop) {
		began := time.Now()
		tx, err := r.client.NewTransaction(time.Minute)
		if err != nil {
			r.warnOnce("new transaction", err)
			if !pace.sleep(100*time.Millisecond, stop) {
				return openedTxn{}, false
			}
			continue
		}
		opened := time.Now()
		o := openedTxn{tx: tx, newTook: opened.Sub(began)}
		if pace.wait(stop) && !closed(stop) {
			s, ok := r.sendInTxn(p, tx)
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
// overlap each other and the filling of the one before. One producer then
// has several transactions in progress, as an application pipelining its
// work would; one at a time, its coordinator round trips bound its rate.
func (r *runner) txnOpener(p pulsar.Producer, pace *pacer, stop <-chan struct{}) (next func() (openedTxn, bool), finish func(commit func(openedTxn))) {
	if r.cfg.TxnOpenAhead <= 0 {
		return func() (openedTxn, bool) { return r.openTxn(p, pace, stop) }, func(func(openedTxn)) {}
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
				o, ok := r.openTxn(p, pace, stop)
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

// maxCommits bounds a producer's outstanding commits: its pending
// messages' worth of transactions, 1 to 64.
func (r *runner) maxCommits() int {
	return max(1, min(64, r.cfg.MaxPending/max(r.cfg.TxnSize, 1)))
}

// commit commits tx and counts its messages.
func (r *runner) commit(tx pulsar.Transaction, sends []txnSend, client int) {
	began := time.Now()
	err := tx.Commit(context.Background())
	done := time.Now()
	r.txn.commitNs.Add(int64(done.Sub(began)))
	for _, s := range sends {
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
// send); its outcome counts at the commit.
func (r *runner) sendInTxn(p pulsar.Producer, tx pulsar.Transaction) (txnSend, bool) {
	now := time.Now()
	sentAt := now.UnixNano()
	inWindow := sentAt >= r.windowStartNanos
	if inWindow && (r.pastWindow(now) || !r.sends.take()) {
		return txnSend{}, false
	}
	payload := make([]byte, len(r.template))
	copy(payload, r.template)
	binary.BigEndian.PutUint64(payload, uint64(sentAt))
	p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload, Transaction: tx},
		func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				r.warnOnce("publish in a transaction", err)
			}
		})
	return txnSend{sent: now, bytes: len(payload), inWindow: inWindow}, true
}

// send sends one message unless the window has closed. A message belongs
// to the window if it was sent at or after its start; the consumers judge
// by the same send time, carried in the payload.
func (r *runner) send(p pulsar.Producer, client int) bool {
	now := time.Now()
	sentAt := now.UnixNano()
	inWindow := sentAt >= r.windowStartNanos
	if inWindow && (r.pastWindow(now) || !r.sends.take()) {
		return false
	}
	payload := make([]byte, len(r.template)) // the client may hold it until the callback
	copy(payload, r.template)
	binary.BigEndian.PutUint64(payload, uint64(sentAt))
	r.inflight.Add(1)
	// The context only bounds the SendAsync call; a canceled run still
	// lets messages already handed over finish, so it is not passed.
	p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload},
		func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer r.inflight.Done()
			r.acked(client, now, len(payload), inWindow, err)
		})
	return true
}

func (r *runner) acked(client int, sent time.Time, bytes int, inWindow bool, err error) {
	done := time.Now()
	r.n.acked(bytes, inWindow, err, done.Sub(r.start))
	if err != nil {
		r.warnOnce("publish", err)
		return
	}
	r.pub.record(client, done.Sub(sent), inWindow)
}
