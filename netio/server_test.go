package netio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// randomFrames makes n frames with payloads of seeded random sizes: mostly
// small, some larger than the read buffer, a few much larger.
func randomFrames(rng *rand.Rand, n int) [][]byte {
	frames := make([][]byte, n)
	for i := range frames {
		var size int
		switch r := rng.IntN(100); {
		case r < 70:
			size = 1 + rng.IntN(64)
		case r < 95:
			size = 1 + rng.IntN(8<<10)
		default:
			size = 1 + rng.IntN(200<<10)
		}
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		frames[i] = mkFrame(p)
	}
	return frames
}

// writeStream sends frames in the style of mode: 0 one byte per write for
// the first 40 frames then random chunks, 1 random chunks, 2 several whole
// frames per write.
func writeStream(c net.Conn, rng *rand.Rand, frames [][]byte, mode int) error {
	switch mode {
	case 0:
		for _, f := range frames[:min(40, len(frames))] {
			for i := range f {
				if _, err := c.Write(f[i : i+1]); err != nil {
					return err
				}
			}
		}
		return writeChunks(c, rng, bytes.Join(frames[min(40, len(frames)):], nil))
	case 1:
		return writeChunks(c, rng, bytes.Join(frames, nil))
	default:
		for len(frames) > 0 {
			k := min(len(frames), 1+rng.IntN(8))
			if _, err := c.Write(bytes.Join(frames[:k], nil)); err != nil {
				return err
			}
			frames = frames[k:]
		}
		return nil
	}
}

func writeChunks(c net.Conn, rng *rand.Rand, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(3000))
		if _, err := c.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// TestEchoManyClients: every frame comes back intact and in order, however
