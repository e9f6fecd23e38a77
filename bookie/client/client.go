// Package client is a connection to one bookie: pipelined requests over
// one TCP connection, answered out of order and matched by request id. The
// ledger client builds quorums on top of it; the perf tool and tests use it
// directly.
//
// Lock rules: Client.mu guards the pending-call map, the write queue and
// the closed state. Callbacks run without it, on the reader goroutine (or
// on the goroutine that failed the connection).
package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// Errors a request can end with. Status errors from the bookie match these
// with errors.Is.
var (
	ErrNoLedger        = errors.New("bookie: no such ledger")
	ErrNoEntry         = errors.New("bookie: no such entry")
	ErrFenced          = errors.New("bookie: ledger fenced")
	ErrUnauthorized    = errors.New("bookie: master key mismatch")
	ErrReadOnly        = errors.New("bookie: read-only")
	ErrBadRequest      = errors.New("bookie: bad request")
	ErrIO              = errors.New("bookie: I/O error")
	ErrTooManyRequests = errors.New("bookie: too many requests")
	ErrCorrupt         = errors.New("bookie: corrupt entry")
	ErrShuttingDown    = errors.New("bookie: shutting down")
	// ErrTooLarge: the bookie refused this request as over its frame or
	// entry limit; the bookie and the connection are fine.
	ErrTooLarge = errors.New("bookie: request too large")
	// ErrDisconnected: the connection broke before the answer came; the
	// request may or may not have been applied.
	ErrDisconnected = errors.New("bookie: connection lost")
)

// StatusError returns the error for a response status (nil for OK).
func StatusError(s bkproto.Status) error {
	switch s {
	case bkproto.StatusOK:
		return nil
	case bkproto.StatusNoLedger:
		return ErrNoLedger
	case bkproto.StatusNoEntry:
		return ErrNoEntry
	case bkproto.StatusFenced:
		return ErrFenced
	case bkproto.StatusUnauthorized:
		return ErrUnauthorized
	case bkproto.StatusReadOnly:
		return ErrReadOnly
	case bkproto.StatusBadRequest:
		return ErrBadRequest
	case bkproto.StatusTooManyRequests:
		return ErrTooManyRequests
	case bkproto.StatusCorrupt:
		return ErrCorrupt
	case bkproto.StatusShuttingDown:
		return ErrShuttingDown
	case bkproto.StatusTooLarge:
		return ErrTooLarge
	}
	return fmt.Errorf("%w (status %d)", ErrIO, uint16(s))
}

// Callback gets a request's response, or the error that ended it (a
// status error, ErrDisconnected). resp's slices are owned by the callee.
type Callback func(resp *bkproto.Response, err error)

// Options configure a Client.
type Options struct {
	// DialTimeout bounds connecting (default 10 s).
	DialTimeout time.Duration
	// MaxFrameSize bounds a response frame (default
	// bkproto.DefaultMaxFrameSize: room for the largest entry bookies with
	// the default limit store, and its answer's fields).
	MaxFrameSize int
	// TLS, when set, makes Dial speak TLS (to a bookie's TLS port,
	// bookiePortTls): the bookie's certificate is verified against
	// RootCAs for the host of addr unless ServerName says otherwise, and
	// Certificates (or GetClientCertificate) answer a bookie that asks for
	// a client certificate.
	TLS *tls.Config
}

// Client is one connection to a bookie. Safe for concurrent use.
type Client struct {
	addr    string
	conn    net.Conn
	maxSize int
	wake    chan struct{} // the writer has queued frames to send
	done    chan struct{} // closed when the connection is finished

	mu struct {
		sync.Mutex
		nextID  uint64
		pending map[uint64]Callback
		queue   net.Buffers
		err     error // set once: the reason the connection ended
	}
}

