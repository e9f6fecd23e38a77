package broker

// The TLS binary port (brokerServicePortTls): Go's crypto/tls with a
// goroutine pair per connection, serving the same protocol handler
// (serverConn) as the plaintext event loops (server.go) through the
// transport interface.
//
// Behaviour:
//   - The handshake must finish within tlsHandshakeTimeout; one that fails
//     (plaintext on the TLS port, garbage, an untrusted client certificate)
//     is logged with the remote address and the connection closed. The
//     broker is not otherwise involved.
//   - The reader goroutine reads one frame at a time (size checked before
//     anything is buffered, as the event loops do) and hands it to
//     serverConn.handleFrame; pausing reading stops it between frames, so
//     TCP pushes back on the client.
//   - The writer goroutine writes what Write queued through a 64 KiB
//     buffer (one TLS record per flush, not one per frame part); a queue
//     above tlsWriteHighWater is Congested until it drains to half.
//   - Close writes what was queued before it (within
//     tlsCloseWriteTimeout), then closes the socket; a connection silent
//     for two keep-alive intervals is closed, and so is one whose client
//     lets more than tlsMaxQueued of answers pile up.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/wire"
)

const (
	tlsHandshakeTimeout = 10 * time.Second
	tlsWriteHighWater   = 1 << 20
	// tlsMaxQueued closes a connection whose client does not read what
	// it asked for (PONGs to a PING flood): dispatch stops at the high
	// water mark (checked before each entry, so each consumer adds at
	// most one entry past it), so only such a client gets here.
	tlsMaxQueued = 256 << 20
	tlsIOBuffer  = 64 << 10
	// tlsCloseWriteTimeout bounds flushing a closing connection's queue
	// to a client that does not read.
	tlsCloseWriteTimeout = 5 * time.Second
)

// TLSServer is a TLS binary-protocol listener.
type TLSServer struct {
	b   *Broker
	ln  net.Listener
	cfg *tls.Config
	wg  sync.WaitGroup

	mu     sync.Mutex
	conns  map[*tlsConn]struct{}
	closed bool
}

// ServeTLS listens for Pulsar clients over TLS on addr with cfg (port 0
// picks one; see Addr). Lookups then answer this port as
// brokerServiceUrlTls.
func (b *Broker) ServeTLS(addr string, cfg *tls.Config) (*TLSServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("broker: listen (TLS) on %s: %w", addr, err)
	}
	s := &TLSServer{b: b, ln: ln, cfg: cfg, conns: map[*tlsConn]struct{}{}}
	advertised := b.cfg.AdvertisedAddressTLS
	if advertised == "" {
		advertised = ln.Addr().String()
	}
	b.advertisedTLS.Store(&advertised)
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the listening address.
func (s *TLSServer) Addr() net.Addr { return s.ln.Addr() }

func (s *TLSServer) accept() {
	defer s.wg.Done()
	for {
		raw, err := s.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.b.log.Error("TLS listener stopped", "err", err)
			}
			return
		}
		tc := &tlsConn{srv: s, raw: raw, conn: tls.Server(raw, s.cfg), remote: raw.RemoteAddr(),
			kick: make(chan struct{}, 1), resume: make(chan struct{}, 1)}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = raw.Close()
			return
		}
		s.conns[tc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go tc.serve()
	}
}

// Close stops listening, closes every connection and waits (up to ctx)
// for their goroutines.
func (s *TLSServer) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*tlsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
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
		return fmt.Errorf("broker: TLS server close: %w", ctx.Err())
	}
}

// tlsConn is one TLS client connection; it implements transport.
//
// Lock rules: mu guards the write queue, the pause and close state.
type tlsConn struct {
	srv    *TLSServer
	raw    net.Conn
	conn   *tls.Conn
	remote net.Addr
	peer   []*x509.Certificate // verified client certificates, set after the handshake
	kick   chan struct{}       // wakes the writer
	resume chan struct{}       // wakes a paused reader

	mu        sync.Mutex
	queue     [][]byte
	queued    int
	congested bool
	drained   chan struct{}
	paused    bool
	closing   bool
	reason    error
}

