package proxy

// The proxy's own connections to brokers for lookup-type requests (as
// Pulsar's LookupProxyHandler uses the proxy's client pool): one per
// broker and principal (the client role named as original_principal, so
// the broker authorizes each lookup as its client; one principal "" with
// authentication off), shared by that principal's clients, requests
// multiplexed by request ids the proxy assigns (rewritten back to the
// client's on the answer). A connection that fails fails its pending
// requests and leaves the pool; the next request dials again. One unused
// for poolIdleTimeout is closed, so principals that went away do not keep
// connections.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// poolIdleTimeout closes a pooled connection no request used this long.
const poolIdleTimeout = 2 * time.Minute

// session is whom a pooled connection speaks for.
type session struct {
	principal string
	auth      clientAuth // forwarded with forwardAuthorizationCredentials
}

// poolKey names a pooled connection: the broker and the principal.
type poolKey struct{ hostport, principal string }

type pool struct {
	p  *Proxy
	mu struct {
		sync.Mutex
		conns  map[poolKey]*backendConn
		closed bool
	}
}

func newPool(p *Proxy) *pool {
	pl := &pool{p: p}
	pl.mu.conns = map[poolKey]*backendConn{}
	return pl
}

// sweepIdle closes connections unused for poolIdleTimeout, until ctx ends.
func (pl *pool) sweepIdle(ctx context.Context) {
	tick := time.NewTicker(poolIdleTimeout / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			pl.mu.Lock()
			var idle []*backendConn
			for _, b := range pl.mu.conns {
				if b.idleSince(now) > poolIdleTimeout {
					idle = append(idle, b)
				}
			}
			pl.mu.Unlock()
			for _, b := range idle {
				b.fail(errors.New("proxy: idle pooled connection closed"))
			}
		}
	}
}

func (pl *pool) close() {
	pl.mu.Lock()
	pl.mu.closed = true
	conns := pl.mu.conns
	pl.mu.conns = map[poolKey]*backendConn{}
	pl.mu.Unlock()
	for _, b := range conns {
		b.fail(errors.New("proxy: closed"))
	}
}

// requestAny sends cmd to the brokers in turn until one answers (at most
// one try per registered broker).
func (pl *pool) requestAny(ctx context.Context, s session, cmd *pb.BaseCommand) (*pb.BaseCommand, error) {
	n := max(1, len(pl.p.reg.brokers()))
	var err error
	for range n {
		var b brokerInfo
		if b, err = pl.p.reg.pick(); err != nil {
			return nil, err
		}
		var resp *pb.BaseCommand
		if resp, err = pl.request(ctx, b.service, s, cmd); err == nil || ctx.Err() != nil {
			return resp, err
		}
	}
	return nil, err
}

// request sends a copy of cmd to the broker at hostport and waits for its
// answer.
func (pl *pool) request(ctx context.Context, hostport string, s session, cmd *pb.BaseCommand) (*pb.BaseCommand, error) {
	b, err := pl.get(ctx, hostport, s)
	if err != nil {
		return nil, err
	}
	return b.request(ctx, proto.Clone(cmd).(*pb.BaseCommand))
}

