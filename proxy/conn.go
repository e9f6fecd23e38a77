package proxy

// One client connection: the handshake, then lookup mode (this file) or
// direct mode (direct.go). The package doc says the behaviour.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// clientAuth is what the client's CONNECT said about its credentials,
// forwarded as original_auth_* with forwardAuthorizationCredentials.
type clientAuth struct {
	method string
	data   []byte
}

type clientConn struct {
	p    *Proxy
	conn net.Conn // *net.TCPConn, or *tls.Conn on the TLS port
	br   *bufio.Reader
	log  interface {
		Debug(msg string, args ...any)
		Warn(msg string, args ...any)
	}
	auth      clientAuth
	principal string      // the authenticated role ("" with authentication off)
	expiry    *time.Timer // closes the connection when the credentials expire
	protocol  int32

	ctx    context.Context
	cancel context.CancelFunc
	wmu    sync.Mutex // one frame written at a time
}

func newClientConn(p *Proxy, c net.Conn) *clientConn {
	ctx, cancel := context.WithCancel(p.ctx)
	return &clientConn{p: p, conn: c, br: bufio.NewReaderSize(c, 16<<10), ctx: ctx, cancel: cancel,
		log: p.cfg.Logger.With("client", c.RemoteAddr().String())}
}

func (c *clientConn) serve() {
	defer c.cancel()
	_ = c.conn.SetReadDeadline(time.Now().Add(c.p.cfg.HandshakeTimeout))
	cmd, _, err := readFrame(c.br, c.p.cfg.MaxFrameSize)
	if err != nil {
		c.log.Debug("proxy: no CONNECT", "err", err)
		return
	}
	connect := cmd.GetConnect()
	if cmd.GetType() != pb.BaseCommand_CONNECT || connect == nil {
		c.log.Debug("proxy: first frame is not CONNECT", "type", cmd.GetType())
		return
	}
	c.auth = clientAuth{method: connect.GetAuthMethodName(), data: connect.GetAuthData()}
	c.protocol = connect.GetProtocolVersion()
	if err := c.authenticate(connect); err != nil {
		return
	}
	if c.expiry != nil {
		defer c.expiry.Stop()
	}
	if target := connect.GetProxyToBrokerUrl(); target != "" {
		c.direct(connect, target)
		return
	}
	c.lookupMode()
}

// send writes one command frame to the client, bounded in time so a
// client that does not read cannot hold a goroutine forever.
func (c *clientConn) send(cmd *pb.BaseCommand) error {
	b, err := encodeFrame(cmd)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.p.cfg.LookupTimeout))
	if _, err := c.conn.Write(b); err != nil {
		c.conn.Close() // unblocks the read loop
		return err
	}
	return nil
}

func (c *clientConn) sendError(id uint64, code pb.ServerError, msg string) error {
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_ERROR.Enum(),
		Error: &pb.CommandError{RequestId: &id, Error: code.Enum(), Message: &msg}})
}

// lookupMode answers the lookup-type commands until the client goes.
func (c *clientConn) lookupMode() {
	err := c.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{
		ServerVersion: ptr(c.p.cfg.Version), ProtocolVersion: ptr(min(c.protocol, maxProtocolVersion)),
		MaxMessageSize: ptr(int32(c.p.cfg.MaxFrameSize - 10<<10))}})
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.conn.Close()
	for {
		_ = c.conn.SetReadDeadline(time.Now().Add(c.p.cfg.IdleTimeout))
		cmd, frame, err := readFrame(c.br, c.p.cfg.MaxFrameSize)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Debug("proxy: lookup connection closed", "err", err)
			}
			return
		}
		if len(frame) > 8+int(frameCmdSize(frame)) {
			c.log.Debug("proxy: payload frame on a lookup connection")
			return
		}
		switch cmd.GetType() {
		case pb.BaseCommand_PING:
			if c.send(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}}) != nil {
				return
			}
		case pb.BaseCommand_PONG:
		case pb.BaseCommand_LOOKUP, pb.BaseCommand_PARTITIONED_METADATA,
			pb.BaseCommand_GET_TOPICS_OF_NAMESPACE, pb.BaseCommand_GET_SCHEMA:
			id, _ := wire.RequestID(cmd)
			select {
			case c.p.lookups <- struct{}{}:
			default:
				c.p.m.rejectedLookups.Inc()
				if c.sendFailure(cmd, id, pb.ServerError_TooManyRequests,
					fmt.Sprintf("too many lookups in progress (maxConcurrentLookupRequests %d)", c.p.cfg.MaxConcurrentLookupRequests)) != nil {
					return
				}
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-c.p.lookups }()
				c.answer(cmd, id)
			}()
		default:
			c.log.Debug("proxy: command not served on a lookup connection", "type", cmd.GetType())
			return
		}
	}
}

