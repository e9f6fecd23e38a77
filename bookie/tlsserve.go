package bookie

// The TLS port (bookiePortTls): Go's crypto/tls, a reader and a writer
// goroutine per connection, feeding the same handleFrame and worker
// queues as the plaintext netio port (gnet has no TLS).
//
// Behaviour:
//   - The handshake must finish within tlsHandshakeTimeout; one that fails
//     (plaintext or garbage on the TLS port, a missing or untrusted client
//     certificate with tlsClientAuthentication) is logged with the remote
//     address and the connection closed. Nothing else is affected.
//   - The reader reads one frame at a time, its size checked before
//     anything is buffered (2 x MaxFrameSize, as the plaintext port), and
//     hands it to handleFrame. PauseReading (a full worker queue) stops it
//     between frames, so TCP pushes back on the client.
//   - The writer writes what the workers queued through a 64 KiB buffer,
//     one flush per batch. A client that lets more than tlsMaxQueued of
//     answers pile up is disconnected.
//   - Close (the server's) stops accepting, wakes every reader, lets each
//     writer flush what was queued (within tlsCloseWriteTimeout) and waits
//     for the goroutines.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/internal/tlsfiles"
)

const (
	tlsHandshakeTimeout  = 10 * time.Second
	tlsIOBuffer          = 64 << 10
	tlsMaxQueued         = 256 << 20
	tlsCloseWriteTimeout = 5 * time.Second
)

// tlsListener accepts TLS connections for a Server.
//
// Lock rules: mu guards conns and closed; wg counts the accept loop and
// every connection's serve.
type tlsListener struct {
	srv *Server
	ln  net.Listener
	cfg *tls.Config
	wg  sync.WaitGroup

	mu     sync.Mutex
	conns  map[*tlsConn]struct{}
	closed bool
}

func listenTLS(s *Server, addr string, cfg *tls.Config) (*tlsListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bookie: listen (TLS) on %s: %w", addr, err)
	}
	l := &tlsListener{srv: s, ln: ln, cfg: cfg, conns: map[*tlsConn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

func (l *tlsListener) accept() {
	defer l.wg.Done()
	for {
		raw, err := l.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.srv.log.Error("bookie TLS listener stopped", "err", err)
			}
			return
		}
		c := &tlsConn{l: l, raw: raw, conn: tls.Server(raw, l.cfg), remote: raw.RemoteAddr(),
			kick: make(chan struct{}, 1), resume: make(chan struct{}, 1)}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = raw.Close()
			return
		}
		l.conns[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go c.serve()
	}
}

// close stops accepting, closes every connection and waits (up to ctx)
// for their goroutines.
func (l *tlsListener) close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	conns := make([]*tlsConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	err := l.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("bookie: TLS port close: %w", ctx.Err())
	}
}

// tlsConn is one TLS client connection; it implements peer.
//
// Lock rules: mu guards the write queue and the pause and close state.
type tlsConn struct {
	l      *tlsListener
	raw    net.Conn
	conn   *tls.Conn
	remote net.Addr
	kick   chan struct{} // wakes the writer
	resume chan struct{} // wakes a paused reader

	mu      sync.Mutex
	queue   [][]byte
	queued  int
	paused  bool
	closing bool
}

func (c *tlsConn) serve() {
	defer c.l.wg.Done()
	defer c.forget()
	log := c.l.srv.log
	_ = c.raw.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := c.conn.Handshake(); err != nil {
		log.Warn("bookie TLS handshake failed; connection closed", "remote", c.remote.String(), "err", err)
		_ = c.raw.Close()
		return
	}
	_ = c.raw.SetDeadline(time.Time{})
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); c.writeLoop() }()
	err := c.readLoop()
	c.Close()
	<-writerDone
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, errClosing) {
		log.Warn("bookie TLS connection closed", "remote", c.remote.String(), "err", err)
	}
}

// errClosing ends a reader the server closed.
var errClosing = errors.New("connection closing")

func (c *tlsConn) forget() {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
}

