// Package replclient is the geo-replicator's producer: one connection to
// a remote cluster's broker over the Pulsar binary protocol, publishing
// entries that are already encoded.
//
// Why not the official Go client: the replicator must forward a stored
// entry as it was published (its batch, producer name, sequence id,
// publish and event time, key, properties, schema version) with
// replicated_from set, which is how the remote broker knows not to
// replicate it again and to deduplicate it by the original producer.
// pulsar-client-go's ProducerMessage cannot set replicated_from, and its
// producer re-encodes every message (its own name, sequence ids, publish
// time, batching). So this package speaks the protocol itself, with the
// frame codec of package wire:
//
//	CONNECT -> CONNECTED
//	LOOKUP (follows Redirect, at most 20 times, echoing authoritative)
//	  -> Connect: CONNECT to the owner (or reuse the connection)
//	PRODUCER (name pulsar.repl.<local>--><remote>) -> PRODUCER_SUCCESS
//	SEND (entry bytes from 0x0e01) ... -> SEND_RECEIPT, in order
//	PING -> PONG; CLOSE_PRODUCER or any error: the producer fails
//
// Behaviour: Send calls back in SEND order, once each. The first error
// (SEND_ERROR, CLOSE_PRODUCER, connection lost, ctx of Dial ended) fails
// every pending send and every later one; the caller dials again. Nothing
// is retried here: the replicator re-reads from its cursor instead.
// Lock rules: mu guards pending, failed and the connection's writes.
package replclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Prefix starts every replicator producer's name (Pulsar's
// replicatorPrefix "pulsar.repl" and its "."): a broker treats a producer
// named so as a remote cluster's replicator.
const Prefix = "pulsar.repl."

// ProducerName is the replicator producer's name for local -> remote
// (Pulsar's "<prefix><local>--><remote>").
func ProducerName(local, remote string) string { return Prefix + local + "-->" + remote }

// ErrClosed fails sends after Close.
var ErrClosed = errors.New("replclient: producer closed")

// Config says where and what to publish.
type Config struct {
	// ServiceURL is the remote cluster's brokerServiceUrl
	// (pulsar://host:port), or its brokerServiceUrlTls
	// (pulsar+ssl://host:port) with TLS set.
	ServiceURL string
	// Credentials are presented at CONNECT (the remote cluster's
	// authenticationPlugin/Parameters, else the broker's
	// brokerClientAuthentication*; nil: none).
	Credentials *auth.ClientCredentials
	// TLS, when set, dials the remote brokers' TLS ports with it (the
	// lookup's brokerServiceUrlTls).
	TLS *tls.Config
	// Topic is the full topic name to publish to.
	Topic string
	// ProducerName is ProducerName(local, remote).
	ProducerName string
	// Version is sent as client_version.
	Version string
	// Timeout bounds each dial and request (default 10 s).
	Timeout time.Duration
	// MaxFrameSize bounds frames read (default wire.DefaultMaxMessageSize + padding).
	MaxFrameSize int
}

// Producer is a connected, ready producer.
type Producer struct {
	cfg  Config
	conn net.Conn
	addr string // host:port of the broker it publishes to

	mu      sync.Mutex
	pending []pendingSend
	seq     uint64
	failed  error
	done    chan struct{}
}

type pendingSend struct {
	seq uint64
	cb  func(error)
}

const producerID = 1

// Dial looks the topic up, connects to its owner and opens the producer.
func Dial(ctx context.Context, cfg Config) (*Producer, error) {
	cfg = cfg.withDefaults("magnetar-replicator")
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	c, err := connectToOwner(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p := &Producer{cfg: cfg, conn: c.conn, addr: c.addr, done: make(chan struct{})}
	if err := c.openProducer(ctx, cfg); err != nil {
		c.conn.Close()
		return nil, err
	}
	go p.readLoop(c.br)
	return p, nil
}

// withDefaults fills the zero settings; version is the client_version
// unless cfg names one.
func (cfg Config) withDefaults(version string) Config {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = wire.DefaultMaxMessageSize + wire.FramePadding
	}
	if cfg.Version == "" {
		cfg.Version = version
	}
	return cfg
}

