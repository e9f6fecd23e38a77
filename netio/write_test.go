package netio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// writerFrame is frame seq of writer id, cut into four buffers: prefix,
// [id seq], and two halves of a filler derived from (id, seq), so a frame
// whose buffers were interleaved with another's fails the check.
func writerFrame(id, seq int) [][]byte {
	fill := bytes.Repeat([]byte{byte(id*31 + seq)}, 1+(id*7+seq*13)%700)
	head := make([]byte, 8)
	binary.BigEndian.PutUint32(head, uint32(id))
	binary.BigEndian.PutUint32(head[4:], uint32(seq))
	prefix := make([]byte, 4)
	binary.BigEndian.PutUint32(prefix, uint32(len(head)+len(fill)))
	return [][]byte{prefix, head, fill[:len(fill)/2], fill[len(fill)/2:]}
}

// checkWriterFrame returns the writer and sequence of a frame, verifying
// its filler.
func checkWriterFrame(f []byte) (id, seq int, err error) {
	if len(f) < 12 {
		return 0, 0, fmt.Errorf("short frame %d", len(f))
	}
	id, seq = int(binary.BigEndian.Uint32(f[4:])), int(binary.BigEndian.Uint32(f[8:]))
	want := writerFrame(id, seq)
	if !bytes.Equal(f, bytes.Join(want, nil)) {
		return id, seq, fmt.Errorf("frame of writer %d seq %d is mangled", id, seq)
	}
	return id, seq, nil
}

// TestConcurrentWriters: many goroutines write multi-buffer frames to one
// connection while the loop answers the client's pings from OnFrame; every
// frame arrives whole and each writer's frames in order.
func TestConcurrentWriters(t *testing.T) {
	const writers, perWriter, pings, pingWriter = 8, 300, 200, 100
	rec := newRecorder()
	var pingSeq atomic.Int64
	rec.onFrame = func(c *Conn, frame []byte) error {
		return c.Write(writerFrame(pingWriter, int(pingSeq.Add(1)-1))...)
	}
	s, _ := start(t, rec, Options{NumEventLoop: 2})
	client := dial(t, s)
	c := rec.nextOpen(t)

	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range perWriter {
				err := c.WriteThen(func(err error) {
					if err == nil {
						done.Add(1)
					}
				}, writerFrame(w, seq)...)
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range pings {
			client.Write(mkFrame([]byte("ping")))
		}
	}()

	next := map[int]int{}
	client.SetReadDeadline(time.Now().Add(60 * time.Second))
	for range writers*perWriter + pings {
		f, err := readFrame(client)
		if err != nil {
			t.Fatal(err)
		}
		id, seq, err := checkWriterFrame(f)
		if err != nil {
			t.Fatal(err)
		}
		if seq != next[id] {
			t.Fatalf("writer %d: seq %d, want %d", id, seq, next[id])
		}
		next[id]++
	}
	wg.Wait()
	waitFor(t, "all dones", func() bool { return done.Load() == writers*perWriter })
	if p := c.Pending(); p != 0 {
		t.Fatalf("Pending %d after everything was read", p)
	}
}

// dialSmallWindow connects with a small receive buffer so that the
// server's writes back up quickly.
func dialSmallWindow(t *testing.T, s *Server) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// bigFrame is frame seq of 16 KiB, in three buffers.
func bigFrame(seq int) [][]byte {
	head := make([]byte, 8)
	binary.BigEndian.PutUint32(head, 16<<10+4)
	binary.BigEndian.PutUint32(head[4:], uint32(seq))
	fill := bytes.Repeat([]byte{byte(seq)}, 16<<10)
	return [][]byte{head, fill[:100], fill[100:]}
}

// fillUntilCongested writes big frames until c is congested and stays so
// for a while (the socket buffers are full, not just the queue); it
// returns how many it wrote.
func fillUntilCongested(t *testing.T, c *Conn, done func(error)) int {
	t.Helper()
	n := 0
	for settled := false; !settled; {
		for !c.Congested() {
			if n >= 4096 {
				t.Fatalf("not congested after %d frames (Pending %d)", n, c.Pending())
			}
			if err := c.WriteThen(done, bigFrame(n)...); err != nil {
				t.Fatal(err)
			}
			n++
		}
		// Settled once the kernel takes no more: the server's send buffer
		// grows (tcp_wmem autotuning) and drains Pending for a while
		// after the first congestion, longer on a loaded machine.
		p := c.Pending()
		settled = true
		for range 3 {
			time.Sleep(20 * time.Millisecond)
			if !c.Congested() || c.Pending() != p {
				settled = false
				break
			}
		}
	}
	return n
}

