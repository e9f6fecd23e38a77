package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is one proxy instance: a binary listener (Serve), a web handler
// (HTTPHandler) and the pooled broker connections lookups share.
type Proxy struct {
	cfg     Config
	reg     *registry
	m       *metrics
	pool    *pool
	http    *http.Client
	lookups chan struct{} // semaphore: maxConcurrentLookupRequests

	ctx    context.Context
	cancel context.CancelFunc
	active atomic.Int64
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		listeners []net.Listener
		conns     map[net.Conn]struct{}
		// direct maps each client in direct mode to its broker's address,
		// so its connection closes when that broker leaves (closeDirectTo).
		direct map[*clientConn]string
		closed bool
	}
}

// New starts discovery (reading the registered brokers once) and returns
// a proxy with no listener yet.
func New(ctx context.Context, cfg Config) (*Proxy, error) {
	cfg = cfg.withDefaults()
	reg, err := newRegistry(cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{cfg: cfg, reg: reg, ctx: pctx, cancel: cancel,
		lookups: make(chan struct{}, cfg.MaxConcurrentLookupRequests)}
	p.mu.conns = map[net.Conn]struct{}{}
	p.mu.direct = map[*clientConn]string{}
	// A broker that died, stopped or lost its session keeps its clients'
	// TCP connections through the proxy open (a SIGSTOPped one for as long
	// as it is stopped): the clients would wait for their keep-alive. Once
	// its registration is gone its bundles are free, so its clients are
	// sent to look their topics up again at once. Set before the registry
	// starts: its watch calls it from then on.
	reg.left = p.closeDirectTo
	if err := reg.start(pctx); err != nil {
		cancel()
		return nil, err
	}
	p.m = newMetrics(cfg.Registry)
	p.pool = newPool(p)
	go p.pool.sweepIdle(pctx)
	p.http = p.httpClient()
	return p, nil
}

// Serve listens on addr (host:port) and accepts clients in the background.
func (p *Proxy) Serve(addr string) (net.Addr, error) {
	return p.serve(addr, nil)
}

// ServeTLS is Serve over TLS (servicePortTls): the same protocol after
// the handshake, which must finish within HandshakeTimeout.
func (p *Proxy) ServeTLS(addr string, cfg *tls.Config) (net.Addr, error) {
	return p.serve(addr, cfg)
}

func (p *Proxy) serve(addr string, tlsCfg *tls.Config) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		ln.Close()
		return nil, errors.New("proxy: closed")
	}
	p.mu.listeners = append(p.mu.listeners, ln)
	p.mu.Unlock()
	p.wg.Add(1)
	go p.acceptLoop(ln, tlsCfg)
	return ln.Addr(), nil
}

func (p *Proxy) acceptLoop(ln net.Listener, tlsCfg *tls.Config) {
	defer p.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: wait rather than spin.
			p.cfg.Logger.Warn("proxy: accept failed", "err", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if p.active.Add(1) > int64(p.cfg.MaxConcurrentInboundConnections) {
			p.active.Add(-1)
			p.m.rejected.Inc()
			c.Close()
			continue
		}
		p.m.newConns.Inc()
		p.m.active.Inc()
		if !p.track(c) {
			p.release(c)
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.release(c)
			if tlsCfg != nil {
				if c = p.handshake(c, tlsCfg); c == nil {
					return
				}
			}
			newClientConn(p, c).serve()
		}()
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return false
	}
	p.mu.conns[c] = struct{}{}
	return true
}

// directTo records that c forwards to the broker at target (host:port);
// the returned func forgets it.
func (p *Proxy) directTo(c *clientConn, target string) (done func()) {
	p.mu.Lock()
	p.mu.direct[c] = target
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.mu.direct, c)
		p.mu.Unlock()
	}
}

// closeDirectTo closes the client connections forwarded to the brokers at
// addrs, which left the registry.
func (p *Proxy) closeDirectTo(addrs map[string]bool) {
	p.mu.Lock()
	var closing []*clientConn
	for c, target := range p.mu.direct {
		if addrs[target] {
			closing = append(closing, c)
		}
	}
	p.mu.Unlock()
	for _, c := range closing {
		c.conn.Close()
	}
	if len(closing) > 0 {
		p.cfg.Logger.Warn("proxy: a broker left the registry; closed the client connections forwarded to it, so they look their topics up again",
			"brokers", strings.Join(slices.Sorted(maps.Keys(addrs)), ","), "connections", len(closing))
	}
}

func (p *Proxy) release(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.mu.conns, c)
	p.mu.Unlock()
	p.active.Add(-1)
	p.m.active.Dec()
}

// Close stops accepting, closes every client connection (and so their
// broker connections) and the pool, and waits for the goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.closed = true
	for _, ln := range p.mu.listeners {
		ln.Close()
	}
	for c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	p.pool.close()
	p.wg.Wait()
	p.reg.close()
	return nil
}

// handshake runs the TLS server handshake on c; nil (c closed and the
// failure logged with the remote address) when it fails.
func (p *Proxy) handshake(c net.Conn, cfg *tls.Config) net.Conn {
	tc := tls.Server(c, cfg)
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		p.m.tlsFailures.Inc()
		p.cfg.Logger.Warn("proxy: TLS handshake failed; connection closed", "client", c.RemoteAddr().String(), "err", err)
		return nil
	}
	return tc
}

// ActiveConnections is the number of client connections open now.
func (p *Proxy) ActiveConnections() int { return int(p.active.Load()) }
