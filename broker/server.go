package broker

import (
	"fmt"

	"github.com/magnetar-io/magnetar/netio"
	"github.com/magnetar-io/magnetar/wire"
)

// clientInFlightBytes is what a well-behaved Pulsar client may have sent
// and not yet had acknowledged: the Java and Go clients bound it with
// their memory limit, 64 MiB by default. gnet cannot stop reading a
// socket, so a connection paused for back-pressure
// (maxPendingPublishRequestsPerConnection) still receives that much; only
// beyond it is the client ignoring back-pressure. A smaller bound
// disconnected ordinary producers of large messages.
const clientInFlightBytes = 64 << 20

// Serve listens for Pulsar binary-protocol clients on addr (host:port;
// port 0 picks one, see the returned server's Addr).
func (b *Broker) Serve(addr string) (*netio.Server, error) {
	frame := b.cfg.MaxMessageSize + wire.FramePadding
	srv, err := netio.Listen(netHandler{b}, netio.Options{Addr: addr, Multicore: true,
		MaxFrameSize: frame, MaxInboundBuffered: clientInFlightBytes + 2*frame, Logger: b.log,
		IdleTimeout: 2 * b.cfg.KeepAliveInterval,
		MaxConns:    b.cfg.MaxConnections, MaxConnsPerIP: b.cfg.MaxConnectionsPerIP})
	if err != nil {
		return nil, fmt.Errorf("broker: listen on %s: %w", addr, err)
	}
	advertised := b.cfg.AdvertisedAddress
	if advertised == "" {
		advertised = srv.Addr().String()
	}
	b.advertised.Store(&advertised)
	return srv, nil
}

// netHandler adapts the network layer's callbacks to connections.
type netHandler struct{ b *Broker }

func (h netHandler) OnOpen(c *netio.Conn) { c.SetContext(h.b.newConn(c)) }

func (h netHandler) OnFrame(c *netio.Conn, frame []byte) error {
	return c.Context().(*serverConn).handleFrame(frame)
}

func (h netHandler) OnClose(c *netio.Conn, err error) {
	if sc, ok := c.Context().(*serverConn); ok {
		sc.closedByNetwork(err)
	}
}

// advertisedAddress is the host:port clients connect to.
func (b *Broker) advertisedAddress() string {
	if a := b.advertised.Load(); a != nil {
		return *a
	}
	return b.cfg.AdvertisedAddress
}

// brokerURLTLS is this broker's pulsar+ssl:// URL ("" without a TLS port).
func (b *Broker) brokerURLTLS() string {
	if a := b.advertisedTLS.Load(); a != nil {
		return "pulsar+ssl://" + *a
	}
	if b.cfg.AdvertisedAddressTLS != "" {
		return "pulsar+ssl://" + b.cfg.AdvertisedAddressTLS
	}
	return ""
}
