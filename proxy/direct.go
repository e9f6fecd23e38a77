package proxy

// Direct mode: after CONNECT with proxy_to_broker_url, bytes are copied
// between the client and its broker. This is the hot path.
//
// io.Copy(dst, &io.LimitedReader{R: src}) with both sides *net.TCPConn
// reaches (*TCPConn).ReadFrom, which on Linux moves the bytes with
// splice(2) through a pipe (net/splice_linux.go: a LimitedReader over a
// *TCPConn is handled): no copy into user space, no Go buffer per
// connection. The limit only bounds how long the byte counters wait for an
// update (one chunk). TestPipeUsesSplice checks the path with strace when
// strace is installed.

import (
	"context"
	"io"
	"net"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// chunk is how many bytes one splice-backed io.Copy moves before the byte
// counters are updated.
const chunk = 1 << 20

func (c *clientConn) direct(connect *pb.CommandConnect, target string) {
	target = hostOf(target)
	ctx, cancel := context.WithTimeout(c.ctx, c.p.cfg.HandshakeTimeout)
	defer cancel()
	addr, err := c.p.reg.checkTarget(ctx, target, false)
	if err != nil {
		c.p.m.refused.Inc()
		c.p.cfg.Logger.Warn("proxy: refused a client's target broker", "client", c.conn.RemoteAddr().String(),
			"target", target, "err", err)
		_ = c.sendError(0, pb.ServerError_ServiceNotReady, err.Error())
		return
	}
	var d net.Dialer
	bc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		_ = c.sendError(0, pb.ServerError_ServiceNotReady, "proxy: cannot reach broker "+target+": "+err.Error())
		return
	}
	broker := bc.(*net.TCPConn)
	defer broker.Close()
	frame, err := encodeFrame(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: c.brokerConnect(connect)})
	if err != nil {
		return
	}
	// Bytes the client sent after CONNECT, already buffered, go first.
	if n := c.br.Buffered(); n > 0 {
		rest, _ := c.br.Peek(n)
		frame = append(frame, rest...)
	}
	_ = broker.SetWriteDeadline(time.Now().Add(c.p.cfg.HandshakeTimeout))
	if _, err := broker.Write(frame); err != nil {
		_ = c.sendError(0, pb.ServerError_ServiceNotReady, "proxy: broker "+target+": "+err.Error())
		return
	}
	_ = broker.SetWriteDeadline(time.Time{})
	_ = c.conn.SetReadDeadline(time.Time{})
	c.p.m.activeDirect.Inc()
	defer c.p.m.activeDirect.Dec()
	// The broker's CONNECTED (or ERROR, or an auth challenge) reaches the
	// client through the pipe unchanged.
	c.pipe(broker)
}

// brokerConnect is the CONNECT the proxy sends for a client: the client's
// own (version, protocol, feature flags, so the broker treats it as that
// client) without proxy_to_broker_url, the client's principal as
// original_principal.
func (c *clientConn) brokerConnect(connect *pb.CommandConnect) *pb.CommandConnect {
	fwd := proto.Clone(connect).(*pb.CommandConnect)
	fwd.ProxyToBrokerUrl = nil
	fwd.AuthMethodName, fwd.AuthData, fwd.AuthMethod = nil, nil, nil
	if c.principal != "" {
		fwd.OriginalPrincipal = ptr(c.principal)
	}
	if c.p.cfg.ForwardAuthorizationCredentials && c.auth.method != "" {
		fwd.OriginalAuthMethod, fwd.OriginalAuthData = ptr(c.auth.method), ptr(string(c.auth.data))
	}
	return fwd
}

// pipe copies both ways until both directions ended or one failed.
func (c *clientConn) pipe(broker *net.TCPConn) {
	done := make(chan error, 2)
	go func() { done <- c.copy(broker, c.conn, true) }()
	go func() { done <- c.copy(c.conn, broker, false) }()
	for range 2 {
		select {
		case err := <-done:
			if err != nil { // a reset or a closed side: end both at once
				c.conn.Close()
				broker.Close()
			}
		case <-c.ctx.Done(): // the proxy closes
			c.conn.Close()
			broker.Close()
			<-done
		}
	}
}

// copy moves src's bytes to dst (splice) until src's EOF, which it passes
// on as a half-close.
func (c *clientConn) copy(dst, src *net.TCPConn, in bool) error {
	lr := &io.LimitedReader{R: src}
	for {
		lr.N = chunk
		n, err := io.Copy(dst, lr)
		c.p.m.bytes.Add(float64(n))
		if in {
			c.p.m.bytesIn.Add(float64(n))
		} else {
			c.p.m.bytesOut.Add(float64(n))
		}
		if err != nil {
			return err
		}
		if lr.N > 0 { // EOF before the chunk was full
			return dst.CloseWrite()
		}
	}
}