func frameCmdSize(frame []byte) uint32 {
	return uint32(frame[4])<<24 | uint32(frame[5])<<16 | uint32(frame[6])<<8 | uint32(frame[7])
}

// answer forwards one lookup-type request to a broker and its answer back.
func (c *clientConn) answer(cmd *pb.BaseCommand, id uint64) {
	ctx, cancel := context.WithTimeout(c.ctx, c.p.cfg.LookupTimeout)
	defer cancel()
	if code, err := c.authorize(ctx, cmd); err != nil {
		c.p.cfg.Logger.Debug("proxy: lookup not authorized", "client", c.conn.RemoteAddr().String(), "err", err)
		_ = c.sendFailure(cmd, id, code, err.Error())
		return
	}
	if cmd.GetType() == pb.BaseCommand_LOOKUP {
		c.p.m.lookups.Inc()
		c.lookup(ctx, cmd, id)
		return
	}
	switch cmd.GetType() {
	case pb.BaseCommand_PARTITIONED_METADATA:
		c.p.m.partitions.Inc()
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		c.p.m.topicsOfNS.Inc()
	case pb.BaseCommand_GET_SCHEMA:
		c.p.m.schemas.Inc()
	}
	resp, err := c.p.pool.requestAny(ctx, c.session(), cmd)
	if err != nil {
		c.p.m.lookupFailures.Inc()
		_ = c.sendFailure(cmd, id, pb.ServerError_ServiceNotReady, err.Error())
		return
	}
	wire.SetRequestID(resp, id)
	_ = c.send(resp)
}

// maxRedirects is how many Redirect answers a lookup follows, as the
// clients do.
const maxRedirects = 20

// lookup asks a broker and follows its redirects; the client is told to
// connect to the final broker through this proxy.
func (c *clientConn) lookup(ctx context.Context, cmd *pb.BaseCommand, id uint64) {
	req := proto.Clone(cmd).(*pb.BaseCommand)
	target := ""
	for range maxRedirects {
		var resp *pb.BaseCommand
		var err error
		if target == "" {
			resp, err = c.p.pool.requestAny(ctx, c.session(), req)
		} else {
			resp, err = c.p.pool.request(ctx, target, c.session(), req)
		}
		if err != nil {
			c.p.m.lookupFailures.Inc()
			_ = c.sendFailure(cmd, id, pb.ServerError_ServiceNotReady, err.Error())
			return
		}
		r := resp.GetLookupTopicResponse()
		if r == nil { // ERROR
			wire.SetRequestID(resp, id)
			_ = c.send(resp)
			return
		}
		switch r.GetResponse() {
		case pb.CommandLookupTopicResponse_Redirect:
			target = hostOf(r.GetBrokerServiceUrl())
			req.LookupTopic.Authoritative = ptr(r.GetAuthoritative())
			continue
		case pb.CommandLookupTopicResponse_Connect:
			r.RequestId, r.ProxyThroughServiceUrl, r.Authoritative = &id, ptr(true), ptr(true)
			_ = c.send(resp)
		default:
			r.RequestId = &id
			_ = c.send(resp)
		}
		return
	}
	_ = c.sendFailure(cmd, id, pb.ServerError_ServiceNotReady, fmt.Sprintf("more than %d redirects", maxRedirects))
}

// sendFailure answers a request with the failure its response type has.
func (c *clientConn) sendFailure(cmd *pb.BaseCommand, id uint64, code pb.ServerError, msg string) error {
	switch cmd.GetType() {
	case pb.BaseCommand_LOOKUP:
		return c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
			RequestId: &id, Response: pb.CommandLookupTopicResponse_Failed.Enum(), Error: code.Enum(), Message: &msg}})
	case pb.BaseCommand_PARTITIONED_METADATA:
		return c.send(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(),
			PartitionMetadataResponse: &pb.CommandPartitionedTopicMetadataResponse{RequestId: &id,
				Response: pb.CommandPartitionedTopicMetadataResponse_Failed.Enum(), Error: code.Enum(), Message: &msg}})
	}
	return c.sendError(id, code, msg)
}

// hostOf is host:port of pulsar://host:port (or of host:port).
func hostOf(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	host, _, _ := strings.Cut(u, "/")
	return host
}

// session is whom the pooled broker connections serving this client
// speak for.
func (c *clientConn) session() session {
	return session{principal: c.principal, auth: c.auth}
}

// maxProtocolVersion is the newest protocol version the proxy speaks in
// lookup mode (the broker's).
const maxProtocolVersion = 21
