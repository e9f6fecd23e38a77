package ledger

import (
	"context"
	"errors"
	"fmt"
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

// AddressBook resolves a bookie id to its protocol address.
type AddressBook interface {
	Address(bookieID string) (string, bool)
}

// NetTransport is the real Transport: one pipelined connection per bookie,
// dialed on first use and again after it breaks.
type NetTransport struct {
	book AddressBook
	opts client.Options

	mu    sync.Mutex
	conns map[string]*netConn
}

type netConn struct {
	ready chan struct{} // closed once dialed (or failed)
	cl    *client.Client
	err   error
}

// NewNetTransport returns a transport resolving bookies through book.
func NewNetTransport(book AddressBook, opts client.Options) *NetTransport {
	return &NetTransport{book: book, opts: opts, conns: make(map[string]*netConn)}
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
		addr, ok := t.book.Address(bookieID)
		if !ok {
			c.err = fmt.Errorf("%w: bookie %s is not registered", client.ErrDisconnected, bookieID)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.cl, c.err = client.Dial(ctx, addr, t.opts)
		if c.err != nil {
			c.err = fmt.Errorf("%w: %v", client.ErrDisconnected, c.err)
		}
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