// connectToOwner checks the service URL, connects to it and follows the
// lookup of cfg.Topic to its owner.
func connectToOwner(ctx context.Context, cfg Config) (*conn, error) {
	u, err := url.Parse(cfg.ServiceURL)
	want := map[bool]string{false: "pulsar", true: "pulsar+ssl"}[cfg.TLS != nil]
	if err != nil || u.Scheme != want || u.Host == "" {
		return nil, fmt.Errorf("replclient: service URL %q: want %s://host:port", cfg.ServiceURL, want)
	}
	c, err := dialConn(ctx, cfg, u.Host)
	if err != nil {
		return nil, err
	}
	return c.lookup(ctx, cfg)
}

// Addr is the broker the producer publishes to (host:port).
func (p *Producer) Addr() string { return p.addr }

// Done is closed once the producer failed or closed.
func (p *Producer) Done() <-chan struct{} { return p.done }

// Err is why the producer stopped (nil while it works).
func (p *Producer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// Send publishes entry holding messages messages, written as vectors
// (frame header, entry head, payload: the payload is not copied); cb
// runs once, in SEND order, with nil once the remote broker stored it
// (or found it a duplicate).
func (p *Producer) Send(entry Replicated, messages int32, cb func(error)) {
	p.mu.Lock()
	if p.failed != nil {
		err := p.failed
		p.mu.Unlock()
		cb(err)
		return
	}
	seq := p.seq
	p.seq++
	cmd := &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: ptr(uint64(producerID)), SequenceId: &seq, NumMessages: &messages}}
	head, err := wire.AppendPayloadFrameHeader(make([]byte, 0, 64), cmd, nil, entry.Len())
	if err == nil {
		p.pending = append(p.pending, pendingSend{seq: seq, cb: cb})
		_ = p.conn.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
		bufs := net.Buffers{head, entry.Head, entry.Payload}
		_, err = bufs.WriteTo(p.conn)
	}
	p.mu.Unlock()
	if err != nil {
		if len(head) == 0 {
			cb(err)
			return
		}
		p.fail(fmt.Errorf("replclient: send to %s: %w", p.addr, err))
	}
}

// Close closes the producer's connection; pending sends fail.
func (p *Producer) Close() {
	p.fail(ErrClosed)
}

func (p *Producer) fail(err error) {
	p.mu.Lock()
	if p.failed != nil {
		p.mu.Unlock()
		return
	}
	p.failed = err
	pending := p.pending
	p.pending = nil
	p.conn.Close()
	close(p.done)
	p.mu.Unlock()
	for _, s := range pending {
		s.cb(err)
	}
}

func (p *Producer) readLoop(br *bufio.Reader) {
	for {
		cmd, err := readFrame(br, p.cfg.MaxFrameSize)
		if err != nil {
			p.fail(fmt.Errorf("replclient: connection to %s: %w", p.addr, err))
			return
		}
		switch cmd.GetType() {
		case pb.BaseCommand_PING:
			p.write(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
		case pb.BaseCommand_SEND_RECEIPT:
			p.receipt(cmd.GetSendReceipt().GetSequenceId())
		case pb.BaseCommand_SEND_ERROR:
			e := cmd.GetSendError()
			p.fail(fmt.Errorf("replclient: %s refused a send: %s: %s", p.addr, e.GetError(), e.GetMessage()))
			return
		case pb.BaseCommand_CLOSE_PRODUCER:
			p.fail(fmt.Errorf("replclient: %s closed the producer", p.addr))
			return
		}
	}
}

// receipt completes the oldest pending send; a receipt for anything else
// is out of order and fails the producer (the replicator re-reads).
func (p *Producer) receipt(seq uint64) {
	p.mu.Lock()
	if len(p.pending) == 0 || p.pending[0].seq != seq {
		p.mu.Unlock()
		if seq < p.nextExpected() {
			return // an old one: ignored, as the clients do
		}
		p.fail(fmt.Errorf("replclient: %s sent a receipt for %d out of order", p.addr, seq))
		return
	}
	s := p.pending[0]
	p.pending = p.pending[1:]
	p.mu.Unlock()
	s.cb(nil)
}

func (p *Producer) nextExpected() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) > 0 {
		return p.pending[0].seq
	}
	return p.seq
}

