package netio

// The TLS side of a server: gnet has no TLS, so a TLS port runs on Go's
// crypto/tls with a reader and a writer goroutine per connection, feeding
// the same frame handler as the event loops. The broker's TLS binary port
// (brokerServicePortTls) and the bookie's (bookiePortTls) both run here.
//
// Behaviour:
//   - The handshake must finish within TLSHandshakeTimeout; one that fails
//     (plaintext on the TLS port, garbage, a missing or untrusted client
//     certificate) is logged with the remote address and the connection
//     closed. Nothing else is affected.
//   - The reader reads one frame at a time, its size checked before
//     anything is buffered (MaxFrameSize), and hands it to the
//     connection's frame function. PauseReading stops it between frames,
//     so TCP pushes back on the client; a connection silent for IdleTimeout
//     is closed.
//   - The writer writes what Write queued through a 64 KiB buffer (one
//     TLS record per flush, not one per frame part). A queue above
//     HighWater is Congested until it drains to half; a client that lets
//     more than MaxQueued of answers pile up is disconnected.
//   - Close writes what was queued before it (within tlsCloseWriteTimeout),
//     then closes the socket. TLSServer.Close stops accepting, closes every
//     connection and waits for the goroutines.
//
// Lock rules: TLSServer.mu guards conns and closed; TLSConn.mu guards its
// write queue and its pause and close state.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// TLSHandshakeTimeout bounds a client's handshake.
	TLSHandshakeTimeout  = 10 * time.Second
	tlsIOBuffer          = 64 << 10
	tlsCloseWriteTimeout = 5 * time.Second
)

// TLSOptions configure a TLS listener.
type TLSOptions struct {
	// Config is the server's TLS configuration (required).
	Config *tls.Config
	// MaxFrameSize bounds a frame's size word (required).
	MaxFrameSize int
	// IdleTimeout closes a connection that sent nothing this long (0:
	// never).
	IdleTimeout time.Duration
	// HighWater: queued answers past it make the connection Congested (0:
	// never). MaxQueued disconnects a client that lets this much pile up
	// (default 256 MiB).
	HighWater, MaxQueued int
	// MaxConns, MaxConnsPerIP and FDHeadroom bound this port's
	// connections as Options' fields of the same names do (accept.go).
	MaxConns, MaxConnsPerIP, FDHeadroom int
	// What names the port in log lines ("broker TLS", "bookie TLS").
	What   string
	Logger *slog.Logger
}

// TLSOpen is called for each connection after its handshake; it returns
// the frame function (frames are whole, size word included, valid until
// it returns; an error closes the connection) and the function called
// once the connection is gone, with the reason.
type TLSOpen func(c *TLSConn) (onFrame func(frame []byte) error, onClose func(reason error))

// TLSServer is a TLS listener.
type TLSServer struct {
	opts TLSOptions
	open TLSOpen
	ln   net.Listener
	adm  *admission
	wg   sync.WaitGroup
	ctx  context.Context // cancelled by Close: handshakes in progress end

	cancel context.CancelFunc
	mu     sync.Mutex
	conns  map[*TLSConn]struct{}
	closed bool
}

// ListenTLS listens on addr (port 0 picks one; see Addr) and serves each
// connection with open.
func ListenTLS(addr string, opts TLSOptions, open TLSOpen) (*TLSServer, error) {
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = 256 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	lim, err := newLimits(opts.MaxConns, opts.MaxConnsPerIP, opts.FDHeadroom)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.What, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", opts.What, addr, err)
	}
	s := &TLSServer{opts: opts, open: open, ln: ln, conns: map[*TLSConn]struct{}{},
		adm: newAdmission(lim, opts.Logger)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	acc := newAcceptor(ln, s.adm, opts.What)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		acc.run(s.serve)
	}()
	return s, nil
}

// Addr is the listening address.
func (s *TLSServer) Addr() net.Addr { return s.ln.Addr() }

// serve starts an admitted connection's goroutines (the acceptor's
// callback).
func (s *TLSServer) serve(raw net.Conn) {
	c := &TLSConn{srv: s, raw: raw, conn: tls.Server(raw, s.opts.Config), remote: raw.RemoteAddr(),
		kick: make(chan struct{}, 1), resume: make(chan struct{}, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = raw.Close()
		s.adm.release(c.remote)
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go c.serve()
}

// Close stops listening, closes every connection and waits (up to ctx)
// for their goroutines.
func (s *TLSServer) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*TLSConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	err := s.ln.Close()
	for _, c := range conns {
		c.Close(net.ErrClosed)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: close: %w", s.opts.What, ctx.Err())
	}
}

// TLSConn is one TLS client connection.
type TLSConn struct {
	// slotFreed: the admission slot was given back (releaseSlot), before
	// the handler's close callback and never twice.
	slotFreed atomic.Bool
	srv       *TLSServer
	raw       net.Conn
	conn      *tls.Conn
	remote    net.Addr
	peer      []*x509.Certificate // verified client certificates, set after the handshake
	kick      chan struct{}       // wakes the writer
	resume    chan struct{}       // wakes a paused reader

	mu        sync.Mutex
	queue     [][]byte
	queued    int
	congested bool
	drained   chan struct{}
	paused    bool
	closing   bool
	reason    error
}

func (c *TLSConn) serve() {
	s := c.srv
	defer s.wg.Done()
	defer c.forget()
	ctx, cancel := context.WithTimeout(s.ctx, TLSHandshakeTimeout)
	err := c.conn.HandshakeContext(ctx)
	cancel()
	if err != nil {
		s.opts.Logger.Warn(s.opts.What+" handshake failed; connection closed", "remote", c.remote.String(), "err", err)
		_ = c.raw.Close()
		return
	}
	c.peer = c.conn.ConnectionState().PeerCertificates
	onFrame, onClose := s.open(c)
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); c.writeLoop() }()
	err = c.readLoop(onFrame)
	c.Close(err)
	<-writerDone
	c.releaseSlot()
	onClose(c.closeReason())
}

