package proxy

// Targets that must be refused (CVE-2022-24280), garbage, half-open and
// non-reading clients, connection floods.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// rawConnect dials the proxy, sends CONNECT (to target when not empty)
// and returns the connection and the first frame answered.
func rawConnect(t *testing.T, addr, target string) (net.Conn, *pb.BaseCommand) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	connect := &pb.CommandConnect{ClientVersion: ptr("Pulsar-Go-test"), ProtocolVersion: ptr(int32(20))}
	if target != "" {
		connect.ProxyToBrokerUrl = &target
	}
	frame, _ := encodeFrame(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: connect})
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	cmd, _, err := readFrame(bufio.NewReader(c), 1<<20)
	if err != nil {
		t.Fatalf("no answer to CONNECT to %q: %v", target, err)
	}
	return c, cmd
}

func TestRefusesTargetsThatAreNotAllowedBrokers(t *testing.T) {
	e := newEnv(t, 1)
	brokerAddr := e.brokers[0].srv.Addr().String()
	_, brokerPort, _ := net.SplitHostPort(brokerAddr)
	// Something listening that is not a broker.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var reached atomic.Int32
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	open := e.startProxy(Config{})
	if _, cmd := rawConnect(t, open.addr, brokerAddr); cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("registered broker: answered %v", cmd)
	}
	for _, target := range []string{other.Addr().String(), "localhost:" + brokerPort, "example.invalid:6650", "garbage"} {
		if _, cmd := rawConnect(t, open.addr, target); cmd.GetType() != pb.BaseCommand_ERROR {
			t.Fatalf("unregistered %s: answered %v, want ERROR", target, cmd)
		}
	}
	// The broker is registered but its port is not allowed; nor its host.
	for _, cfg := range []Config{{BrokerProxyAllowedTargetPorts: "6650,6651"},
		{BrokerProxyAllowedHostNames: "*.example.com"}, {BrokerProxyAllowedIPAddresses: "10.0.0.0/8"}} {
		px := e.startProxy(cfg)
		if _, cmd := rawConnect(t, px.addr, brokerAddr); cmd.GetType() != pb.BaseCommand_ERROR ||
			!strings.Contains(cmd.GetError().GetMessage(), "not") {
			t.Fatalf("%+v: answered %v, want ERROR", cfg, cmd)
		}
	}
	if reached.Load() != 0 {
		t.Fatal("the proxy connected to a host that is not a registered broker")
	}
	if v := testutil.ToFloat64(open.p.m.refused); v != 4 {
		t.Fatalf("refused targets counted %v, want 4", v)
	}
}

