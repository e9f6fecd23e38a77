package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// ackTimeout is the client's limit on one PubAck: past it the publish
// completes with an error, which the report counts. drainTimeout bounds
// the wait for the last PubAcks after the window; longer than ackTimeout,
// so the client gives up first and the run reports its errors.
const (
	ackTimeout   = 30 * time.Second
	drainTimeout = ackTimeout + 15*time.Second
)

// producer publishes on its own connection with at most cap(free)
// publishes awaiting their PubAck.
//
// Window: a publish takes a payload buffer from free and its PubAck (or
// error) callback puts it back, so an empty free channel is a full window
// and the producer waits. The client keeps the buffer (to retry a publish
// nobody answered) until that callback, so it is never reused early.
type producer struct {
	id       int
	ph       *perfkit.Phase
	nc       *nats.Conn
	js       jetstream.JetStream
	free     chan []byte   // buffers not in flight; nil entries are allocated on first use
	interval time.Duration // between sends; 0 = as fast as the window allows
	size     int
	tally    *perfkit.Tally // measured publish latencies

	errs     atomic.Int64 // measured messages that failed
	ackedAll atomic.Int64 // every acknowledgement, for the timeline and the e2e drain
	errOnce  sync.Once
	firstErr error         // set once in a callback; read after drain
	closing  atomic.Bool   // close was called: the connection closing is expected
	gone     chan struct{} // closed when the connection closed
}

func newProducer(id int, ph *perfkit.Phase, url string, cfg Config) (*producer, error) {
	p := &producer{id: id, ph: ph, free: make(chan []byte, cfg.MaxPending),
		interval: cfg.interval(), size: cfg.Size, tally: perfkit.NewTally(), gone: make(chan struct{})}
	for range cfg.MaxPending {
		p.free <- nil
	}
	nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("natsperf-producer-%d", id)),
		nats.NoReconnect(), nats.ClosedHandler(p.onClosed))
	if err != nil {
		return nil, fmt.Errorf("producer %d: connecting to %s: %w", id, url, err)
	}
	p.nc = nc
	p.js, err = jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(ackTimeout),
		jetstream.WithPublishAsyncAckHandler(p.onAck),
		jetstream.WithPublishAsyncErrHandler(p.onErr))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("producer %d: jetstream context: %w", id, err)
	}
	return p, nil
}

// run publishes until the phase stops, then waits for every PubAck.
func (p *producer) run() {
	next := time.Now()
	for {
		buf, ok := p.take()
		if !ok {
			break
		}
		if p.interval > 0 {
			next = next.Add(p.interval)
			if !p.pace(next) {
				p.free <- buf
				break
			}
		}
		if buf == nil {
			buf = newPayload(p.size)
		}
		stamp(buf, time.Now(), p.ph.Measuring.Load())
		if _, err := p.js.PublishAsync(subject, buf); err != nil {
			p.free <- buf
			p.ph.Fail(fmt.Errorf("producer %d: publish: %w", p.id, err))
			break
		}
	}
	p.drain()
}

// take waits for room in the window; false once the phase stops.
func (p *producer) take() ([]byte, bool) {
	select {
	case <-p.ph.Done():
		return nil, false
	default:
	}
	select {
	case buf := <-p.free:
		return buf, true
	case <-p.ph.Done():
		return nil, false
	}
}

// pace waits until the next scheduled send; a producer behind schedule
// sends at once, so it catches up rather than lowering the rate.
func (p *producer) pace(next time.Time) bool {
	if d := time.Until(next); d > 0 {
		p.ph.Sleep(d)
	}
	return !p.ph.Stopped()
}

// drain waits until every buffer is back: every publish completed. A
// closed connection completes nothing more (onClosed failed the run).
func (p *producer) drain() {
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	for range cap(p.free) {
		select {
		case <-p.free:
		case <-p.gone:
			return
		case <-timer.C:
			p.ph.Fail(fmt.Errorf("producer %d: publishes still awaiting a PubAck %s after the window", p.id, drainTimeout))
			return
		}
	}
}

// onAck runs on the connection's reply goroutine, in PubAck order; it
// must not block (the client says so), and sending to free never does:
// there is one slot per buffer.
func (p *producer) onAck(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
	defer func() { p.free <- m.Data }()
	sent, measured, ok := readStamp(m.Data)
	if !ok {
		return
	}
	if measured {
		p.tally.Record(time.Since(sent))
	}
	p.ackedAll.Add(1)
	p.ph.Completed(p.size)
}

// onErr counts a publish that failed (timeout, no stream, disconnect); the
// run goes on, the report shows the count.
func (p *producer) onErr(_ jetstream.JetStream, m *nats.Msg, err error) {
	defer func() { p.free <- m.Data }()
	p.errOnce.Do(func() { p.firstErr = err })
	if _, measured, ok := readStamp(m.Data); ok && measured {
		p.errs.Add(1)
	}
}

// onClosed fails the run when the connection drops under it (the server
// died): the publishes in flight would otherwise only time out.
func (p *producer) onClosed(*nats.Conn) {
	close(p.gone) // the client calls this handler once
	if !p.closing.Load() {
		p.ph.Fail(fmt.Errorf("producer %d: connection closed during the run", p.id))
	}
}

func (p *producer) close() {
	p.closing.Store(true)
	p.nc.Close()
}