func (c *TLSConn) forget() {
	c.srv.mu.Lock()
	delete(c.srv.conns, c)
	c.srv.mu.Unlock()
	c.releaseSlot()
}

// releaseSlot gives back the connection's admission slot once (see
// Server.releaseSlot).
func (c *TLSConn) releaseSlot() {
	if c.slotFreed.CompareAndSwap(false, true) {
		c.srv.adm.release(c.remote)
	}
}

// readLoop reads frames until an error or a close.
func (c *TLSConn) readLoop(onFrame func([]byte) error) error {
	opts := c.srv.opts
	r := bufio.NewReaderSize(c.conn, tlsIOBuffer)
	var buf []byte
	for {
		if err := c.waitResumed(); err != nil {
			return err
		}
		if opts.IdleTimeout > 0 {
			_ = c.raw.SetReadDeadline(time.Now().Add(opts.IdleTimeout))
		}
		var prefix [4]byte
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return err
		}
		size := binary.BigEndian.Uint32(prefix[:])
		if size == 0 || uint64(size) > uint64(opts.MaxFrameSize) {
			return fmt.Errorf("frame size %d: want 1..%d", size, opts.MaxFrameSize)
		}
		total := 4 + int(size)
		if cap(buf) < total {
			buf = make([]byte, total)
		}
		buf = buf[:total]
		copy(buf, prefix[:])
		if _, err := io.ReadFull(r, buf[4:]); err != nil {
			return err
		}
		if err := onFrame(buf); err != nil {
			return err
		}
		if cap(buf) > tlsIOBuffer { // do not keep a large frame's buffer for small ones
			buf = nil
		}
	}
}

// waitResumed blocks while reading is paused.
func (c *TLSConn) waitResumed() error {
	for {
		c.mu.Lock()
		paused, closing := c.paused, c.closing
		c.mu.Unlock()
		if closing {
			return net.ErrClosed
		}
		if !paused {
			return nil
		}
		<-c.resume
	}
}

func (c *TLSConn) writeLoop() {
	w := bufio.NewWriterSize(c.conn, tlsIOBuffer)
	for {
		c.mu.Lock()
		bufs, n, closing := c.queue, c.queued, c.closing
		c.queue, c.queued = nil, 0
		c.updateCongestionLocked()
		c.mu.Unlock()
		if closing {
			_ = c.raw.SetWriteDeadline(time.Now().Add(tlsCloseWriteTimeout))
		}
		var err error
		for _, b := range bufs {
			if _, err = w.Write(b); err != nil {
				break
			}
		}
		if err == nil && n > 0 {
			err = w.Flush()
		}
		if err != nil || closing {
			c.Close(err)
			_ = c.raw.Close()
			return
		}
		<-c.kick
	}
}

// Write queues bufs for the writer; it never blocks.
func (c *TLSConn) Write(bufs ...[]byte) error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.queue = append(c.queue, bufs...)
	for _, b := range bufs {
		c.queued += len(b)
	}
	c.updateCongestionLocked()
	over := c.queued > c.srv.opts.MaxQueued
	c.mu.Unlock()
	c.wake()
	if over {
		c.Close(fmt.Errorf("more than %d bytes of answers queued: the client does not read", c.srv.opts.MaxQueued))
	}
	return nil
}

func (c *TLSConn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *TLSConn) updateCongestionLocked() {
	hw := c.srv.opts.HighWater
	switch {
	case hw <= 0:
	case !c.congested && c.queued > hw:
		c.congested, c.drained = true, make(chan struct{})
	case c.congested && c.queued <= hw/2:
		c.congested = false
		close(c.drained)
	}
}

// Close closes the connection after what was written before it; reason
// is what onClose is told (the first reason given wins).
func (c *TLSConn) Close(reason error) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing, c.reason = true, reason
	c.mu.Unlock()
	c.wake()
	select {
	case c.resume <- struct{}{}:
	default:
	}
	// A reader blocked in Read wakes up now; the writer still flushes,
	// for a bounded time even if it is blocked on a client that does not
	// read.
	_ = c.raw.SetReadDeadline(time.Now())
	_ = c.raw.SetWriteDeadline(time.Now().Add(tlsCloseWriteTimeout))
}

func (c *TLSConn) closeReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// RemoteAddr is the client's address.
func (c *TLSConn) RemoteAddr() net.Addr { return c.remote }

// PauseReading stops the reader before its next frame.
func (c *TLSConn) PauseReading() {
	c.mu.Lock()
	c.paused = true
	c.mu.Unlock()
}

// ResumeReading lets a paused reader go on.
func (c *TLSConn) ResumeReading() {
	c.mu.Lock()
	c.paused = false
	c.mu.Unlock()
	select {
	case c.resume <- struct{}{}:
	default:
	}
}

// Congested reports a write queue above HighWater; Drained is closed once
// it is back under half of it.
func (c *TLSConn) Congested() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.congested
}

// Drained: see Congested.
func (c *TLSConn) Drained() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.congested {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return c.drained
}

// PeerCertificates are the client's verified certificates (leaf first).
func (c *TLSConn) PeerCertificates() []*x509.Certificate { return c.peer }
