package proxy

// Direct mode: after CONNECT with proxy_to_broker_url, bytes are copied
// between the client and its broker. This is the hot path.
//
// With TLS on either side the bytes must pass through user space (to be
// decrypted or encrypted): they are copied through a pooled 16 KiB
// buffer per direction, held only while the connection lives.
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
	"errors"
	"io"
	"net"
	"sync"
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
	broker, err := c.p.dialBroker(ctx, target)
	if err != nil {
		if errors.Is(err, errNotAllowed) {
			c.p.m.refused.Inc()
			c.p.cfg.Logger.Warn("proxy: refused a client's target broker", "client", c.conn.RemoteAddr().String(),
				"target", target, "err", err)
			_ = c.sendError(0, pb.ServerError_ServiceNotReady, err.Error())
			return
		}
		_ = c.sendError(0, pb.ServerError_ServiceNotReady, "proxy: cannot reach broker "+target+": "+err.Error())
		return
	}
	defer broker.Close()
	fwd := proto.Clone(connect).(*pb.CommandConnect)
	fwd.ProxyToBrokerUrl = nil
	if err := c.p.brokerConnect(fwd, c.principal, c.auth); err != nil {
		_ = c.sendError(0, pb.ServerError_ServiceNotReady, err.Error())
		return
	}
	frame, err := encodeFrame(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: fwd})
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
	defer c.p.directTo(c, target)()
	// The broker's CONNECTED (or ERROR, or an auth challenge) reaches the
	// client through the pipe unchanged.
	c.pipe(broker)
}

// pipe copies both ways until both directions ended or one failed.
func (c *clientConn) pipe(broker net.Conn) {
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

// copy moves src's bytes to dst until src's EOF, which it passes on as a
// half-close: splice(2) between two TCP sockets, else (TLS on a side)
// through a pooled buffer.
func (c *clientConn) copy(dst, src net.Conn, in bool) error {
	count := func(n int64) {
		c.p.m.bytes.Add(float64(n))
		if in {
			c.p.m.bytesIn.Add(float64(n))
		} else {
			c.p.m.bytesOut.Add(float64(n))
		}
	}
	dt, dstTCP := dst.(*net.TCPConn)
	st, srcTCP := src.(*net.TCPConn)
	if dstTCP && srcTCP {
		return spliceCopy(dt, st, count)
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	for {
		n, err := src.Read(*buf)
		if n > 0 {
			if _, werr := dst.Write((*buf)[:n]); werr != nil {
				return werr
			}
			count(int64(n))
		}
		if errors.Is(err, io.EOF) {
			return closeWrite(dst)
		}
		if err != nil {
			return err
		}
	}
}

// copyBuffers are the TLS path's copy buffers: one TLS record's worth, so
// a read returns at most a record and a write makes one.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// spliceCopy is the plaintext path: io.Copy between *net.TCPConn uses
// splice(2).
func spliceCopy(dst, src *net.TCPConn, count func(int64)) error {
	lr := &io.LimitedReader{R: src}
	for {
		lr.N = chunk
		n, err := io.Copy(dst, lr)
		count(n)
		if err != nil {
			return err
		}
		if lr.N > 0 { // EOF before the chunk was full
			return dst.CloseWrite()
		}
	}
}

// closeWrite half-closes c (TCP, or TLS's close_notify).
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