// the client cuts the stream, with frames spanning reads and the inbound
// ring buffer.
func TestEchoManyClients(t *testing.T) {
	for _, loops := range []int{1, 2} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) {
			rec := newRecorder()
			s, _ := start(t, rec, Options{NumEventLoop: loops, ReadBufferCap: 4096})
			const clients, frames = 6, 150
			var wg sync.WaitGroup
			errs := make(chan error, 2*clients)
			for i := range clients {
				rng := rand.New(rand.NewPCG(uint64(i), 42))
				fs := randomFrames(rng, frames)
				c := dial(t, s)
				wg.Add(2)
				go func() {
					defer wg.Done()
					errs <- writeStream(c, rng, fs, i%3)
				}()
				go func() {
					defer wg.Done()
					errs <- readEcho(c, fs)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func readEcho(c net.Conn, want [][]byte) error {
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i, w := range want {
		got, err := readFrame(c)
		if err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
		if !bytes.Equal(got, w) {
			return fmt.Errorf("frame %d: got %d bytes, want %d (or content differs)", i, len(got), len(w))
		}
	}
	return nil
}

// TestEchoSplitEveryByte sends a short stream in two writes, cut at every
// byte boundary, pausing between them so the server sees the first part
// alone.
func TestEchoSplitEveryByte(t *testing.T) {
	rec := newRecorder()
	s, _ := start(t, rec, Options{})
	c := dial(t, s)
	frames := [][]byte{mkFrame([]byte("x")), mkFrame(bytes.Repeat([]byte("y"), 9)), mkFrame(bytes.Repeat([]byte("z"), 200))}
	buf := bytes.Join(frames, nil)
	for k := 1; k < len(buf); k++ {
		if _, err := c.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Microsecond)
		if _, err := c.Write(buf[k:]); err != nil {
			t.Fatal(err)
		}
		if err := readEcho(c, frames); err != nil {
			t.Fatalf("split at %d: %v", k, err)
		}
	}
}

func TestBadFrameClosesOnlyThatConnection(t *testing.T) {
	cases := []struct {
		name    string
		prefix  []byte
		wantErr error
		wantLog []string
	}{
		{"oversized", []byte{0, 0, 4, 1}, ErrFrameTooLarge, []string{"size 1025 bytes exceeds the limit of 1024"}},
		{"zero", []byte{0, 0, 0, 0}, ErrEmptyFrame, []string{"frame of size 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			s, logs := start(t, rec, Options{MaxFrameSize: 1024})
			good := dial(t, s)
			rec.nextOpen(t)
			bad := dial(t, s)
			badConn := rec.nextOpen(t)
			if _, err := bad.Write(append(tc.prefix, 1, 2, 3)); err != nil {
				t.Fatal(err)
			}
			ev := rec.nextClose(t)
			if ev.c != badConn || !errors.Is(ev.err, tc.wantErr) {
				t.Fatalf("OnClose(%v, %v), want the bad connection with %v", ev.c.RemoteAddr(), ev.err, tc.wantErr)
			}
			expectEOF(t, bad)
			want := append([]string{"connection closed", bad.LocalAddr().String()}, tc.wantLog...)
			if n := len(logs.lines(want...)); n != 1 {
				t.Fatalf("%d log lines with %q, want 1:\n%s", n, want, logs)
			}
			frame := mkFrame([]byte("still here"))
			good.Write(frame)
			if err := readEcho(good, [][]byte{frame}); err != nil {
				t.Fatalf("other connection: %v", err)
			}
		})
	}
}

func TestHandlerErrorClosesOnlyThatConnection(t *testing.T) {
	rec := newRecorder()
	errBad := errors.New("bad command")
	rec.onFrame = func(c *Conn, frame []byte) error {
		if string(frame[4:]) == "bad" {
			// Written before the error: must reach the client before the close.
			c.Write(mkFrame([]byte("error reply")))
			return fmt.Errorf("handler: %w", errBad)
		}
		return rec.echo(c, frame)
	}
	s, logs := start(t, rec, Options{})
	good := dial(t, s)
	rec.nextOpen(t)
	bad := dial(t, s)
	rec.nextOpen(t)
	bad.Write(mkFrame([]byte("bad")))
	if err := readEcho(bad, [][]byte{mkFrame([]byte("error reply"))}); err != nil {
		t.Fatalf("reply before close: %v", err)
	}
	expectEOF(t, bad)
	if ev := rec.nextClose(t); !errors.Is(ev.err, errBad) {
		t.Fatalf("OnClose err %v", ev.err)
	}
	if n := len(logs.lines("level=INFO", "connection closed", bad.LocalAddr().String(), "bad command")); n != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", n, logs)
	}
	frame := mkFrame([]byte("ok"))
	good.Write(frame)
	if err := readEcho(good, [][]byte{frame}); err != nil {
		t.Fatal(err)
	}
}

func TestCloseFromAnotherGoroutine(t *testing.T) {
	rec := newRecorder()
	s, logs := start(t, rec, Options{})
	client := dial(t, s)
	c := rec.nextOpen(t)
	reason := errors.New("topic deleted")
	go func() {
		// Written before the close, so it arrives before it.
		c.Write(mkFrame([]byte("bye")))
		c.Close(reason)
		for range 2 {
			go c.Close(errors.New("again")) // harmless, and not logged
		}
	}()
	if err := readEcho(client, [][]byte{mkFrame([]byte("bye"))}); err != nil {
		t.Fatal(err)
	}
	expectEOF(t, client)
	if ev := rec.nextClose(t); ev.err != reason {
		t.Fatalf("OnClose err %v", ev.err)
	}
	waitFor(t, "Closed", c.Closed)
	if err := c.Write([]byte("late")); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("Write after close: %v", err)
	}
	called := false
	if err := c.WriteThen(func(error) { called = true }, []byte("late")); err == nil || called {
		t.Fatalf("WriteThen after close: %v, done called %v", err, called)
	}
	if n := len(logs.lines("connection closed", "topic deleted")); n != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", n, logs)
	}
}

func TestPeerCloseReportsEOF(t *testing.T) {
	rec := newRecorder()
	s, _ := start(t, rec, Options{})
	client := dial(t, s)
	rec.nextOpen(t)
	client.Close()
	if ev := rec.nextClose(t); !errors.Is(ev.err, io.EOF) {
		t.Fatalf("OnClose err %v, want EOF", ev.err)
	}
}

