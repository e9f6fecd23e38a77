package perfkit

import (
	"sync"
	"sync/atomic"
	"time"
)

// Phase is one load: its clients share the measuring and stop flags, the
// first failure, and the counters the live progress line reads.
type Phase struct {
	Measuring atomic.Bool
	Ops       atomic.Int64 // completed requests, measured or not
	Bytes     atomic.Int64 // their entry bytes
	stopped   atomic.Bool
	stop      chan struct{} // closed by Halt
	stopOnce  sync.Once

	mu struct {
		sync.Mutex
		err error
	}
}

// NewPhase returns a running phase, not measuring.
func NewPhase() *Phase { return &Phase{stop: make(chan struct{})} }

// Halt tells the clients to send no more; they then drain.
func (p *Phase) Halt() {
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		close(p.stop)
	})
}

// Stopped reports whether Halt (or Fail) was called.
func (p *Phase) Stopped() bool { return p.stopped.Load() }

// Done is closed once the phase is halted, for clients that wait in a
// select.
func (p *Phase) Done() <-chan struct{} { return p.stop }

// Fail records the first failure and halts the phase.
func (p *Phase) Fail(err error) {
	p.mu.Lock()
	if p.mu.err == nil {
		p.mu.err = err
	}
	p.mu.Unlock()
	p.Halt()
}

// Err is the first failure, if any.
func (p *Phase) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.err
}

// Completed counts one request of n entry bytes for the live line.
func (p *Phase) Completed(n int) {
	p.Ops.Add(1)
	p.Bytes.Add(int64(n))
}

// Sleep waits d, or less if the phase halts.
func (p *Phase) Sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.stop:
	}
}