// readLoop reads frames until an error or a close.
func (c *tlsConn) readLoop() error {
	s := c.l.srv
	maxFrame := 2 * s.opts.MaxFrameSize
	r := bufio.NewReaderSize(c.conn, tlsIOBuffer)
	var buf []byte
	for {
		if err := c.waitResumed(); err != nil {
			return err
		}
		var prefix [4]byte
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return c.readErr(err)
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
			return c.readErr(err)
		}
		if err := s.handleFrame(c, buf); err != nil {
			return err
		}
		if cap(buf) > tlsIOBuffer { // do not keep a large entry's buffer for small frames
			buf = nil
		}
	}
}

// readErr turns the read error a Close provoked into errClosing.
func (c *tlsConn) readErr(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return errClosing
	}
	return err
}

// waitResumed blocks while reading is paused.
func (c *tlsConn) waitResumed() error {
	for {
		c.mu.Lock()
		paused, closing := c.paused, c.closing
		c.mu.Unlock()
		if closing {
			return errClosing
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
		bufs, closing := c.queue, c.closing
		c.queue, c.queued = nil, 0
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
		if err == nil && len(bufs) > 0 {
			err = w.Flush()
		}
		if err != nil || closing {
			c.Close()
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
	over := c.queued > tlsMaxQueued
	c.mu.Unlock()
	c.wake()
	if over {
		c.l.srv.log.Warn("bookie TLS client does not read its answers; connection closed",
			"remote", c.remote.String(), "queued-limit", tlsMaxQueued)
		c.Close()
	}
	return nil
}

func (c *tlsConn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Close closes the connection after what was written before it.
func (c *tlsConn) Close() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.mu.Unlock()
	c.wake()
	select {
	case c.resume <- struct{}{}:
	default:
	}
	// A reader blocked in Read (or a handshake) wakes up now; the writer
	// still flushes, for a bounded time.
	_ = c.raw.SetReadDeadline(time.Now())
	_ = c.raw.SetWriteDeadline(time.Now().Add(tlsCloseWriteTimeout))
}

// RemoteAddr implements peer.
func (c *tlsConn) RemoteAddr() net.Addr { return c.remote }

// PauseReading implements peer: the reader stops before its next frame.
func (c *tlsConn) PauseReading() {
	c.mu.Lock()
	c.paused = true
	c.mu.Unlock()
}

// ResumeReading implements peer.
func (c *tlsConn) ResumeReading() {
	c.mu.Lock()
	c.paused = false
	c.mu.Unlock()
	select {
	case c.resume <- struct{}{}:
	default:
	}
}

// TLSFiles are the bookie's TLS settings under BookKeeper's keys.
type TLSFiles struct {
	CertFile  string // tlsCertificatePath (PEM)
	KeyFile   string // tlsKeyStore (PEM: tlsKeyStoreType=PEM)
	TrustFile string // tlsTrustStore (PEM bundle of the CAs of client certificates)
	// ClientAuthentication (tlsClientAuthentication) requires every client
	// to present a certificate signed by a CA of TrustFile.
	ClientAuthentication bool
	// RefreshInterval (tlsCertFilesRefreshDurationSeconds; 0: never):
	// changed files are loaded for new connections.
	RefreshInterval time.Duration
	Logger          *slog.Logger
}

// NewServerTLS loads the files; ServerOptions.TLS is its ServerConfig.
func NewServerTLS(f TLSFiles) (*tlsfiles.Reloader, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("bookie: the TLS port needs tlsCertificatePath and tlsKeyStore (PEM files)")
	}
	if f.ClientAuthentication && f.TrustFile == "" {
		return nil, errors.New("bookie: tlsClientAuthentication=true needs tlsTrustStore (the PEM CAs of client certificates)")
	}
	return tlsfiles.New(tlsfiles.Files{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustFile: f.TrustFile,
		Keys:            [3]string{"tlsCertificatePath", "tlsKeyStore", "tlsTrustStore"},
		RefreshInterval: f.RefreshInterval, Logger: f.Logger},
		func(l tlsfiles.Loaded) (*tls.Config, error) {
			cfg := &tls.Config{Certificates: []tls.Certificate{*l.Cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.NoClientCert}
			if f.ClientAuthentication {
				cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, l.Roots
			}
			return cfg, nil
		})
}