func (p *Producer) write(cmd *pb.BaseCommand) {
	frame, err := wire.AppendSimpleFrame(nil, cmd)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return
	}
	_ = p.conn.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
	_, _ = p.conn.Write(frame)
}

// conn is a connection during setup (requests answered one at a time).
type conn struct {
	conn  net.Conn
	br    *bufio.Reader
	addr  string
	reqID uint64
	max   int
}

func dialConn(ctx context.Context, cfg Config, hostport string) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("replclient: dial %s: %w", hostport, err)
	}
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(hostport)
		}
		tconn := tls.Client(nc, tc)
		if err := tconn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("replclient: TLS to %s: %w", hostport, err)
		}
		nc = tconn
	}
	connect := &pb.CommandConnect{ClientVersion: ptr(cfg.Version), ProtocolVersion: ptr(int32(20))}
	if m := cfg.Credentials.Method(); m != "" {
		data, err := cfg.Credentials.AuthData()
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("replclient: credentials: %w", err)
		}
		connect.AuthMethodName, connect.AuthData = ptr(m), data
	}
	c := &conn{conn: nc, br: bufio.NewReaderSize(nc, 16<<10), addr: hostport, max: cfg.MaxFrameSize}
	resp, err := c.request(ctx, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: connect}, pb.BaseCommand_CONNECTED)
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = resp
	return c, nil
}

// request writes cmd and reads until a frame of type want (or ERROR)
// arrives, answering PINGs meanwhile.
func (c *conn) request(ctx context.Context, cmd *pb.BaseCommand, want pb.BaseCommand_Type) (*pb.BaseCommand, error) {
	frame, err := wire.AppendSimpleFrame(nil, cmd)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = c.conn.SetDeadline(deadline)
	defer c.conn.SetDeadline(time.Time{})
	if _, err := c.conn.Write(frame); err != nil {
		return nil, fmt.Errorf("replclient: %s: %w", c.addr, err)
	}
	for {
		resp, err := readFrame(c.br, c.max)
		if err != nil {
			return nil, fmt.Errorf("replclient: %s: waiting for %s: %w", c.addr, want, err)
		}
		switch resp.GetType() {
		case want:
			return resp, nil
		case pb.BaseCommand_ERROR:
			return nil, fmt.Errorf("replclient: %s answered %s with %s: %s", c.addr, cmd.GetType(),
				resp.GetError().GetError(), resp.GetError().GetMessage())
		case pb.BaseCommand_PING:
			pong, _ := wire.AppendSimpleFrame(nil, &pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
			_, _ = c.conn.Write(pong)
		}
	}
}

// lookup finds the topic's owner and returns a connection to it (c
// itself, or a new one; c is closed then).
func (c *conn) lookup(ctx context.Context, cfg Config) (*conn, error) {
	authoritative := false
	for range 20 {
		c.reqID++
		resp, err := c.request(ctx, &pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
			Topic: &cfg.Topic, RequestId: ptr(c.reqID), Authoritative: &authoritative}}, pb.BaseCommand_LOOKUP_RESPONSE)
		if err != nil {
			c.conn.Close()
			return nil, err
		}
		l := resp.GetLookupTopicResponse()
		if l.GetResponse() == pb.CommandLookupTopicResponse_Failed {
			c.conn.Close()
			return nil, fmt.Errorf("replclient: lookup of %s at %s failed: %s: %s", cfg.Topic, c.addr, l.GetError(), l.GetMessage())
		}
		target := c.addr
		if l.GetProxyThroughServiceUrl() {
			target = c.addr // stay on the service URL's connection
		} else if u, err := url.Parse(ownerURL(l, cfg.TLS != nil)); err == nil && u.Host != "" {
			target = u.Host
		}
		authoritative = l.GetAuthoritative()
		if target != c.addr {
			c.conn.Close()
			if c, err = dialConn(ctx, cfg, target); err != nil {
				return nil, err
			}
		}
		if l.GetResponse() == pb.CommandLookupTopicResponse_Connect {
			return c, nil
		}
	}
	c.conn.Close()
	return nil, fmt.Errorf("replclient: lookup of %s: too many redirects", cfg.Topic)
}

