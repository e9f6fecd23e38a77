package netio

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/bytebufferpool"
)

// logBuf collects log output for assertions.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lines returns the log lines containing all of subs.
func (l *logBuf) lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func newLogger() (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// start listens on a free loopback port and closes the server at cleanup.
func start(t testing.TB, h Handler, opts Options) (*Server, *logBuf) {
	t.Helper()
	logger, lb := newLogger()
	opts.Addr = "tcp://127.0.0.1:0"
	opts.Logger = logger
	s, err := Listen(h, opts)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, lb
}

func dial(t testing.TB, s *Server) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mkFrame prefixes payload with its size.
func mkFrame(payload []byte) []byte {
	f := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(f, uint32(len(payload)))
	copy(f[4:], payload)
	return f
}

// readFrame reads one frame, prefix included.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > 64<<20 {
		return nil, fmt.Errorf("absurd frame size %d", size)
	}
	f := make([]byte, 4+size)
	copy(f, hdr[:])
	_, err := io.ReadFull(r, f[4:])
	return f, err
}

// closeEvent is one OnClose.
type closeEvent struct {
	c   *Conn
	err error
}

// recorder is a Handler that records opens and closes and calls onFrame
// (echo by default).
type recorder struct {
	opens   chan *Conn
	closes  chan closeEvent
	onOpen  func(c *Conn)
	onFrame func(c *Conn, frame []byte) error
	pool    bytebufferpool.Pool
}

func newRecorder() *recorder {
	r := &recorder{opens: make(chan *Conn, 1024), closes: make(chan closeEvent, 1024)}
	r.onFrame = r.echo
	return r
}

func (r *recorder) OnOpen(c *Conn) {
	if r.onOpen != nil {
		r.onOpen(c)
	}
	if r.opens != nil {
		r.opens <- c
	}
}

func (r *recorder) OnFrame(c *Conn, frame []byte) error { return r.onFrame(c, frame) }

func (r *recorder) OnClose(c *Conn, err error) {
	if r.closes != nil {
		r.closes <- closeEvent{c, err}
	}
}

// echo copies the frame into a pooled buffer (the frame dies with the call)
// and recycles it when the write is done.
func (r *recorder) echo(c *Conn, frame []byte) error {
	bb := r.pool.Get()
	bb.B = append(bb.B[:0], frame...)
	return c.WriteThen(func(error) { r.pool.Put(bb) }, bb.B)
}

func (r *recorder) nextOpen(t testing.TB) *Conn {
	t.Helper()
	select {
	case c := <-r.opens:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no OnOpen")
		return nil
	}
}

func (r *recorder) nextClose(t testing.TB) closeEvent {
	t.Helper()
	select {
	case ev := <-r.closes:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no OnClose")
		return closeEvent{}
	}
}

// expectEOF waits for the server to close c.
func expectEOF(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("connection not closed by the server")
		}
		return
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// settleGoroutines waits until no more goroutines run than base.
func settleGoroutines(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d, want <= %d\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