func (c *tlsConn) serve() {
	defer c.srv.wg.Done()
	defer c.forget()
	ctx, cancel := context.WithTimeout(c.srv.b.ctx, tlsHandshakeTimeout)
	err := c.conn.HandshakeContext(ctx)
	cancel()
	if err != nil {
		c.srv.b.log.Warn("TLS handshake failed; connection closed", "remote", c.remote.String(), "err", err)
		_ = c.raw.Close()
		return
	}
	c.peer = c.conn.ConnectionState().PeerCertificates
	sc := c.srv.b.newConn(c)
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); c.writeLoop() }()
	err = c.readLoop(sc)
	c.Close(err)
	<-writerDone
	sc.closedByNetwork(c.closeReason())
}

func (c *tlsConn) forget() {
	c.srv.mu.Lock()
	delete(c.srv.conns, c)
	c.srv.mu.Unlock()
}

// readLoop reads frames until an error or a close.
func (c *tlsConn) readLoop(sc *serverConn) error {
	b := c.srv.b
	maxFrame := b.cfg.MaxMessageSize + wire.FramePadding
	idle := 2 * b.cfg.KeepAliveInterval
	r := bufio.NewReaderSize(c.conn, tlsIOBuffer)
	var buf []byte
	for {
		if err := c.waitResumed(); err != nil {
			return err
		}
		_ = c.raw.SetReadDeadline(time.Now().Add(idle))
		var prefix [4]byte
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return err
		}
		size := binary.BigEndian.Uint32(prefix[:])
		if size == 0 || uint64(size) > uint64(maxFrame) {
			return fmt.Errorf("frame size %d: want 1..%d", size, maxFrame)
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
		if err := sc.handleFrame(buf); err != nil {
			return err
		}
		if cap(buf) > tlsIOBuffer { // do not keep a 5 MiB buffer for small frames
			buf = nil
		}
	}
}

// waitResumed blocks while reading is paused.
func (c *tlsConn) waitResumed() error {
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

func (c *tlsConn) writeLoop() {
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
func (c *tlsConn) Write(bufs ...[]byte) error {
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
	over := c.queued > tlsMaxQueued
	c.mu.Unlock()
	c.wake()
	if over {
		c.Close(fmt.Errorf("more than %d bytes of answers queued: the client does not read", tlsMaxQueued))
	}
	return nil
}

func (c *tlsConn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *tlsConn) updateCongestionLocked() {
	switch {
	case !c.congested && c.queued > tlsWriteHighWater:
		c.congested, c.drained = true, make(chan struct{})
	case c.congested && c.queued <= tlsWriteHighWater/2:
		c.congested = false
		close(c.drained)
	}
}

// Close closes the connection after what was written before it.
func (c *tlsConn) Close(reason error) {
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
	// for a bounded time even if it is blocked on a client that does
	// not read.
	_ = c.raw.SetReadDeadline(time.Now())
	_ = c.raw.SetWriteDeadline(time.Now().Add(tlsCloseWriteTimeout))
}

func (c *tlsConn) closeReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

func (c *tlsConn) RemoteAddr() net.Addr { return c.remote }

func (c *tlsConn) PauseReading() {
	c.mu.Lock()
	c.paused = true
	c.mu.Unlock()
}

func (c *tlsConn) ResumeReading() {
	c.mu.Lock()
	c.paused = false
	c.mu.Unlock()
	select {
	case c.resume <- struct{}{}:
	default:
	}
}

func (c *tlsConn) Congested() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.congested
}

func (c *tlsConn) Drained() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.congested {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return c.drained
}

// PeerCertificates are the client's verified certificates (tls
// authentication reads the CN of the first).
func (c *tlsConn) PeerCertificates() []*x509.Certificate { return c.peer }
