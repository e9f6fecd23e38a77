package netio

import (
	"fmt"
	"time"

	"github.com/panjf2000/gnet/v2"
)

const (
	// maxIovecs bounds one writev: Linux's IOV_MAX. gnet hands the list
	// to writev(2) as it is (pkg/io/io_linux.go:23-28).
	maxIovecs = 1024
	// Drain polling while congested (gnet has no writable callback).
	drainPollMin = time.Millisecond
	drainPollMax = 16 * time.Millisecond
)

// writeQueue holds writes accepted and not yet handed to gnet.
type writeQueue struct {
	bufs  [][]byte
	dones []func(error)
	n     int64
}

func (q *writeQueue) empty() bool { return len(q.bufs) == 0 && len(q.dones) == 0 }

// reset drops the references and keeps the capacity.
func (q *writeQueue) reset() {
	clear(q.bufs)
	clear(q.dones)
	q.bufs, q.dones, q.n = q.bufs[:0], q.dones[:0], 0
}

// Write queues bufs to be written as one contiguous run: no other write's
// bytes come between them, and writes reach the socket in the order their
// Write calls took effect. It takes ownership of bufs, the slice and the byte
// slices in it, until they are written; use WriteThen to learn when that is.
// Write never blocks and never drops: check Congested to stop sending to a
// slow client. It fails only when the connection is closed
// (ErrConnClosed), and then takes nothing.
func (c *Conn) Write(bufs ...[]byte) error { return c.WriteThen(nil, bufs...) }

// WriteThen is Write with a completion callback. When WriteThen returns nil,
// done (if not nil) is called exactly once, on the event loop: with nil once
// the bytes are in the socket or copied into gnet's outbound buffer (bufs
// may be reused then), or with the reason they were not (ErrConnClosed, a
// socket error). It must not block. When WriteThen returns an error, done is
// not called and bufs stay the caller's.
func (c *Conn) WriteThen(done func(error), bufs ...[]byte) error {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrConnClosed
	}
	q := &c.queue
	q.bufs = append(q.bufs, bufs...)
	if done != nil {
		q.dones = append(q.dones, done)
	}
	q.n += n
	c.queued.Add(n)
	kick := !c.flushPending
	if kick {
		c.flushPending = true
		c.kicks.Add(1) // under mu and open: OnClose waits for it
	}
	if !c.congestion.on && c.Pending() > c.srv.opts.WriteBufferHighWater {
		c.updateCongestionLocked()
	}
	c.mu.Unlock()
	if kick {
		c.kick()
	}
	return nil
}

// Pending is the number of bytes accepted by Write and not yet written to
// the socket. The part in gnet's outbound buffer is as last seen on the
// loop, so it may lag behind.
func (c *Conn) Pending() int { return int(c.queued.Load() + c.outbound.Load()) }

// Congested reports whether Pending went above WriteBufferHighWater and has
// not yet fallen to half of it.
func (c *Conn) Congested() bool { return c.congested.Load() }

// Drained returns a channel closed once the connection is not congested
// (already closed if it is not now), or has closed.
func (c *Conn) Drained() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.congestion.on {
		return c.congestion.drained
	}
	return c.srv.closedCh
}

// kick is queueLoopTask for a writer that registered the kick in c.kicks
// under mu while the connection was open, and makes it after releasing mu.
// The kick wakes the loop (an eventfd write, and a context switch to the
// loop's thread that may preempt the writer): under mu, the writers of the
// other ledgers' receipts on this connection, and the loop's own flush,
// queued behind it. At 10,000 topics that lock was the broker's most
// contended (2 s of waiting in 8 s; TUNING.md). OnClose waits for the
// registered kicks before it returns, so none reaches a loop that exited.
func (c *Conn) kick() {
	defer c.kicks.Done()
	if h := c.srv.beforeKick; h != nil {
		h()
	}
	c.queueLoopTask()
}

// queueLoopTask asks the loop to run loopTask. An AsyncWritev of no buffers
// is gnet's one high-priority way to run code on a connection's loop: the
// write itself does nothing (pkg/io/io_linux.go:24-26 returns before any
// system call) and the callback runs on the loop (connection_unix.go:273-287).
// Called with c.mu held and c open, or from kick: either keeps tasks from
// being queued on a loop that has exited (see the package doc).
func (c *Conn) queueLoopTask() {
	if err := c.gc.AsyncWritev(nil, c.loopTaskCB); err != nil {
		c.srv.log.Warn("netio: queue loop task", "remote", c.remote, "err", err)
	}
}

