package netio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/magnetar-io/magnetar/internal/tlstest"
)

// fdChildEnv makes the test binary act as TestFDLimitKeepsListening's
// server: a process of its own, because the limit it lowers is the
// process's.
const fdChildEnv = "NETIO_FD_LIMIT_CHILD"

// fdChildLimit is the child's RLIMIT_NOFILE: far below the connections the
// parent opens.
const fdChildLimit = 96

// TestFDLimit: a flood of connections past the process's file-descriptor
// limit must not take a listener down. gnet's acceptor treats EMFILE as
// fatal and stopped its engine, and the TLS acceptor returned on any
// error, which left the port refusing every connection for good. Past the
// limit a server must refuse the newest connections, keep serving the
// ones it has, and serve new ones once the flood is gone: with the
// default headroom, with none (accept itself then fails with EMFILE and
// the acceptor sheds), and on a TLS port.
func TestFDLimit(t *testing.T) {
	if kind := os.Getenv(fdChildEnv); kind != "" {
		runFDLimitChild(t, kind)
		return
	}
	for _, tc := range []struct {
		kind string
		dial func(string) (net.Conn, error)
	}{{"headroom", plainDial}, {"none", plainDial}, {"tls", tlsDial}} {
		t.Run(tc.kind, func(t *testing.T) {
			addr, stop := startFDLimitChild(t, tc.kind)
			defer stop()
			floodAndRecover(t, addr, tc.dial)
		})
	}
}

func plainDial(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }

func tlsDial(addr string) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{InsecureSkipVerify: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return d.DialContext(ctx, "tcp", addr)
}

// floodAndRecover opens a connection with dial, then three times the
// child's limit in plain TCP connections; checks that the first still
// works, closes them all, and expects new connections served.
func floodAndRecover(t *testing.T, addr string, dial func(string) (net.Conn, error)) {
	t.Helper()
	first, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	held := []net.Conn{first}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 3 * fdChildLimit {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break // refused or the backlog is full
		}
		held = append(held, c)
	}
	if len(held) <= fdChildLimit {
		t.Fatalf("only %d connections dialed; the flood did not pass the limit", len(held))
	}
	if err := echoOnce(held[0]); err != nil {
		t.Fatalf("an admitted connection stopped working during the flood: %v", err)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	expectServedAgain(t, addr, dial)
}

// expectServedAgain waits up to 10 s for a new connection to addr to be
// served.
func expectServedAgain(t *testing.T, addr string, dial func(string) (net.Conn, error)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := dialAndEcho(addr, dial)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new connection served 10 s after the flood ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startFDLimitChild runs this test binary as the low-limit server and
// returns its address; stop ends it (closing its stdin) and waits.
func startFDLimitChild(t *testing.T, kind string) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDLimit$", "-test.v")
	cmd.Env = append(os.Environ(), fdChildEnv+"="+kind)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server log:\n%s", lastLines(stderr.String(), 40))
		}
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if a, ok := strings.CutPrefix(lines.Text(), "ADDR "); ok {
			go io.Copy(io.Discard, stdout)
			return a, stop
		}
	}
	stop()
	t.Fatalf("the server process printed no address: %v", lines.Err())
	return "", nil
}

// runFDLimitChild is the child: lower the limit, serve echo, print the
// address, and run until stdin closes.
func runFDLimitChild(t *testing.T, kind string) {
	lim := unix.Rlimit{Cur: fdChildLimit, Max: fdChildLimit}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		os.Exit(2)
	}
	logger, lb := newLogger()
	s, err := listenFDLimitChild(t, kind, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(2)
	}
	fmt.Printf("ADDR %s\n", s.Addr())
	io.Copy(io.Discard, os.Stdin)
	fmt.Fprint(os.Stderr, lb.String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
	}
	os.Exit(0)
}

// listenFDLimitChild starts the child's echo server of the kind asked:
// "headroom" (defaults), "none" (FDHeadroom -1) or "tls".
func listenFDLimitChild(t *testing.T, kind string, logger *slog.Logger) (interface {
	Addr() net.Addr
	Close(context.Context) error
}, error) {
	switch kind {
	case "tls":
		certPEM, keyPEM := tlstest.NewCA(t, "netio test").Issue(t, "127.0.0.1", true)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		echo := func(c *TLSConn) (func([]byte) error, func(error)) {
			return func(f []byte) error { return c.Write(append([]byte(nil), f...)) }, func(error) {}
		}
		return ListenTLS("127.0.0.1:0", TLSOptions{Config: &tls.Config{Certificates: []tls.Certificate{cert}},
			MaxFrameSize: 1 << 20, What: "test TLS", Logger: logger}, echo)
	case "none":
		return Listen(newDiscardingRecorder(), Options{Addr: "tcp://127.0.0.1:0", FDHeadroom: -1, Logger: logger})
	default:
		return Listen(newDiscardingRecorder(), Options{Addr: "tcp://127.0.0.1:0", Logger: logger})
	}
}

// newDiscardingRecorder echoes and does not keep opens and closes: the
// child has nobody reading them.
func newDiscardingRecorder() *recorder {
	r := newRecorder()
	r.opens = nil
	r.closes = nil
	return r
}

func echoOnce(c net.Conn) error {
	f := mkFrame([]byte("ping"))
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(f); err != nil {
		return err
	}
	got, err := readFrame(c)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, f) {
		return errors.New("echo differs")
	}
	return nil
}

func dialAndEcho(addr string, dial func(string) (net.Conn, error)) error {
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return echoOnce(c)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestMaxConns: past MaxConns a new connection is closed at once, before
// the handler sees it; a slot freed is taken again.
func TestMaxConns(t *testing.T) {
	rec := newRecorder()
	s, lb := start(t, rec, Options{MaxConns: 2})
	a, b := dial(t, s), dial(t, s)
	rec.nextOpen(t)
	rec.nextOpen(t)
	expectEOF(t, dial(t, s))
	if err := echoOnce(a); err != nil {
		t.Fatalf("an admitted connection: %v", err)
	}
	if len(lb.lines("refusing new connections", "limit 2")) != 1 {
		t.Fatalf("want one line naming the limit:\n%s", lb.String())
	}
	b.Close()
	rec.nextClose(t)
	if err := echoOnce(dial(t, s)); err != nil {
		t.Fatalf("after a slot was freed: %v", err)
	}
}

// TestMaxConnsPerIP: the bound is per remote address.
func TestMaxConnsPerIP(t *testing.T) {
	rec := newRecorder()
	s, _ := start(t, rec, Options{MaxConnsPerIP: 1})
	if err := echoOnce(dial(t, s)); err != nil {
		t.Fatal(err)
	}
	expectEOF(t, dial(t, s))
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	other, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := echoOnce(other); err != nil {
		t.Fatalf("another address is not bound by the first's limit: %v", err)
	}
}
