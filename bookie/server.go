package bookie

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/netio"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// ServerOptions configure the network side of a bookie. Zero values take
// the defaults; the names in parentheses are BookKeeper's config keys.
type ServerOptions struct {
	// Addr to listen on for plaintext, e.g. "127.0.0.1:3181" (bookiePort);
	// empty: no plaintext port (then TLSAddr is required).
	Addr string
	// TLSAddr to listen on for TLS (bookiePortTls, our extension: see the
	// package doc); empty: no TLS port. TLS is its configuration.
	TLSAddr string
	TLS     *tls.Config
	// AddWorkers run adds (numAddWorkerThreads; default 2). A ledger's
	// adds always go to the same worker, so they reach the journal in order.
	AddWorkers int
	// ReadWorkers run reads (numReadWorkerThreads; default 8).
	ReadWorkers int
	// MaxPendingAdds bounds each add worker's queue
	// (maxPendingAddRequestsPerThread; default 10000). A full queue stops
	// reading the connection that would overfill it.
	MaxPendingAdds int
	// MaxPendingReads bounds the read queue (maxPendingReadRequestsPerThread;
	// default 10000 per read worker).
	MaxPendingReads int
	// NumEventLoops (default 2).
	NumEventLoops int
	// MaxFrameSize (nettyMaxFrameSizeBytes; default
	// bkproto.DefaultMaxFrameSize, above the largest entry a broker with the
	// default maxMessageSize stores). A request over it is answered
	// StatusTooLarge on its own; only a frame over twice it closes the
	// connection (it cannot be a request any bookie takes).
	MaxFrameSize int
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Metrics, when set, records request counts and latencies.
	Metrics *Metrics
}

func (o ServerOptions) withDefaults() ServerOptions {
	if o.AddWorkers <= 0 {
		o.AddWorkers = 2
	}
	if o.ReadWorkers <= 0 {
		o.ReadWorkers = 8
	}
	if o.MaxPendingAdds <= 0 {
		o.MaxPendingAdds = 10000
	}
	if o.MaxPendingReads <= 0 {
		o.MaxPendingReads = 10000 * o.ReadWorkers
	}
	if o.NumEventLoops <= 0 {
		o.NumEventLoops = 2
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = bkproto.DefaultMaxFrameSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// peer is a client connection requests are answered on: a *netio.Conn
// (the plaintext port) or a *netio.TLSConn (the TLS port). Both feed the same
// handleFrame and worker queues.
type peer interface {
	// Write queues an answer; it never blocks and fails only once the
	// connection closed.
	Write(bufs ...[]byte) error
	PauseReading()
	ResumeReading()
	RemoteAddr() net.Addr
}

// task is one request with the connection to answer on. frame is an owned
// copy of the request frame: req's slices alias it.
type task struct {
	conn    peer
	req     bkproto.Request
	frame   []byte
	started time.Time
}

// Server serves a Core over the bookie protocol: plaintext on netio, TLS
// on a tlsListener, or both, into the same worker queues.
type Server struct {
	core  *Core
	opts  ServerOptions
	log   *slog.Logger
	net   *netio.Server // nil without a plaintext port
	tls   *tlsListener  // nil without a TLS port
	adds  []chan *task
	reads chan *task
	done  chan struct{} // closed by Close: workers and parked senders leave
	wg    sync.WaitGroup
	once  sync.Once
}

// Serve starts serving core; Close stops the server (not the core).
func Serve(core *Core, opts ServerOptions) (*Server, error) {
	opts = opts.withDefaults()
	if opts.Addr == "" && opts.TLSAddr == "" {
		return nil, errors.New("bookie: no port to serve: set bookiePort, bookiePortTls or both")
	}
	if opts.TLSAddr != "" && opts.TLS == nil {
		return nil, fmt.Errorf("bookie: TLS port %s without a TLS configuration (tlsCertificatePath, tlsKeyStore)", opts.TLSAddr)
	}
	s := &Server{core: core, opts: opts, log: opts.Logger, done: make(chan struct{})}
	for range opts.AddWorkers {
		q := make(chan *task, opts.MaxPendingAdds)
		s.adds = append(s.adds, q)
		s.startWorker(q)
	}
	s.reads = make(chan *task, opts.MaxPendingReads)
	for range opts.ReadWorkers {
		s.startWorker(s.reads)
	}
	if err := s.listen(); err != nil {
		_ = s.Close(context.Background())
		return nil, err
	}
	return s, nil
}

// listen opens the configured ports.
func (s *Server) listen() error {
	opts := s.opts
	if opts.Addr != "" {
		// netio reads frames up to twice the limit, so that one over it is
		// refused alone rather than closing a connection many ledgers
		// share; what a paused connection may buffer stays what it was
		// (netio's default for the limit itself).
		srv, err := netio.Listen(s, netio.Options{
			Addr: opts.Addr, NumEventLoop: opts.NumEventLoops, Logger: opts.Logger,
			MaxFrameSize: 2 * opts.MaxFrameSize, MaxInboundBuffered: 2*opts.MaxFrameSize + 1<<20,
		})
		if err != nil {
			return fmt.Errorf("bookie: listen on %s: %w", opts.Addr, err)
		}
		s.net = srv
	}
	if opts.TLSAddr != "" {
		l, err := listenTLS(s, opts.TLSAddr, opts.TLS)
		if err != nil {
			return err
		}
		s.tls = l
	}
	return nil
}

// Addr is the plaintext port's address ("" without one).
func (s *Server) Addr() string {
	if s.net == nil {
		return ""
	}
	return s.net.Addr().String()
}

// TLSAddr is the TLS port's address ("" without one).
func (s *Server) TLSAddr() string {
	if s.tls == nil {
		return ""
	}
	return s.tls.addr().String()
}

func (s *Server) startWorker(q chan *task) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.done:
				return
			case t := <-q:
				s.core.Handle(&t.req, s.replier(t))
			}
		}
	}()
}