// loopTask runs on the loop after a kick: it flushes the queue and looks at
// the outbound buffer (for the drain poll). err is net.ErrClosed when the
// connection closed first.
func (c *Conn) loopTask(_ gnet.Conn, err error) error {
	if err != nil {
		return nil
	}
	c.flush()
	c.noteOutbound()
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := &c.congestion; g.on && !c.closed && g.polling {
		g.polling = false
		g.delay = min(2*g.delay, drainPollMax)
		c.armDrainPollLocked()
	}
	return nil
}

// holdFlush marks a flush as coming, so that writes made until then (from
// the callback about to run, or from anywhere) wait for it instead of
// kicking the loop. Loop-only; the callback's wrapper then calls flush.
func (c *Conn) holdFlush() {
	c.mu.Lock()
	c.flushPending = true
	c.mu.Unlock()
}

// flush writes the queue with gnet's Writev, at a point where no Handler
// callback is running: if the socket fails, gnet closes the connection on
// the spot (connection_unix.go:200-204), and OnClose must not run inside
// another callback. Loop-only.
func (c *Conn) flush() {
	c.mu.Lock()
	if c.closed || c.queue.empty() {
		c.flushPending = false
		c.mu.Unlock()
		return
	}
	w := c.queue
	c.queue, c.spare = c.spare, writeQueue{}
	c.flushPending = false
	c.mu.Unlock()

	err := c.writeNow(w.bufs)
	c.queued.Add(-w.n)
	c.noteOutbound()
	for _, done := range w.dones {
		done(err)
	}
	w.reset()
	c.spare = w
}

// writeNow writes at most maxIovecs buffers per writev. gnet copies what the
// socket does not take into its outbound buffer, behind anything already
// there, so chunks stay in order. Loop-only.
func (c *Conn) writeNow(bufs [][]byte) error {
	for len(bufs) > 0 {
		chunk := bufs[:min(len(bufs), maxIovecs)]
		bufs = bufs[len(chunk):]
		if _, err := c.gc.Writev(chunk); err != nil {
			return fmt.Errorf("netio: write: %w", err)
		}
	}
	return nil
}

// failQueueLocked empties the queue for OnClose, which calls the returned
// dones with ErrConnClosed after unlocking.
func (c *Conn) failQueueLocked() []func(error) {
	dones := c.queue.dones
	c.queued.Add(-c.queue.n)
	clear(c.queue.bufs)
	c.queue = writeQueue{}
	return dones
}

// noteOutbound records gnet's outbound buffer and re-evaluates congestion.
// Loop-only (OutboundBuffered is not safe elsewhere).
func (c *Conn) noteOutbound() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.outbound.Store(int64(c.gc.OutboundBuffered()))
	c.updateCongestionLocked()
}

// updateCongestionLocked moves between congested and drained. Congestion
// starts above the high-water mark and ends at half of it, or on close.
func (c *Conn) updateCongestionLocked() {
	g := &c.congestion
	p := c.Pending()
	switch {
	case !g.on && !c.closed && p > c.srv.opts.WriteBufferHighWater:
		g.on = true
		g.drained = make(chan struct{})
		g.delay = drainPollMin
		c.armDrainPollLocked()
	case g.on && (c.closed || p <= c.srv.opts.WriteBufferHighWater/2):
		g.on = false
		close(g.drained)
		g.timer.Stop()
	default:
		return
	}
	c.congested.Store(g.on)
}

func (c *Conn) armDrainPollLocked() {
	g := &c.congestion
	if g.timer == nil {
		g.timer = time.AfterFunc(g.delay, c.pollDrain)
		return
	}
	g.timer.Reset(g.delay)
}

// pollDrain runs on a timer goroutine while congested: it asks the loop to
// look at the outbound buffer; loopTask re-arms the timer.
func (c *Conn) pollDrain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.congestion.on {
		return
	}
	c.congestion.polling = true
	c.queueLoopTask()
}