// TestServerCloseWithOpenConnections: every connection gets OnClose with
// ErrServerClosed, and no goroutine is left behind.
func TestServerCloseWithOpenConnections(t *testing.T) {
	base := runtime.NumGoroutine()
	rec := newRecorder()
	logger, _ := newLogger()
	s, err := Listen(rec, Options{Addr: "127.0.0.1:0", NumEventLoop: 2, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var clients []net.Conn
	for range n {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		rec.nextOpen(t)
	}
	waitFor(t, "connections counted", func() bool { return s.NumConns() == n })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range n {
		if ev := rec.nextClose(t); !errors.Is(ev.err, ErrServerClosed) {
			t.Fatalf("OnClose err %v", ev.err)
		}
	}
	for _, c := range clients {
		expectEOF(t, c)
		c.Close()
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Close")
	}
	settleGoroutines(t, base)
}

// A connection accepted while the server closes is closed too, never
// left open with nobody reading it: a client reconnecting to a restarting
// broker waited for its handshake timeout (30 s for the Go client) on
// such a connection. Checked on the server's side of each connection, in
// /proc/net/tcp: the kernel itself may drop the server's half of a
// handshake that completes as the listener closes, without a reset (any
// server's close(2) of a listener has that race), and such a client
// learns only by keepalive; that is not what this test is about.
func TestConnectionsDialedDuringCloseAreClosed(t *testing.T) {
	for round := range 30 {
		s, err := Listen(newRecorder(), Options{Addr: "127.0.0.1:0", NumEventLoop: 2, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		port := s.Addr().(*net.TCPAddr).Port
		conns := dialUntilRefused(s.Addr().String(), 4, 256, time.Duration(round%5)*time.Millisecond, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		deadline := time.Now().Add(3 * time.Second)
		for {
			open, err := serverSidesOpen(port, conns)
			if err != nil {
				t.Fatal(err)
			}
			if open == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of %d connections dialed while the server closed are still open on its side 3 s after Close returned",
					round, open, len(conns))
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, c := range conns {
			c.Close()
		}
	}
}

// dialUntilRefused runs dialers that connect to addr until refused (or
// until max connections), calls closeServer after delay, and returns the
// connections made.
func dialUntilRefused(addr string, dialers, max int, delay time.Duration, closeServer func()) []net.Conn {
	conns := make(chan net.Conn, max)
	var wg sync.WaitGroup
	for range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return // the listener is gone
				}
				select {
				case conns <- c:
				default:
					c.Close()
					return
				}
			}
		}()
	}
	time.Sleep(delay)
	closeServer()
	wg.Wait()
	close(conns)
	var out []net.Conn
	for c := range conns {
		out = append(out, c)
	}
	return out
}

// serverSidesOpen counts the server's sides (IPv4 TCP sockets on local
// port port) of the clients' connections that are established or waiting
// for their owner to close (CLOSE_WAIT): a server that closed all its
// connections has none (its closes leave them in FIN_WAIT or TIME_WAIT).
func serverSidesOpen(port int, clients []net.Conn) (int, error) {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	peers := map[string]bool{}
	for _, c := range clients {
		peers[fmt.Sprintf(":%04X", c.LocalAddr().(*net.TCPAddr).Port)] = true
	}
	n := 0
	suffix := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || len(f[2]) < 5 {
			continue
		}
		if strings.HasSuffix(f[1], suffix) && peers[f[2][len(f[2])-5:]] && (f[3] == "01" || f[3] == "08") {
			n++
		}
	}
	return n, nil
}

func TestListenErrors(t *testing.T) {
	for _, addr := range []string{"", "udp://127.0.0.1:0", "tcp://256.0.0.1:1"} {
		if s, err := Listen(newRecorder(), Options{Addr: addr}); err == nil {
			s.Close(context.Background())
			t.Errorf("Listen(%q) succeeded", addr)
		}
	}
	if _, err := Listen(newRecorder(), Options{Addr: "127.0.0.1:0", MaxFrameSize: -1}); err == nil {
		t.Error("negative MaxFrameSize accepted")
	}
	rec := newRecorder()
	s, _ := start(t, rec, Options{})
	_, err := Listen(rec, Options{Addr: s.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), s.Addr().String()) {
		t.Fatalf("Listen on a used port: %v", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	rec := newRecorder()
	s, _ := start(t, rec, Options{IdleTimeout: 200 * time.Millisecond})
	idle := dial(t, s)
	idleConn := rec.nextOpen(t)
	busy := dial(t, s)
	rec.nextOpen(t)
	stop := time.After(600 * time.Millisecond)
	ping := mkFrame([]byte("ping"))
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-time.After(40 * time.Millisecond):
			busy.Write(ping)
			if err := readEcho(busy, [][]byte{ping}); err != nil {
				t.Fatalf("busy connection: %v", err)
			}
		}
	}
	ev := rec.nextClose(t)
	if ev.c != idleConn || !errors.Is(ev.err, ErrIdleTimeout) {
		t.Fatalf("OnClose %v", ev.err)
	}
	expectEOF(t, idle)
	select {
	case ev := <-rec.closes:
		t.Fatalf("busy connection closed: %v", ev.err)
	default:
	}
}
