package perfclient

import (
	"context"
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

// createProducers opens cfg.Producers producers on each topic: one
// producer each, or in transaction mode a lane of them each (txn.go).
func (r *runner) createProducers(client pulsar.Client) ([][]pulsar.Producer, error) {
	perLane := 1
	if r.cfg.TxnSize > 0 {
		perLane = txnBatchedProducers(r.cfg)
	}
	var out [][]pulsar.Producer
	for _, topic := range r.cfg.Topics {
		for range r.cfg.Producers {
			lane := make([]pulsar.Producer, 0, perLane)
			for range perLane {
				opts := r.producerOptions(topic)
				if r.cfg.TxnSize > 0 { // a lane's batched producers (txn.go)
					opts.BatchingMaxPublishDelay = max(opts.BatchingMaxPublishDelay, txnBatchTimer)
				}
				p, err := client.CreateProducer(opts)
				if err != nil {
					closeProducers(append(out, lane))
					return nil, fmt.Errorf("create producer on %s: %w", topic, err)
				}
				lane = append(lane, p)
			}
			out = append(out, lane)
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

func closeProducers(lanes [][]pulsar.Producer) {
	for _, lane := range lanes {
		for _, p := range lane {
			p.Close()
		}
	}
}

// produce runs every producer until the window closes or stop does, then
// waits for every message in flight to be acknowledged or to fail.
func (r *runner) produce(lanes [][]pulsar.Producer, stop <-chan struct{}) {
	rate := r.cfg.Rate / float64(len(lanes))
	start := time.Now()
	var wg sync.WaitGroup
	for i, lane := range lanes {
		pace := newPacer(rate)
		pace.spread(start, i, len(lanes))
		wg.Go(func() { r.produceLoop(lane, i, pace, stop) })
	}
	wg.Wait()
	r.draining.Store(true)
	for _, lane := range lanes {
		for _, p := range lane {
			// Flush so that a long batch delay does not hold the last batch.
			if err := p.FlushWithCtx(context.Background()); err != nil {
				r.warnOnce("flush", err)
			}
		}
	}
	r.inflight.Wait()
}

func (r *runner) produceLoop(lane []pulsar.Producer, client int, pace *pacer, stop <-chan struct{}) {
	if r.cfg.TxnSize > 0 {
		r.produceTxnLoop(newTxnLane(lane), client, pace, stop)
		return
	}
	for pace.wait(stop) && !closed(stop) && r.send(lane[0], client) {
	}
}

// send sends one message unless the window has closed. A message belongs
// to the window if it was sent at or after its start; the consumers judge
// by the same send time, carried in the payload.
func (r *runner) send(p pulsar.Producer, client int) bool {
	now := time.Now()
	inWindow, ok := r.admit(now)
	if !ok {
		return false
	}
	m := r.outgoing.get(now)
	m.client, m.inWindow = client, inWindow
	r.inflight.Add(1)
	// The context only bounds the SendAsync call; a canceled run still
	// lets messages already handed over finish, so it is not passed.
	p.SendAsync(context.Background(), &m.msg, m.onReceipt)
	return true
}

// admit says whether a message sent now belongs to the window, and
// whether it may be sent at all: not once a timed window has ended or the
// window's NumMessages were sent.
func (r *runner) admit(now time.Time) (inWindow, ok bool) {
	inWindow = now.UnixNano() >= r.windowStartNanos
	if inWindow && (r.pastWindow(now) || !r.sends.take()) {
		return inWindow, false
	}
	return inWindow, true
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
