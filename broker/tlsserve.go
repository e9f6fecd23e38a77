package broker

// The TLS binary port (brokerServicePortTls): netio's TLS server (Go's
// crypto/tls, a reader and a writer goroutine per connection) serving the
// same protocol handler (serverConn) as the plaintext event loops
// (server.go), through the transport interface. What it does with bad
// handshakes, slow readers and closes is netio/tls.go's.

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/magnetar-io/magnetar/netio"
	"github.com/magnetar-io/magnetar/wire"
)

const (
	// tlsWriteHighWater: a connection with more answers queued is
	// Congested, and dispatch to it stops, until it drains to half.
	tlsWriteHighWater = 1 << 20
	// tlsMaxQueued closes a connection whose client does not read what
	// it asked for (PONGs to a PING flood): dispatch stops at the high
	// water mark (checked before each entry, so each consumer adds at
	// most one entry past it), so only such a client gets here.
	tlsMaxQueued = 256 << 20
)

// TLSServer is a TLS binary-protocol listener.
type TLSServer struct {
	s *netio.TLSServer
}

// ServeTLS listens for Pulsar clients over TLS on addr with cfg (port 0
// picks one; see Addr). Lookups then answer this port as
// brokerServiceUrlTls.
func (b *Broker) ServeTLS(addr string, cfg *tls.Config) (*TLSServer, error) {
	s, err := netio.ListenTLS(addr, netio.TLSOptions{Config: cfg, MaxFrameSize: b.cfg.MaxMessageSize + wire.FramePadding,
		IdleTimeout: 2 * b.cfg.KeepAliveInterval, HighWater: tlsWriteHighWater, MaxQueued: tlsMaxQueued,
		MaxConns: b.cfg.MaxConnections, MaxConnsPerIP: b.cfg.MaxConnectionsPerIP,
		What: "broker TLS", Logger: b.log},
		func(c *netio.TLSConn) (func([]byte) error, func(error)) {
			sc := b.newConn(c)
			return sc.handleFrame, sc.closedByNetwork
		})
	if err != nil {
		return nil, err
	}
	advertised := b.cfg.AdvertisedAddressTLS
	if advertised == "" {
		advertised = s.Addr().String()
	}
	b.advertisedTLS.Store(&advertised)
	return &TLSServer{s: s}, nil
}

// Addr is the listening address.
func (s *TLSServer) Addr() net.Addr { return s.s.Addr() }

// Close stops listening, closes every connection and waits (up to ctx)
// for their goroutines.
func (s *TLSServer) Close(ctx context.Context) error { return s.s.Close(ctx) }
