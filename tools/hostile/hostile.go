// Package hostile drives a running broker with seeded, structure-aware
// bad input over its binary protocol and its HTTP port, as an attacker or
// a buggy client would: frames of wrong sizes, truncated and random
// bytes, commands before CONNECT, mutated protobufs, bad SEND payloads
// and batches, odd topic names, thousands of producers, huge FLOW, ACK
// and REDELIVER commands, slow consumers, connection storms and malformed
// admin requests.
//
// It judges what it can see from outside: after each input the broker
// must either close that connection or answer a PING on it within
// Config.Timeout (a hang is a failure), a fresh connection must be served
// at every probe, and an HTTP answer must not be a 5xx other than 503 nor
// show internal paths. What only the process can see (panics, goroutines,
// file descriptors, lost messages of a well-behaved client running
// alongside) the caller checks; see hostile_test.go.
//
// Same seed, same inputs: a failure names its seed and input number.
package hostile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// Config says where the broker is and how much to send.
type Config struct {
	// Addr is the broker's binary-protocol host:port.
	Addr string
	// HTTPAddr is its web service host:port ("" leaves HTTP out).
	HTTPAddr string
	// Seed picks the inputs; Inputs is how many.
	Seed   uint64
	Inputs int
	// Timeout bounds each wait for the broker (default 10 s).
	Timeout time.Duration
	// MaxIDs bounds the message ids of one huge ACK or REDELIVER
	// (default 100,000).
	MaxIDs int
	// Topic is a topic a well-behaved client uses alongside: some inputs
	// target it (slow consumers, huge acks on other subscriptions).
	Topic string
	// Logf, when set, reports progress.
	Logf func(format string, args ...any)
}

// Report is what a run saw.
type Report struct {
	Inputs     int
	ByCategory map[string]int
	// Elapsed is the time spent per category.
	Elapsed map[string]time.Duration
	// Closed counts inputs after which the broker closed the connection;
	// Served those after which it answered PING.
	Closed, Served int
	// HTTPStatus counts the HTTP answers by status.
	HTTPStatus map[int]int
	// Failures are hangs, unserved probes and bad HTTP answers.
	Failures []string
}

// input is one hostile exchange.
type input struct {
	category string
	run      func(d *driver, ctx context.Context) error
}

// driver holds what the categories share.
type driver struct {
	cfg    Config
	rng    *rand.Rand
	report *Report
}

// Run sends cfg.Inputs inputs and returns what it saw; the error is for
// the run itself (the broker unreachable from the start), not findings.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxIDs <= 0 {
		cfg.MaxIDs = 100_000
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	d := &driver{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		report: &Report{ByCategory: map[string]int{}, Elapsed: map[string]time.Duration{}, HTTPStatus: map[int]int{}}}
	if err := d.probe(ctx); err != nil {
		return *d.report, fmt.Errorf("hostile: broker not serving before the first input: %w", err)
	}
	for i := range cfg.Inputs {
		if ctx.Err() != nil {
			break
		}
		in := d.pick()
		d.report.Inputs++
		d.report.ByCategory[in.category]++
		start := time.Now()
		// An input cut short by the run's end is no finding: the run
		// reports that it stopped.
		if err := in.run(d, ctx); err != nil && ctx.Err() == nil {
			d.fail("seed %d input %d (%s): %v", cfg.Seed, i, in.category, err)
		}
		d.report.Elapsed[in.category] += time.Since(start)
		if i%50 == 49 && ctx.Err() == nil {
			if err := d.probe(ctx); err != nil && ctx.Err() == nil {
				d.fail("seed %d after input %d: a new connection was not served: %v", cfg.Seed, i, err)
			}
			cfg.Logf("hostile: %d inputs, %d closed, %d served, %d failures", i+1, d.report.Closed,
				d.report.Served, len(d.report.Failures))
		}
	}
	if d.report.Inputs < cfg.Inputs {
		d.fail("seed %d: stopped after %d of %d inputs: %v", cfg.Seed, d.report.Inputs, cfg.Inputs, ctx.Err())
	}
	// The run's context may be spent: the last probe gets its own time.
	pctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	if err := d.probe(pctx); err != nil {
		d.fail("seed %d at the end: a new connection was not served: %v", cfg.Seed, err)
	}
	return *d.report, nil
}

func (d *driver) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.report.Failures = append(d.report.Failures, msg)
	d.cfg.Logf("hostile: FAILURE %s", msg)
}

