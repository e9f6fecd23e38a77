// Package gopool runs short tasks on goroutines that are kept for the next
// task instead of ending.
//
// A goroutine starts with a small stack and grows it by copying as its
// calls go deeper: a fresh goroutine per task pays that every time (on
// the in-process bookie's add path, through the entry log's write cache,
// about a tenth of the server's CPU went to growing stacks). A pooled
// goroutine keeps its grown stack. Go never blocks: with no goroutine
// idle, a new one starts, so a task that blocks holds only its own
// goroutine, as with the go statement. An idle goroutine ends one to two
// linger times after its last task, so an idle pool holds nothing.
package gopool

import (
	"sync"
	"time"
)

// Pool runs tasks on reused goroutines. The zero value is not usable: use
// New. A Pool needs no closing, its goroutines end within twice linger of
// their last task; Close ends them at once.
type Pool struct {
	// idle is unbuffered: a send succeeds only while a goroutine waits
	// in receive, so a task is never queued behind another.
	idle   chan func()
	linger time.Duration
	// quit, closed by Close, ends idle goroutines without their linger.
	quit      chan struct{}
	closeOnce sync.Once
}

// New returns a pool whose idle goroutines end linger to twice linger
// after their last task.
func New(linger time.Duration) *Pool {
	return &Pool{idle: make(chan func()), linger: linger, quit: make(chan struct{})}
}

// Close ends the idle goroutines now rather than after the linger time;
// running tasks finish. Go still works after Close: each task then runs
// on a goroutine that ends with it.
func (p *Pool) Close() {
	p.closeOnce.Do(func() { close(p.quit) })
}

// Go runs fn on an idle goroutine of the pool, or on a new one.
func (p *Pool) Go(fn func()) {
	select {
	case p.idle <- fn:
	default:
		go p.work(fn)
	}
}

// work runs fn, then the tasks handed to it while it waits, until a whole
// linger period passed without one (so it ends linger to twice linger
// after its last task). The timer is re-armed once a period, not after
// every task: on the in-process bookie's path a Reset per task was a
// tenth of the pool's waiting.
func (p *Pool) work(fn func()) {
	t := time.NewTimer(p.linger)
	defer t.Stop()
	for {
		fn()
		fn = nil // an idle goroutine must not keep its last task's data alive
		ran := true
		for fn == nil {
			select {
			case fn = <-p.idle:
			case <-t.C:
				if !ran {
					return
				}
				ran = false
				t.Reset(p.linger)
			case <-p.quit:
				return
			}
		}
	}
}