func (pl *pool) get(ctx context.Context, hostport string, s session) (*backendConn, error) {
	key := poolKey{hostport: hostport, principal: s.principal}
	pl.mu.Lock()
	if pl.mu.closed {
		pl.mu.Unlock()
		return nil, errors.New("proxy: closed")
	}
	b := pl.mu.conns[key]
	if b == nil {
		b = &backendConn{pool: pl, key: key, hostport: hostport, session: s, ready: make(chan struct{}),
			pending: map[uint64]chan *pb.BaseCommand{}}
		b.lastUsed.Store(time.Now().UnixNano())
		pl.mu.conns[key] = b
		go b.dial()
	}
	pl.mu.Unlock()
	select {
	case <-b.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.err != nil {
		return nil, b.err
	}
	return b, nil
}

func (pl *pool) drop(b *backendConn) {
	pl.mu.Lock()
	if pl.mu.conns[b.key] == b {
		delete(pl.mu.conns, b.key)
	}
	pl.mu.Unlock()
}

type backendConn struct {
	pool     *pool
	key      poolKey
	hostport string
	session  session
	lastUsed atomic.Int64  // unix nanoseconds of the last request
	ready    chan struct{} // closed once dialled (err says how)
	err      error         // set before ready is closed
	conn     net.Conn      // set before ready is closed
	br       *bufio.Reader
	wmu      sync.Mutex

	mu      sync.Mutex
	pending map[uint64]chan *pb.BaseCommand
	nextID  uint64
	failed  error
}

// dial connects, checks the target and performs the handshake as the proxy.
func (b *backendConn) dial() {
	cfg := b.pool.p.cfg
	ctx, cancel := context.WithTimeout(b.pool.p.ctx, cfg.HandshakeTimeout)
	defer cancel()
	err := b.connect(ctx)
	if err != nil {
		b.err = fmt.Errorf("proxy: broker %s: %w", b.hostport, err)
		b.pool.drop(b)
		close(b.ready)
		return
	}
	close(b.ready)
	b.readLoop()
}

func (b *backendConn) connect(ctx context.Context) error {
	cfg := b.pool.p.cfg
	conn, err := b.pool.p.dialBroker(ctx, b.hostport)
	if err != nil {
		return err
	}
	connect := &pb.CommandConnect{ClientVersion: ptr(cfg.Version), ProtocolVersion: ptr(int32(maxProtocolVersion))}
	err = b.pool.p.brokerConnect(connect, b.session.principal, b.session.auth)
	var frame []byte
	if err == nil {
		frame, err = encodeFrame(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: connect})
	}
	if err != nil {
		conn.Close()
		return err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	br := bufio.NewReaderSize(conn, 16<<10)
	if _, err = conn.Write(frame); err == nil {
		var cmd *pb.BaseCommand
		if cmd, _, err = readFrame(br, cfg.MaxFrameSize); err == nil && cmd.GetType() != pb.BaseCommand_CONNECTED {
			err = fmt.Errorf("answered CONNECT with %s: %s", cmd.GetType(), cmd.GetError().GetMessage())
		}
	}
	if err != nil {
		conn.Close()
		return err
	}
	_ = conn.SetDeadline(time.Time{})
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed != nil { // the pool closed meanwhile
		conn.Close()
		return b.failed
	}
	b.conn, b.br = conn, br
	return nil
}

// readLoop delivers answers by request id and answers PING.
func (b *backendConn) readLoop() {
	for {
		cmd, _, err := readFrame(b.br, b.pool.p.cfg.MaxFrameSize)
		if err != nil {
			b.fail(fmt.Errorf("proxy: connection to broker %s: %w", b.hostport, err))
			return
		}
		switch cmd.GetType() {
		case pb.BaseCommand_PING:
			_ = b.write(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
			continue
		case pb.BaseCommand_PONG:
			continue
		}
		id, ok := wire.RequestID(cmd)
		if !ok {
			continue
		}
		b.mu.Lock()
		ch := b.pending[id]
		delete(b.pending, id)
		b.mu.Unlock()
		if ch != nil {
			ch <- cmd // buffered: never blocks
		}
	}
}

func (b *backendConn) write(cmd *pb.BaseCommand) error {
	frame, err := encodeFrame(cmd)
	if err != nil {
		return err
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	_ = b.conn.SetWriteDeadline(time.Now().Add(b.pool.p.cfg.LookupTimeout))
	_, err = b.conn.Write(frame)
	return err
}

// idleSince is how long no request used the connection (0 while one is
// pending).
func (b *backendConn) idleSince(now time.Time) time.Duration {
	b.mu.Lock()
	busy := len(b.pending) > 0
	b.mu.Unlock()
	if busy {
		return 0
	}
	return now.Sub(time.Unix(0, b.lastUsed.Load()))
}

func (b *backendConn) request(ctx context.Context, cmd *pb.BaseCommand) (*pb.BaseCommand, error) {
	b.lastUsed.Store(time.Now().UnixNano())
	ch := make(chan *pb.BaseCommand, 1)
	b.mu.Lock()
	if b.failed != nil {
		b.mu.Unlock()
		return nil, b.failed
	}
	b.nextID++
	id := b.nextID
	b.pending[id] = ch
	b.mu.Unlock()
	wire.SetRequestID(cmd, id)
	if err := b.write(cmd); err != nil {
		b.fail(err)
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			b.mu.Lock()
			defer b.mu.Unlock()
			return nil, b.failed
		}
		return resp, nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return nil, fmt.Errorf("proxy: broker %s did not answer: %w", b.hostport, ctx.Err())
	}
}

// fail closes the connection, leaves the pool and fails what is pending.
func (b *backendConn) fail(err error) {
	b.pool.drop(b)
	b.mu.Lock()
	if b.failed == nil {
		b.failed = err
	}
	pending := b.pending
	b.pending = map[uint64]chan *pb.BaseCommand{}
	conn := b.conn
	b.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	for _, ch := range pending { // wakes the waiters with no answer
		close(ch)
	}
}
