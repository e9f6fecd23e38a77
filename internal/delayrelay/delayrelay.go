// Package delayrelay is a TCP relay that adds a fixed one-way delay to each
// direction of every connection, so that tests and benchmarks on one
// machine can give a link a wide-area round trip (there is no netem here).
//
//	r, err := delayrelay.Listen("127.0.0.1:0", "127.0.0.1:3181", 2500*time.Microsecond, log)
//	defer r.Close()
//	dial r.Addr() instead of 127.0.0.1:3181: a request/response pair now takes 5 ms more
//
// Behavior:
//   - Each direction of a connection is a reader and a writer joined by a
//     bounded FIFO of chunks. The reader stamps each chunk with the time it
//     may leave (arrival + delay) and goes straight back to reading; the
//     writer waits for each chunk's time, then writes it. So every byte is
//     held for the delay, order is kept, and throughput is not cut by it:
//     many chunks are in flight at once, as on a long link. (A sleep per
//     read would serialise the link to one read per delay.)
//   - The FIFO holds at most maxChunks chunks of at most chunkSize bytes
//     per direction; when full, the reader stops reading and TCP's flow
//     control pushes back on the sender, as a link's buffers would.
//   - A half close is delayed like data: when one side stops writing, the
//     other sees EOF once the bytes before it have been delivered.
//   - A failed read or write on either side closes both connections (a
//     reset on a link is seen by both ends).
//   - Delays are kept to about 0.1 ms: a writer waits with nanosleep(2),
//     not a Go timer, which wakes up to a millisecond late (waitUntil).
//   - SetDelay applies to chunks read from then on; a chunk never leaves
//     before one read earlier (lowering the delay cannot reorder bytes).
//   - Close stops accepting, closes every relayed connection and waits for
//     its goroutines.
package delayrelay

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// chunkSize bounds one read (and so one queued chunk).
	chunkSize = 64 << 10
	// maxChunks bounds a direction's queue: at most 4 MiB waiting per
	// direction, far above what a loopback link carries in a few ms of
	// delay at the rates the tests run.
	maxChunks = 64
	// dialTimeout bounds the connection to the target.
	dialTimeout = 5 * time.Second
)

// Relay forwards connections accepted on its address to a target address.
type Relay struct {
	ln     net.Listener
	target string
	log    *slog.Logger
	delay  atomic.Int64 // one-way delay, nanoseconds
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		closed bool
		conns  map[net.Conn]struct{}
	}
}

// Listen starts a relay on listen (host:port; port 0 picks one) to target
// with a one-way delay in each direction. log may be nil (slog.Default()).
func Listen(listen, target string, delay time.Duration, log *slog.Logger) (*Relay, error) {
	if delay < 0 {
		return nil, fmt.Errorf("delayrelay: negative delay %s", delay)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("delayrelay: listen on %s for %s: %w", listen, target, err)
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Relay{ln: ln, target: target, log: log.With("relay", ln.Addr().String(), "target", target)}
	r.mu.conns = map[net.Conn]struct{}{}
	r.delay.Store(int64(delay))
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address the relay accepts on.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Target is the address the relay forwards to.
func (r *Relay) Target() string { return r.target }

// Delay is the current one-way delay.
func (r *Relay) Delay() time.Duration { return time.Duration(r.delay.Load()) }

// SetDelay changes the one-way delay of bytes read from now on.
func (r *Relay) SetDelay(d time.Duration) {
	r.delay.Store(int64(max(d, 0)))
}

// Close stops the relay: no new connections, every relayed one closed.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.mu.closed = true
	conns := r.mu.conns
	r.mu.conns = map[net.Conn]struct{}{}
	r.mu.Unlock()
	err := r.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
	r.wg.Wait()
	return err
}

// track registers c so Close can close it; false once the relay is closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return false
	}
	r.mu.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.mu.conns, c)
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("delay relay stopped accepting", "err", err)
			}
			return
		}
		r.wg.Add(1)
		go r.relay(in)
	}
}

// relay connects in to the target and pipes both directions until both
// ended or one failed.
func (r *Relay) relay(in net.Conn) {
	defer r.wg.Done()
	out, err := net.DialTimeout("tcp", r.target, dialTimeout)
	if err != nil {
		// The client sees its connection close, as it would see a refused
		// or unreachable target behind a real link.
		r.log.Debug("delay relay: target unreachable", "err", err)
		_ = in.Close()
		return
	}
	if !r.track(in) || !r.track(out) {
		_ = in.Close()
		_ = out.Close()
		r.untrack(in)
		return
	}
	defer func() {
		_ = in.Close()
		_ = out.Close()
		r.untrack(in)
		r.untrack(out)
	}()
	var once sync.Once
	abort := func() {
		once.Do(func() {
			_ = in.Close()
			_ = out.Close()
		})
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.pipe(out, in, abort) }()
	go func() { defer wg.Done(); r.pipe(in, out, abort) }()
	wg.Wait()
}

// chunk is bytes read at one time, due at due; eof marks the end of the
// direction (data nil).
type chunk struct {
	data []byte
	due  time.Time
	eof  bool
}

// pipe copies src to dst, each chunk held until its due time. abort closes
// both connections after a failure.
func (r *Relay) pipe(dst, src net.Conn, abort func()) {
	q := make(chan chunk, maxChunks)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.deliver(dst, q, abort)
	}()
	r.receive(src, q, abort)
	<-done
}

// receive reads src into stamped chunks until EOF or an error; it closes q.
func (r *Relay) receive(src net.Conn, q chan<- chunk, abort func()) {
	defer close(q)
	var last time.Time
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// Never due before the chunk ahead of it, so a lowered delay
			// cannot let later bytes overtake.
			due := time.Now().Add(time.Duration(r.delay.Load()))
			if due.Before(last) {
				due = last
			}
			last = due
			q <- chunk{data: append([]byte(nil), buf[:n]...), due: due}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			due := time.Now().Add(time.Duration(r.delay.Load()))
			if due.Before(last) {
				due = last
			}
			q <- chunk{due: due, eof: true}
			return
		}
		abort()
		return
	}
}

// deliver writes each chunk of q to dst at its due time; at the end marker
// it half-closes dst. After a failed write it aborts the connection and
// drains q so receive is never blocked.
func (r *Relay) deliver(dst net.Conn, q <-chan chunk, abort func()) {
	failed := false
	for c := range q {
		if failed {
			continue
		}
		waitUntil(c.due)
		if c.eof {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			failed = true
			abort()
		}
	}
}

// waitUntil returns at due. A Go timer wakes up to a millisecond late here
// (a 2.5 ms time.Sleep measured 3.2 ms: the poller's timeout is in
// milliseconds), which would add well over a millisecond to every emulated
// 5 ms round trip; nanosleep(2) on the goroutine's thread wakes within
// about 0.1 ms. The thread blocks in the system call meanwhile (the
// runtime runs other goroutines on others), one per direction waiting.
func waitUntil(due time.Time) {
	// Bounded by due: a signal (the runtime's preemption) can end a sleep
	// early, and the loop sleeps the rest.
	for wait := time.Until(due); wait > 0; wait = time.Until(due) {
		ts := syscall.NsecToTimespec(int64(wait))
		_ = syscall.Nanosleep(&ts, nil)
	}
}
