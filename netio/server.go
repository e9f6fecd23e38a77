package netio

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
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

// Server is a listener of ours feeding a gnet engine serving one Handler.
// netio accepts connections itself, so that it decides what a failed
// accept means: gnet's own acceptor stops its engine on any accept error
// (EMFILE in a connection flood), leaving the port refusing everything.
// gnet runs the event loops: reads, writes and the handler's callbacks.
type Server struct {
	h    Handler
	opts Options // normalized
	log  *slog.Logger
	cli  *gnet.Client // the event loops; connections are enrolled into it
	ln   net.Listener
	addr net.Addr

	done     chan struct{} // closed when the acceptor has returned
	stopping atomic.Bool
	stopOnce sync.Once
	stopErr  error         // Client.Stop's, written before stopped is closed
	stopped  chan struct{} // closed when the loops have stopped
	closedCh chan struct{} // always closed: Drained of a connection that is not congested
	adm      *admission    // connection limits (accept.go)

	mu    sync.Mutex
	conns map[*Conn]struct{} // guarded by mu: open connections

	// beforeKick, when set (tests, before any connection), runs in a
	// writer's kick just before it queues the loop task.
	beforeKick func()
}

// Listen starts a server for h and returns once it accepts connections.
func Listen(h Handler, opts Options) (*Server, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	lim, err := newLimits(opts.MaxConns, opts.MaxConnsPerIP, opts.FDHeadroom)
	if err != nil {
		return nil, err
	}
	s := &Server{
		h:        h,
		opts:     opts,
		log:      opts.Logger,
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
		closedCh: make(chan struct{}),
		conns:    make(map[*Conn]struct{}),
		adm:      newAdmission(lim, opts.Logger),
	}
	close(s.closedCh)
	if err := s.start(); err != nil {
		return nil, fmt.Errorf("netio: listen on %s: %w", opts.Addr, err)
	}
	acc := newAcceptor(s.ln, s.adm, s.addr.String())
	go func() {
		defer close(s.done)
		acc.run(s.enroll)
	}()
	return s, nil
}

// enroll hands an admitted connection to the event loops. EnrollContext
// duplicates the descriptor, closes nc (also on error), and returns once
// OnOpen has run.
func (s *Server) enroll(nc net.Conn) {
	remote := nc.RemoteAddr()
	if _, err := s.cli.EnrollContext(nc, nil); err != nil {
		s.adm.release(remote)
		s.adm.noteRefused(time.Now(), s.addr.String(), fmt.Errorf("%w: %v", ErrConnRefused, err))
	}
}

// track records c as open (OnOpen).
func (s *Server) track(c *Conn) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

// forget removes c and gives back its slot if releaseSlot has not
// (OnClose).
func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.releaseSlot(c)
}

// releaseSlot gives back c's admission slot once. It runs before the
// handler's OnClose, so a handler that saw a connection close may count
// on its slot being free (a client reconnecting at once is not refused).
func (s *Server) releaseSlot(c *Conn) {
	if c.slotFreed.CompareAndSwap(false, true) {
		s.adm.release(c.remote)
	}
}

// start opens the listener and starts the event loops.
func (s *Server) start() error {
	o := s.opts
	cli, err := gnet.NewClient(&engineHandler{s: s},
		gnet.WithMulticore(o.Multicore),
		gnet.WithNumEventLoop(o.NumEventLoop),
		gnet.WithReadBufferCap(o.ReadBufferCap),
		gnet.WithTicker(true),
		// No WithTCPNoDelay: Go sets TCP_NODELAY on every accepted
		// connection, and gnet's enrolment leaks the duplicate descriptor
		// when setting it again fails.
		gnet.WithLogger(gnetLogger{l: s.log, stopping: &s.stopping}),
	)
	if err != nil {
		return err
	}
	network, addr, _ := strings.Cut(o.Addr, "://") // normalize made it tcp, tcp4 or tcp6
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	if err := cli.Start(); err != nil {
		ln.Close()
		return err
	}
	s.cli, s.ln, s.addr = cli, ln, ln.Addr()
	return nil
}

// Addr is the address the server listens on (the real port when Options.Addr
// asked for port 0).
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops accepting, closes every connection (OnClose gets
// ErrServerClosed; queued writes fail with ErrConnClosed), and waits for the
// loops to stop, or for ctx. Safe to call more than once, but not from a
// Handler callback (the loop it runs on could not stop).
func (s *Server) Close(ctx context.Context) error {
	s.stopping.Store(true)
	s.stopOnce.Do(func() {
		// Closing the listener resets what its backlog holds; the
		// acceptor finishes the enrolment under way (its connection is
		// then closed with the others) and returns.
		s.ln.Close()
		go func() {
			<-s.done
			s.stopErr = s.cli.Stop()
			close(s.stopped)
		}()
	})
	select {
	case <-s.stopped:
		return s.stopErr
	case <-ctx.Done():
		return fmt.Errorf("netio: close server on %s: %w", s.addr, ctx.Err())
	}
}

// NumConns is the number of open connections.
func (s *Server) NumConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
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