// TestCongestion: a client that does not read makes the connection
// congested; once it reads, Drained fires and nothing was lost.
func TestCongestion(t *testing.T) {
	rec := newRecorder()
	s, _ := start(t, rec, Options{WriteBufferHighWater: 64 << 10})
	client := dialSmallWindow(t, s)
	c := rec.nextOpen(t)
	select {
	case <-c.Drained():
	default:
		t.Fatal("Drained of an idle connection is not closed")
	}
	n := fillUntilCongested(t, c, nil)
	drained := c.Drained()
	select {
	case <-drained:
		t.Fatal("drained while the client reads nothing")
	case <-time.After(50 * time.Millisecond):
	}
	if !c.Congested() || c.Pending() <= 32<<10 {
		t.Fatalf("congested %v with Pending %d", c.Congested(), c.Pending())
	}
	client.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := range n {
		f, err := readFrame(client)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f, bytes.Join(bigFrame(i), nil)) {
			t.Fatalf("frame %d differs", i)
		}
	}
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatalf("not drained; Pending %d", c.Pending())
	}
	if c.Congested() || c.Pending() > 32<<10 {
		t.Fatalf("after drain: congested %v, Pending %d", c.Congested(), c.Pending())
	}
}

// TestWriteThenDoneOnClose: every accepted write's done runs exactly once,
// when the connection or the server closes under a backlog.
func TestWriteThenDoneOnClose(t *testing.T) {
	for _, closeServer := range []bool{false, true} {
		t.Run(fmt.Sprintf("server=%v", closeServer), func(t *testing.T) {
			rec := newRecorder()
			logger, _ := newLogger()
			s, err := Listen(rec, Options{Addr: "127.0.0.1:0", WriteBufferHighWater: 64 << 10, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			dialSmallWindow(t, s)
			c := rec.nextOpen(t)
			var calls, failed atomic.Int64
			done := func(err error) {
				calls.Add(1)
				if err != nil {
					failed.Add(1)
				}
			}
			n := fillUntilCongested(t, c, done)
			// More writes racing with the close.
			var wg sync.WaitGroup
			var accepted atomic.Int64
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Until the close rejects them (bounded).
				for i := range 1 << 20 {
					if c.WriteThen(done, writerFrame(2, i)...) != nil {
						return
					}
					accepted.Add(1)
					if i%64 == 0 {
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
			drained := c.Drained()
			if closeServer {
				if err := s.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else {
				c.Close(nil)
			}
			wg.Wait()
			want := int64(n) + accepted.Load()
			waitFor(t, "every done", func() bool { return calls.Load() == want })
			time.Sleep(20 * time.Millisecond)
			if calls.Load() != want {
				t.Fatalf("%d dones for %d writes", calls.Load(), want)
			}
			t.Logf("%d writes, %d failed", want, failed.Load())
			select {
			case <-drained:
			case <-time.After(5 * time.Second):
				t.Fatal("Drained not closed by the close")
			}
		})
	}
}

// TestRepliesWaitForTheCallback: what OnFrame writes is queued and written
// when the callback returns, together with what other goroutines wrote
// meanwhile, and a write with many buffers stays contiguous.
func TestRepliesWaitForTheCallback(t *testing.T) {
	rec := newRecorder()
	pendingInside := make(chan int, 1)
	rec.onFrame = func(c *Conn, frame []byte) error {
		c.Write(mkFrame([]byte("reply")))
		wrote := make(chan struct{})
		go func() {
			// More buffers than one writev takes.
			bufs := make([][]byte, 0, 3000)
			bufs = append(bufs, []byte{0, 0, 0x0b, 0xb8})
			for range 3000 {
				bufs = append(bufs, []byte{'x'})
			}
			c.Write(bufs...)
			close(wrote)
		}()
		<-wrote
		pendingInside <- c.Pending()
		return nil
	}
	s, _ := start(t, rec, Options{})
	client := dial(t, s)
	rec.nextOpen(t)
	client.Write(mkFrame([]byte("hi")))
	if p := <-pendingInside; p != 9+4+3000 {
		t.Fatalf("Pending inside OnFrame %d, want everything still queued", p)
	}
	want := [][]byte{mkFrame([]byte("reply")), mkFrame(bytes.Repeat([]byte{'x'}, 3000))}
	if err := readEcho(client, want); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWaitsForAKickUnderWay: a writer kicks the loop after releasing
// the connection's lock; the close waits for that kick before the
// handler's OnClose, and so before the loop may exit and close the eventfd
// the kick writes to.
func TestCloseWaitsForAKickUnderWay(t *testing.T) {
	rec := newRecorder()
	s, _ := start(t, rec, Options{})
	paused, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.beforeKick = func() { once.Do(func() { close(paused); <-release }) }
	dial(t, s)
	c := rec.nextOpen(t)
	// OnOpen hands c over before it returns, and the flush the loop makes
	// after it is still pending then: a write that finds it pending rides
	// it and makes no kick (the flake in CI of 7 Dec).
	waitFor(t, "the flush after OnOpen", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.flushPending
	})
	wrote := make(chan error, 1)
	go func() { wrote <- c.WriteThen(nil, writerFrame(1, 0)...) }()
	select {
	case <-paused:
	case <-time.After(5 * time.Second):
		t.Fatal("the write did not kick the loop")
	}
	c.Close(nil)
	select {
	case <-rec.closes:
		t.Fatal("OnClose ran while a kick was under way")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-wrote; err != nil {
		t.Fatalf("the write: %v", err)
	}
	rec.nextClose(t)
}
