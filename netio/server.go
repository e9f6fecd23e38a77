package netio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Handler is the protocol on top of netio. All three methods run on the
// connection's event loop, one at a time per connection, and must not
// block.
type Handler interface {
	// OnOpen is called once for a new connection, before any frame.
	OnOpen(c *Conn)
	// OnFrame gets one whole frame, its 4-byte size prefix included. The
	// slice aliases gnet's inbound buffer and is valid only during the
	// call: copy what must outlive it. Returning an error closes the
	// connection; the error is logged and passed to OnClose.
	OnFrame(c *Conn, frame []byte) error
	// OnClose is called once when the connection has closed, with the
	// reason: the error OnFrame returned, the reason given to Conn.Close,
	// ErrFrameTooLarge, ErrBackPressureIgnored, ErrIdleTimeout,
	// ErrServerClosed, or the peer's close (errors.Is(err, io.EOF)) or
	// socket error. Writes to c fail from here on.
	OnClose(c *Conn, err error)
}

// Server is a running gnet engine serving one Handler.
type Server struct {
	h    Handler
	opts Options // normalized
	log  *slog.Logger

	// Set in OnBoot, read after started or done is closed.
	eng     gnet.Engine
	addr    net.Addr
	bootErr error

	started   chan struct{} // closed on the first OnTick: the loops run
	startOnce sync.Once
	done      chan struct{} // closed when gnet.Run has returned
	runErr    error         // written before done is closed
	stopping  atomic.Bool
	stopOnce  sync.Once
	shutdown  chan struct{} // closed by OnShutdown: gnet began stopping its loops
	shutOnce  sync.Once
	closedCh  chan struct{} // always closed: Drained of a connection that is not congested

	mu    sync.Mutex
	conns map[*Conn]struct{} // guarded by mu: open connections
	lnFD  int                // guarded by mu: our duplicate of the listener (-1: none), see stopAccepting
}

// Listen starts a server for h and returns once it accepts connections.
func Listen(h Handler, opts Options) (*Server, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	s := &Server{
		h:        h,
		opts:     opts,
		log:      opts.Logger,
		started:  make(chan struct{}),
		done:     make(chan struct{}),
		closedCh: make(chan struct{}),
		shutdown: make(chan struct{}),
		conns:    make(map[*Conn]struct{}),
		lnFD:     -1,
	}
	close(s.closedCh)
	go s.run()
	select {
	case <-s.started:
		return s, nil
	case <-s.done:
		err := s.runErr
		if err == nil {
			err = errors.New("engine stopped before it started")
		}
		return nil, fmt.Errorf("netio: listen on %s: %w", opts.Addr, err)
	}
}

// run runs the engine until it stops.
func (s *Server) run() {
	o := s.opts
	err := gnet.Run(&engineHandler{s: s}, o.Addr,
		gnet.WithMulticore(o.Multicore),
		gnet.WithNumEventLoop(o.NumEventLoop),
		gnet.WithReadBufferCap(o.ReadBufferCap),
		gnet.WithTicker(true),
		gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{l: s.log, stopping: &s.stopping}),
	)
	if err == nil {
		err = s.bootErr
	}
	s.mu.Lock()
	if s.lnFD >= 0 {
		unix.Close(s.lnFD)
		s.lnFD = -1
	}
	s.mu.Unlock()
	s.runErr = err
	close(s.done)
}

// Addr is the address the server listens on (the real port when Options.Addr
// asked for port 0).
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops accepting, closes every connection (OnClose gets
// ErrServerClosed; queued writes fail with ErrConnClosed), and waits for the
// engine to stop, or for ctx. Safe to call more than once, but not from a
// Handler callback (the loop it runs on could not stop).
func (s *Server) Close(ctx context.Context) error {
	s.stopping.Store(true)
	s.stopOnce.Do(func() {
		s.stopAccepting()
		// Engine.Stop polls for the end every 500 ms; with a done context
		// it only starts the shutdown, and we wait for run instead.
		stopCtx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.eng.Stop(stopCtx)
	})
	select {
	case <-s.done:
		return s.runErr
	case <-ctx.Done():
		return fmt.Errorf("netio: close server on %s: %w", s.addr, ctx.Err())
	}
}

// stopAccepting shuts the listening socket down before the loops stop, so
// that no connection is left open without a loop. gnet's main reactor
// accepts and queues each new connection to a loop; Engine.Stop queues
// the loops' exit, and a connection accepted after that is queued behind
// the exit, never registered and never closed: its client waits for its
// handshake timeout. Shut down, the listener resets what its backlog
// holds and refuses what comes; the reactor's next accept fails, and it
// stops the engine itself, after queuing what it accepted before.
// Waiting for that (OnShutdown) keeps every accepted connection ahead of
// the loops' exit. A bounded wait: if the reactor does not notice,
// Engine.Stop stops it. The duplicate of the listener was taken in OnBoot,
// on gnet's goroutine before it could close its own (a Dup here would race
// with that close), and is closed when gnet.Run returns.
func (s *Server) stopAccepting() {
	s.mu.Lock()
	fd := s.lnFD
	var err error
	if fd >= 0 {
		err = unix.Shutdown(fd, unix.SHUT_RD)
	}
	s.mu.Unlock()
	if fd < 0 || err != nil {
		s.log.Debug("netio: shut down listener", "err", err)
		return
	}
	select {
	case <-s.shutdown:
	case <-s.done:
	case <-time.After(time.Second):
	}
}

// NumConns is the number of open connections.
func (s *Server) NumConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) track(c *Conn) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// closeIdle closes connections that sent nothing for IdleTimeout.
func (s *Server) closeIdle(now time.Time) {
	limit := now.Add(-s.opts.IdleTimeout).UnixNano()
	var idle []*Conn
	s.mu.Lock()
	for c := range s.conns {
		if c.lastRead.Load() < limit {
			idle = append(idle, c)
		}
	}
	s.mu.Unlock()
	for _, c := range idle {
		c.Close(fmt.Errorf("%w: nothing read for %v", ErrIdleTimeout, s.opts.IdleTimeout))
	}
}

// tickInterval is how often OnTick runs: often enough to close idle
// connections within a quarter of the timeout late.
func (s *Server) tickInterval() time.Duration {
	if s.opts.IdleTimeout <= 0 {
		return time.Hour
	}
	return min(max(s.opts.IdleTimeout/4, 5*time.Millisecond), time.Second)
}

// listenerAddr reads the bound address from a duplicate of the listener,
// which it keeps for stopAccepting.
func (s *Server) listenerAddr(eng gnet.Engine) (net.Addr, error) {
	fd, err := eng.Dup()
	if err != nil {
		return nil, fmt.Errorf("dup listener: %w", err)
	}
	s.mu.Lock()
	s.lnFD = fd
	s.mu.Unlock()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("listener address: %w", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(append([]byte(nil), a.Addr[:]...)), Port: a.Port}, nil
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(append([]byte(nil), a.Addr[:]...)), Port: a.Port}, nil
	default:
		return nil, fmt.Errorf("listener address: unexpected %T", sa)
	}
}
