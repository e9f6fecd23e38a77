package netio

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Conn is one client connection. Its methods are safe from any goroutine.
type Conn struct {
	// slotFreed is set when the connection's admission slot was given
	// back (releaseSlot): before the handler's OnClose, and never twice.
	slotFreed atomic.Bool
	// Immutable after OnOpen.
	srv        *Server
	gc         gnet.Conn
	remote     net.Addr
	local      net.Addr
	loopTaskCB gnet.AsyncCallback // c.loopTask, bound once so kicks do not allocate

	ctx       atomic.Pointer[ctxBox]
	paused    atomic.Bool
	closing   atomic.Bool  // a close reason is set: deliver no more frames
	congested atomic.Bool  // mirrors congestion.on for lock-free reads
	queued    atomic.Int64 // bytes in queue or in a writev under way
	outbound  atomic.Int64 // gnet's outbound buffer as last seen on the loop
	lastRead  atomic.Int64 // unix nanoseconds of the last read, for IdleTimeout

	spare writeQueue // loop-only: the queue's other half, swapped in by flush

	mu           sync.Mutex
	closed       bool       // guarded by mu; OnClose ran: nothing more is queued on the loop
	reason       error      // guarded by mu; the first close reason
	queue        writeQueue // guarded by mu; accepted writes not yet handed to gnet
	flushPending bool       // guarded by mu; a flush will run: writers need not kick the loop
	// kicks counts the kicks registered under mu while open and made
	// after it (Conn.kick); OnClose waits for them.
	kicks      sync.WaitGroup
	congestion struct { // guarded by mu
		on      bool
		drained chan struct{} // closed when congestion ends
		timer   *time.Timer   // polls the outbound buffer while on
		delay   time.Duration // next poll interval (backs off)
		polling bool          // a poll kicked the loop; its loopTask re-arms the timer
	}
}

type ctxBox struct{ v any }

// newConn is called on the loop, in OnOpen.
func newConn(s *Server, gc gnet.Conn) *Conn {
	c := &Conn{
		srv:    s,
		gc:     gc,
		remote: cloneAddr(gc.RemoteAddr()),
		local:  cloneAddr(gc.LocalAddr()),
	}
	c.loopTaskCB = c.loopTask
	c.lastRead.Store(time.Now().UnixNano())
	return c
}

// cloneAddr copies a TCP address: gnet returns the zone's bytes to a pool
// when the connection closes (connection_unix.go:95-99).
func cloneAddr(a net.Addr) net.Addr {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return a
	}
	return &net.TCPAddr{IP: append(net.IP(nil), t.IP...), Port: t.Port, Zone: strings.Clone(t.Zone)}
}

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// LocalAddr is the server side's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// SetContext stores the protocol handler's per-connection state.
func (c *Conn) SetContext(v any) { c.ctx.Store(&ctxBox{v}) }

// Context returns what SetContext stored, or nil.
func (c *Conn) Context() any {
	if b := c.ctx.Load(); b != nil {
		return b.v
	}
	return nil
}

// Close closes the connection with reason (ErrClosedLocally if nil), on the
// loop, after the writes made before it: they are written first, and gnet
// tries once to send what the socket has not taken yet (it does not wait
// for a slow client). Then OnClose gets reason, which is logged once. Only
// the first reason counts; closing twice is harmless.
func (c *Conn) Close(reason error) {
	if reason == nil {
		reason = ErrClosedLocally
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.reason != nil {
		return
	}
	c.reason = reason
	c.closing.Store(true)
	// gnet's Close queues the close on the loop (connection_unix.go:540-545).
	if err := c.gc.Close(); err != nil {
		c.srv.log.Warn("netio: queue close", "remote", c.remote, "err", err)
	}
}

// setReason records why the loop is about to close the connection itself.
func (c *Conn) setReason(reason error) {
	c.mu.Lock()
	if c.reason == nil {
		c.reason = reason
		c.closing.Store(true)
	}
	c.mu.Unlock()
}

// Closed reports whether the connection has closed (OnClose has run).
func (c *Conn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// PauseReading stops delivering frames after the current one. gnet keeps
// reading the socket into its buffer meanwhile (it cannot stop reading);
// past Options.MaxInboundBuffered the connection closes with
// ErrBackPressureIgnored.
func (c *Conn) PauseReading() { c.paused.Store(true) }

// ResumeReading delivers the buffered frames, in order, on the loop.
func (c *Conn) ResumeReading() {
	if !c.paused.Swap(false) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	// Wake runs OnTraffic on the loop even with no new bytes
	// (eventloop_unix.go:405-413), which delivers what is buffered.
	if err := c.gc.Wake(nil); err != nil {
		c.srv.log.Warn("netio: queue wake", "remote", c.remote, "err", err)
	}
}

// Paused reports whether reading is paused.
func (c *Conn) Paused() bool { return c.paused.Load() }

// stopped and frame make *Conn the frameSink of its OnTraffic.
func (c *Conn) stopped() bool { return c.paused.Load() || c.closing.Load() }

func (c *Conn) frame(frame []byte) error { return c.srv.h.OnFrame(c, frame) }

// checkInbound enforces MaxInboundBuffered while reading is paused. Loop-only.
func (c *Conn) checkInbound() error {
	if !c.paused.Load() {
		return nil
	}
	limit := c.srv.opts.MaxInboundBuffered
	if n := c.gc.InboundBuffered(); n > limit {
		return fmt.Errorf("%w: %d bytes buffered while reading was paused, limit %d",
			ErrBackPressureIgnored, n, limit)
	}
	return nil
}

// closeReasonLocked picks what OnClose reports: our reason, else gnet's
// error (the peer closed: read: EOF, connection reset, ...), else shutdown.
func (c *Conn) closeReasonLocked(gnetErr error) error {
	switch {
	case c.reason != nil:
		return c.reason
	case gnetErr != nil:
		return gnetErr
	case c.srv.stopping.Load():
		return ErrServerClosed
	default:
		return ErrConnClosed
	}
}