// categories, weighted by how many inputs each deserves.
func (d *driver) pick() input {
	type weighted struct {
		weight int
		in     input
	}
	all := []weighted{
		{10, input{"frame-sizes", (*driver).frameSizes}},
		{8, input{"truncated", (*driver).truncated}},
		{8, input{"random-bytes", (*driver).randomBytes}},
		{6, input{"before-connect", (*driver).beforeConnect}},
		{20, input{"mutated-protobuf", (*driver).mutatedCommand}},
		{12, input{"bad-send", (*driver).badSend}},
		{10, input{"odd-names", (*driver).oddNames}},
		{1, input{"many-producers", (*driver).manyProducers}},
		{6, input{"huge-flow-ack", (*driver).hugeFlowAck}},
		{1, input{"slow-consumer", (*driver).slowConsumer}},
		{1, input{"connection-storm", (*driver).connectionStorm}},
	}
	if d.cfg.HTTPAddr != "" {
		all = append(all, weighted{12, input{"admin-http", (*driver).adminHTTP}})
	}
	total := 0
	for _, w := range all {
		total += w.weight
	}
	n := d.rng.IntN(total)
	for _, w := range all {
		if n < w.weight {
			return w.in
		}
		n -= w.weight
	}
	return all[0].in
}

// conn is one raw connection to the broker.
type conn struct {
	c       net.Conn
	timeout time.Duration
}

func (d *driver) dial(ctx context.Context) (*conn, error) {
	var dialer net.Dialer
	dctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	c, err := dialer.DialContext(dctx, "tcp", d.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return &conn{c: c, timeout: d.cfg.Timeout}, nil
}

// connected dials and completes CONNECT.
func (d *driver) connected(ctx context.Context) (*conn, error) {
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.send(connectCommand()); err != nil {
		c.close()
		return nil, err
	}
	for {
		cmd, err := c.read()
		switch {
		case err == nil && cmd.GetType() == pb.BaseCommand_PING:
			continue // the broker's keep-alive may come first
		case err != nil || cmd.GetType() != pb.BaseCommand_CONNECTED:
			c.close()
			return nil, fmt.Errorf("CONNECT answered %v: %v", cmd.GetType(), err)
		}
		return c, nil
	}
}

func connectCommand() *pb.BaseCommand {
	return &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: ptr("hostile"), ProtocolVersion: ptr(int32(21))}}
}

func (c *conn) close() { _ = c.c.Close() }

func (c *conn) write(b []byte) error {
	_ = c.c.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.c.Write(b)
	return err
}

func (c *conn) send(cmd *pb.BaseCommand) error {
	b, err := wire.AppendSimpleFrame(nil, cmd)
	if err != nil {
		return fmt.Errorf("encode %s: %w", cmd.GetType(), err)
	}
	return c.write(b)
}

// errClosed: the broker closed the connection (a fine answer to bad input).
var errClosed = errors.New("closed by the broker")

// read returns the next command from the broker.
func (c *conn) read() (*pb.BaseCommand, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(c.timeout))
	var size [4]byte
	if _, err := io.ReadFull(c.c, size[:]); err != nil {
		return nil, readErr(err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > wire.DefaultMaxFrameSize {
		return nil, fmt.Errorf("broker sent a frame of %d bytes", n)
	}
	buf := make([]byte, 4+n)
	copy(buf, size[:])
	if _, err := io.ReadFull(c.c, buf[4:]); err != nil {
		return nil, readErr(err)
	}
	var cmd pb.BaseCommand
	if _, _, err := wire.ParseFrame(buf, len(buf), &cmd); err != nil {
		return nil, fmt.Errorf("broker sent a bad frame: %w", err)
	}
	return &cmd, nil
}

func readErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return errClosed
}

// settle sends PING and reads until PONG (served) or the connection ends
// (closed); anything else within the timeout is a hang.
func (d *driver) settle(c *conn) error {
	defer c.close()
	if err := c.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}); err != nil {
		d.report.Closed++ // the broker closed it before we could write
		return nil
	}
	for {
		cmd, err := c.read()
		switch {
		case errors.Is(err, errClosed):
			d.report.Closed++
			return nil
		case err != nil:
			return fmt.Errorf("neither closed nor answered PING: %w", err)
		case cmd.GetType() == pb.BaseCommand_PONG:
			d.report.Served++
			return nil
		}
	}
}

// abandon closes a connection whose input leaves it legitimately waiting
// for more bytes (a truncated frame): the probes check the broker lives.
func (d *driver) abandon(c *conn) error {
	c.close()
	d.report.Closed++
	return nil
}

// probe checks a new connection is served.
func (d *driver) probe(ctx context.Context) error {
	c, err := d.connected(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	if err := c.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}); err != nil {
		return err
	}
	for {
		cmd, err := c.read()
		if err != nil {
			return fmt.Errorf("PING: %w", err)
		}
		if cmd.GetType() == pb.BaseCommand_PONG {
			return nil
		}
	}
}

func ptr[T any](v T) *T { return &v }