// replier writes a response: a head with the fixed fields and the data
// slices from storage, in one vectored write (netio splits it at IOV_MAX).
func (s *Server) replier(t *task) Reply {
	return func(r *bkproto.Response) {
		_ = t.conn.Write(bkproto.ResponseBuffers(r)...) // fails only once the connection closed
		if m := s.opts.Metrics; m != nil {
			m.observeRequest(r.Op, r.Status, time.Since(t.started))
		}
	}
}

// OnOpen implements netio.Handler.
func (s *Server) OnOpen(*netio.Conn) {}

// OnClose implements netio.Handler. Requests of the connection still in
// flight finish; their answers are dropped by the closed connection.
func (s *Server) OnClose(*netio.Conn, error) {}

// OnFrame implements netio.Handler (see handleFrame).
func (s *Server) OnFrame(c *netio.Conn, frame []byte) error { return s.handleFrame(c, frame) }

// handleFrame decodes a request of either port and queues it for a
// worker. A malformed frame closes the connection (the port logs the
// reason); an op of a later build is answered StatusBadRequest and the
// connection stays, so the client can tell and what else it has in flight
// here is not lost. frame is only borrowed.
func (s *Server) handleFrame(c peer, frame []byte) error {
	if len(frame)-4 > s.opts.MaxFrameSize {
		return s.refuseTooLarge(c, frame)
	}
	t := &task{conn: c, frame: append([]byte(nil), frame...), started: time.Now()}
	if err := bkproto.DecodeRequest(t.frame, &t.req); err != nil {
		if errors.Is(err, bkproto.ErrUnknownOp) {
			s.replier(t)(&bkproto.Response{Op: t.req.Op, Status: bkproto.StatusBadRequest,
				RequestID: t.req.RequestID, LedgerID: t.req.LedgerID, EntryID: t.req.EntryID})
			return nil
		}
		return fmt.Errorf("bookie: request from %s: %w", c.RemoteAddr(), err)
	}
	var q chan *task
	switch t.req.Op {
	case bkproto.OpInfo:
		s.core.info(&t.req, s.replier(t))
		return nil
	case bkproto.OpAdd, bkproto.OpWriteLAC, bkproto.OpForceLedger:
		q = s.adds[uint64(t.req.LedgerID)%uint64(len(s.adds))]
	default:
		q = s.reads
	}
	select {
	case q <- t:
	default:
		// Queue full: stop reading this connection until the request is in.
		c.PauseReading()
		go func() {
			select {
			case q <- t:
				c.ResumeReading()
			case <-s.done:
			}
		}()
	}
	return nil
}

// refuseTooLarge answers a frame over MaxFrameSize with StatusTooLarge,
// without copying it: one oversized request must not fail the others on
// its connection. Only a frame that does not decode closes it.
func (s *Server) refuseTooLarge(c peer, frame []byte) error {
	var req bkproto.Request
	if err := bkproto.DecodeRequest(frame, &req); err != nil && !errors.Is(err, bkproto.ErrUnknownOp) {
		return fmt.Errorf("bookie: request from %s: %w", c.RemoteAddr(), err)
	}
	s.log.Warn("bookie refused a request over its frame limit (nettyMaxFrameSizeBytes)", "remote", c.RemoteAddr(),
		"op", req.Op, "ledger", req.LedgerID, "entry", req.EntryID, "size", len(frame)-4, "limit", s.opts.MaxFrameSize)
	t := &task{conn: c, started: time.Now()}
	s.replier(t)(&bkproto.Response{Op: req.Op, Status: bkproto.StatusTooLarge,
		RequestID: req.RequestID, LedgerID: req.LedgerID, EntryID: req.EntryID})
	return nil
}

// Close stops accepting connections, closes the open ones, and stops the
// workers once the queued requests are answered or ctx ends.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		var errs []error
		if s.net != nil {
			errs = append(errs, s.net.Close(ctx))
		}
		if s.tls != nil {
			errs = append(errs, s.tls.close(ctx))
		}
		err = errors.Join(errs...)
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		close(s.done)
		s.wg.Wait()
	})
	return err
}