func TestGarbageAndHalfOpenClients(t *testing.T) {
	e := newEnv(t, 1)
	px := e.startProxy(Config{HandshakeTimeout: 300 * time.Millisecond})
	inputs := [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		{0xff, 0xff, 0xff, 0xff, 1, 2, 3},                // a frame of 4 GiB
		{0, 0, 0, 8, 0, 0, 0, 4, 0xde, 0xad, 0xbe, 0xef}, // not a command
		{0, 0, 0, 6, 0, 0, 0, 2, 8, 3},                   // PING before CONNECT
	}
	for _, in := range inputs {
		c, err := net.Dial("tcp", px.addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(in)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
			t.Fatalf("%q: read %d bytes, %v; want the connection closed", in, n, err)
		}
		c.Close()
	}
	// Half-open: connected, never says anything.
	c, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil || time.Since(start) > 3*time.Second {
		t.Fatalf("silent client: %v after %v; want closed after the handshake timeout", err, time.Since(start))
	}
	// Lookup mode: a client that stops pinging is closed after IdleTimeout.
	idle := e.startProxy(Config{IdleTimeout: 300 * time.Millisecond})
	lc, cmd := rawConnect(t, idle.addr, "")
	if cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("lookup mode: %v", cmd)
	}
	_ = lc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, lc); err != nil {
		t.Fatalf("idle lookup connection not closed: %v", err)
	}
	waitFor(t, func() bool { return px.p.ActiveConnections() == 0 && idle.p.ActiveConnections() == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// registerFake registers a "broker" at addr in the metadata store.
func registerFake(t *testing.T, e *env, addr string) {
	t.Helper()
	data, _ := json.Marshal(ownership.BrokerData{PulsarServiceURL: "pulsar://" + addr, WebServiceURL: "http://" + addr})
	s := e.meta.NewSession()
	if _, _, err := s.Create(context.Background(), ownership.BrokersPath+"/fake:1", data,
		metadata.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
}

// A client that never reads: a broker writing without end is held back
// by the kernel's socket buffers; the proxy's heap does not grow.
func TestClientThatNeverReadsIsBackPressure(t *testing.T) {
	e := newEnv(t, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var written atomic.Int64
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		_, _ = c.Read(buf) // the CONNECT
		for {
			n, err := c.Write(buf)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	registerFake(t, e, ln.Addr().String())
	px := e.startProxy(Config{})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame, _ := encodeFrame(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: ptr("never-reads"), ProtocolVersion: ptr(int32(20)), ProxyToBrokerUrl: ptr(ln.Addr().String())}})
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	// Wait until the writes stall.
	last := int64(-1)
	for i := 0; ; i++ {
		time.Sleep(300 * time.Millisecond)
		now := written.Load()
		if now == last && now > 0 {
			break
		}
		if i > 50 {
			t.Fatalf("the broker's writes never stalled: %d bytes written", now)
		}
		last = now
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("broker wrote %d KiB before stalling; proxy heap %+d KiB", written.Load()>>10,
		(int64(after.HeapAlloc)-int64(before.HeapAlloc))>>10)
	if written.Load() > 64<<20 {
		t.Fatalf("%d bytes went out before the writes stalled: not held back", written.Load())
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
		t.Fatalf("heap grew %d bytes while the client did not read", grew)
	}
}

// Connections past maxConcurrentInboundConnections are closed at once;
// once the flood goes, clients are served again.
func TestConnectionFlood(t *testing.T) {
	e := newEnv(t, 1)
	px := e.startProxy(Config{MaxConcurrentInboundConnections: 5})
	var held []net.Conn
	for range 5 {
		c, cmd := rawConnect(t, px.addr, "")
		if cmd.GetType() != pb.BaseCommand_CONNECTED {
			t.Fatal(cmd)
		}
		held = append(held, c)
	}
	for range 20 {
		c, err := net.Dial("tcp", px.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
			t.Fatalf("connection past the limit: %d bytes, %v", n, err)
		}
		c.Close()
	}
	if v := testutil.ToFloat64(px.p.m.rejected); v != 20 {
		t.Fatalf("rejected %v, want 20", v)
	}
	for _, c := range held {
		c.Close()
	}
	waitFor(t, func() bool { return px.p.ActiveConnections() == 0 })
	if _, cmd := rawConnect(t, px.addr, ""); cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatal(cmd)
	}
}

// The pipe moves bytes with splice(2): Go's splice keeps pipes (pairs of
// pipe fds) in a pool, so piping data through the proxy opens pipe fds in
// this process, which a user-space copy never does.
func TestPipeUsesSplice(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("splice is Linux only")
	}
	countPipes := func() int {
		entries, _ := os.ReadDir("/proc/self/fd")
		n := 0
		for _, en := range entries {
			if l, err := os.Readlink("/proc/self/fd/" + en.Name()); err == nil && strings.HasPrefix(l, "pipe:") {
				n++
			}
		}
		return n
	}
	e := newEnv(t, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c) // echo, CONNECT included
	}()
	registerFake(t, e, ln.Addr().String())
	px := e.startProxy(Config{})
	before := countPipes()
	c, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame, _ := encodeFrame(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: ptr("splice"), ProtocolVersion: ptr(int32(20)), ProxyToBrokerUrl: ptr(ln.Addr().String())}})
	payload := make([]byte, 4<<20)
	go func() { _, _ = c.Write(append(frame, payload...)) }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	if _, _, err := readFrame(br, 1<<20); err != nil { // the proxy's CONNECT, echoed
		t.Fatal(err)
	}
	if _, err := io.ReadFull(br, make([]byte, len(payload))); err != nil {
		t.Fatal(err)
	}
	if after := countPipes(); after <= before {
		t.Fatalf("pipe fds %d before, %d after piping 4 MiB: splice was not used", before, after)
	}
}