// ownerURL is the broker a lookup names: its TLS port's URL over TLS.
func ownerURL(l *pb.CommandLookupTopicResponse, useTLS bool) string {
	if useTLS {
		return l.GetBrokerServiceUrlTls()
	}
	return l.GetBrokerServiceUrl()
}

func (c *conn) openProducer(ctx context.Context, cfg Config) error {
	c.reqID++
	_, err := c.request(ctx, &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: &cfg.Topic, ProducerId: ptr(uint64(producerID)), RequestId: ptr(c.reqID),
		ProducerName: &cfg.ProducerName}}, pb.BaseCommand_PRODUCER_SUCCESS)
	return err
}

func readFrame(br *bufio.Reader, max int) (*pb.BaseCommand, error) {
	head, err := br.Peek(4)
	if err != nil {
		return nil, err
	}
	n, err := wire.FrameLen(head, max)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, err
	}
	cmd := &pb.BaseCommand{}
	if _, _, err := wire.ParseFrame(buf, max, cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}

// replicatedFromField is MessageMetadata.replicated_from's field number.
const replicatedFromField = 5

// Replicated is an entry re-framed for a remote cluster: Head holds the
// magic, the new checksum, the metadata size and the metadata with
// replicated_from appended; Payload is the stored payload itself, shared
// with the cache, not copied (nothing mutates entry bytes).
type Replicated struct {
	Head    []byte
	Payload []byte
}

// Len is the entry's size on the wire.
func (r Replicated) Len() int { return len(r.Head) + len(r.Payload) }

// Bytes is the entry in one buffer (a copy).
func (r Replicated) Bytes() []byte { return append(append([]byte{}, r.Head...), r.Payload...) }

// MarkReplicated re-frames entry (from the 0x0e01 magic) so that its
// metadata also says replicated_from = cluster, with a new checksum. The
// stored metadata bytes are kept as they are and the field appended
// (protobuf takes the last value of a field), so nothing the original
// producer set is lost, fields this broker does not know included. The
// payload is neither copied nor read: its checksum is taken out of the
// stored one (wire.Entry.AppendHeadWith), which the broker verified when
// it took the entry.
func MarkReplicated(e wire.Entry, cluster string) Replicated {
	extra := protowire.AppendString(protowire.AppendTag(nil, replicatedFromField, protowire.BytesType), cluster)
	head := e.AppendHeadWith(make([]byte, 0, 10+len(e.Metadata())+len(extra)), extra)
	return Replicated{Head: head, Payload: e.Payload()}
}

func ptr[T any](v T) *T { return &v }

// Request sends one command to the owner of cfg.Topic (looked up from
// cfg.ServiceURL) on a connection of its own and returns the answer of
// type want; the connection is closed after. The brokers' transaction
// coordinators end transactions on the partitions other brokers own with
// it (END_TXN_ON_PARTITION, END_TXN_ON_SUBSCRIPTION). cmd's request id is
// set here.
func Request(ctx context.Context, cfg Config, cmd *pb.BaseCommand, want pb.BaseCommand_Type, setID func(uint64)) (*pb.BaseCommand, error) {
	cfg = cfg.withDefaults("magnetar-broker")
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	c, err := connectToOwner(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer c.conn.Close()
	c.reqID++
	setID(c.reqID)
	return c.request(ctx, cmd, want)
}
