package ledger

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// Transport sends a request to a bookie named by its id and calls cb
// exactly once with the answer or the error that ended it. It must not
// block for long: dialing and waiting happen elsewhere. Tests wrap it to
// drop, delay and partition.
type Transport interface {
	Send(bookieID string, req *bkproto.Request, cb client.Callback)
}

// AddressBook resolves a bookie id to its registration (its endpoints).
type AddressBook interface {
	Bookie(bookieID string) (BookieInfo, bool)
}

// NetTransport is the real Transport: one pipelined connection per bookie,
// dialed on first use and again after it breaks.
type NetTransport struct {
	book AddressBook
	opts client.Options
	tls  func() *tls.Config // nil: plaintext
	// dialAt maps registered endpoints to the addresses dialed instead
	// (Config.DialAddresses); read-only after construction.
	dialAt map[string]string

	mu    sync.Mutex
	conns map[string]*netConn
}

type netConn struct {
	ready chan struct{} // closed once dialed (or failed)
	cl    *client.Client
	err   error
}

// NewNetTransport returns a transport resolving bookies through book. With
// tlsConfig it dials bookies' TLS endpoints only, with the configuration it
// returns at each dial (so reloaded files apply to new connections).
func NewNetTransport(book AddressBook, opts client.Options, tlsConfig func() *tls.Config) *NetTransport {
	return &NetTransport{book: book, opts: opts, tls: tlsConfig, conns: make(map[string]*netConn)}
}

// endpoint is the address to dial b at: its TLS endpoint when useTLS, else
// its plaintext one. A bookie without that endpoint is an error naming it:
// a client configured for TLS never falls back to plaintext.
func endpoint(b BookieInfo, useTLS bool) (string, error) {
	switch {
	case useTLS && b.TLSAddress == "":
		return "", fmt.Errorf("bookie %s has no TLS endpoint (bookiePortTls is off on it) and bookkeeperTLSClientAuthentication "+
			"is on: refusing plaintext", b.ID)
	case useTLS:
		return b.TLSAddress, nil
	case b.Address == "":
		return "", fmt.Errorf("bookie %s serves only TLS (at %s): set bookkeeperTLSClientAuthentication=true to reach it", b.ID, b.TLSAddress)
	}
	return b.Address, nil
}

// dial connects to a bookie at its endpoint.
func (t *NetTransport) dial(bookieID string) (*client.Client, error) {
	b, ok := t.book.Bookie(bookieID)
	if !ok {
		return nil, fmt.Errorf("%w: bookie %s is not registered", client.ErrDisconnected, bookieID)
	}
	addr, err := endpoint(b, t.tls != nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", client.ErrDisconnected, err)
	}
	opts := t.opts
	if t.tls != nil {
		opts.TLS = t.tls()
	}
	if at, ok := t.dialAt[addr]; ok {
		// The bookie's certificate names its registered host, not the
		// relay's or tunnel's.
		if host, _, err := net.SplitHostPort(addr); err == nil && opts.TLS != nil && opts.TLS.ServerName == "" {
			opts.TLS = opts.TLS.Clone()
			opts.TLS.ServerName = host
		}
		addr = at
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, addr, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: bookie %s: %v", client.ErrDisconnected, bookieID, err)
	}
	return cl, nil
}

func (t *NetTransport) conn(bookieID string) *netConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.conns[bookieID]
	if c != nil {
		select {
		case <-c.ready:
			if c.err == nil && c.cl.Err() == nil {
				return c
			}
		default:
			return c // still dialing
		}
	}
	c = &netConn{ready: make(chan struct{})}
	t.conns[bookieID] = c
	go func() {
		defer close(c.ready)
		c.cl, c.err = t.dial(bookieID)
	}()
	return c
}

// Send implements Transport.
func (t *NetTransport) Send(bookieID string, req *bkproto.Request, cb client.Callback) {
	c := t.conn(bookieID)
	select {
	case <-c.ready:
		if c.err != nil {
			cb(nil, c.err)
			return
		}
		c.cl.Send(req, cb)
	default:
		go func() {
			<-c.ready
			if c.err != nil {
				cb(nil, c.err)
				return
			}
			c.cl.Send(req, cb)
		}()
	}
}

// Close closes every connection.
func (t *NetTransport) Close() {
	t.mu.Lock()
	conns := t.conns
	t.conns = make(map[string]*netConn)
	t.mu.Unlock()
	for _, c := range conns {
		<-c.ready
		if c.cl != nil {
			c.cl.Close()
		}
	}
}

// isBookieFailure reports whether an error from one bookie means that
// bookie should be replaced (as opposed to the ledger being fenced or the
// request being wrong or too large).
func isBookieFailure(err error) bool {
	return !errors.Is(err, client.ErrFenced) && !errors.Is(err, client.ErrUnauthorized) && !errors.Is(err, client.ErrBadRequest) &&
		!errors.Is(err, client.ErrTooLarge)
}