// Dial connects to the bookie at addr.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.MaxFrameSize <= 0 {
		opts.MaxFrameSize = bkproto.DefaultMaxFrameSize
	}
	d := net.Dialer{Timeout: opts.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bookie client: dial %s: %w", addr, err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if opts.TLS != nil {
		if conn, err = handshake(ctx, conn, addr, opts); err != nil {
			return nil, err
		}
	}
	c := &Client{addr: addr, conn: conn, maxSize: opts.MaxFrameSize, wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.mu.pending = make(map[uint64]Callback)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// handshake runs the client side of TLS over conn within DialTimeout.
func handshake(ctx context.Context, conn net.Conn, addr string, opts Options) (net.Conn, error) {
	cfg := opts.TLS.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	hctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("bookie client: TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// Addr is the bookie's address.
func (c *Client) Addr() string { return c.addr }

// Send queues a request (its RequestID is assigned here) and calls cb
// with the answer. The request's slices must not change until cb runs.
func (c *Client) Send(r *bkproto.Request, cb Callback) {
	c.mu.Lock()
	if err := c.mu.err; err != nil {
		c.mu.Unlock()
		cb(nil, err)
		return
	}
	c.mu.nextID++
	r.RequestID = c.mu.nextID
	c.mu.pending[r.RequestID] = cb
	c.mu.queue = append(c.mu.queue, bkproto.AppendRequest(nil, r))
	if (r.Op == bkproto.OpAdd || r.Op == bkproto.OpWriteLAC) && len(r.Data) > 0 {
		c.mu.queue = append(c.mu.queue, r.Data)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Do sends a request and waits for its answer or ctx. A status other
// than OK is returned as its error, with the response.
func (c *Client) Do(ctx context.Context, r *bkproto.Request) (*bkproto.Response, error) {
	type result struct {
		resp *bkproto.Response
		err  error
	}
	ch := make(chan result, 1)
	c.Send(r, func(resp *bkproto.Response, err error) { ch <- result{resp, err} })
	select {
	case res := <-ch:
		return res.resp, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("bookie %s: %s ledger %d entry %d: %w", c.addr, r.Op, r.LedgerID, r.EntryID, ctx.Err())
	}
}

func (c *Client) writeLoop() {
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		}
		c.mu.Lock()
		bufs := c.mu.queue
		c.mu.queue = nil
		c.mu.Unlock()
		if len(bufs) == 0 {
			continue
		}
		if _, err := bufs.WriteTo(c.conn); err != nil {
			// The peer's reason, if it sent one, is on the read side: a
			// TLS 1.3 bookie that refuses our certificate does so after
			// our handshake returned, with an alert before it closes.
			// Let the reader report it, for a bounded time.
			_ = c.conn.SetReadDeadline(time.Now().Add(time.Second))
			select {
			case <-c.done:
			case <-time.After(2 * time.Second):
			}
			c.fail(fmt.Errorf("%w: write to %s: %v", ErrDisconnected, c.addr, err))
			return
		}
	}
}

func (c *Client) readLoop() {
	br := bufio.NewReaderSize(c.conn, 64<<10)
	var prefix [4]byte
	for {
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			c.fail(fmt.Errorf("%w: read from %s: %v", ErrDisconnected, c.addr, err))
			return
		}
		size := int(binary.BigEndian.Uint32(prefix[:]))
		if size < bkproto.HeaderLen-4 || size > c.maxSize {
			c.fail(fmt.Errorf("%w: bookie %s sent a frame of %d bytes", ErrDisconnected, c.addr, size))
			return
		}
		frame := make([]byte, 4+size) // owned by the callback
		copy(frame, prefix[:])
		if _, err := io.ReadFull(br, frame[4:]); err != nil {
			c.fail(fmt.Errorf("%w: read from %s: %v", ErrDisconnected, c.addr, err))
			return
		}
		resp := new(bkproto.Response)
		if err := bkproto.DecodeResponse(frame, resp); err != nil {
			c.fail(fmt.Errorf("%w: bookie %s: %v", ErrDisconnected, c.addr, err))
			return
		}
		c.mu.Lock()
		cb := c.mu.pending[resp.RequestID]
		delete(c.mu.pending, resp.RequestID)
		c.mu.Unlock()
		if cb == nil {
			c.fail(fmt.Errorf("%w: bookie %s answered unknown request %d", ErrDisconnected, c.addr, resp.RequestID))
			return
		}
		cb(resp, StatusError(resp.Status))
	}
}

// fail ends the connection once, failing every pending request with err.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.mu.err != nil {
		c.mu.Unlock()
		return
	}
	c.mu.err = err
	pending := c.mu.pending
	c.mu.pending = nil
	c.mu.queue = nil
	c.mu.Unlock()
	close(c.done)
	_ = c.conn.Close()
	for _, cb := range pending {
		cb(nil, err)
	}
}

// Err returns why the connection ended, or nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

// Close closes the connection; pending requests fail with ErrDisconnected.
func (c *Client) Close() error {
	c.fail(fmt.Errorf("%w: closed by the client", ErrDisconnected))
	return nil
}
