package perfclient

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// maxShards bounds the histograms a run holds (two per shard, about
// 140 KiB each) however many clients it has.
const maxShards = 8

// latencies records one kind of latency (publish or end to end) from many
// client goroutines. Clients share a few shards so that they seldom wait
// on one another's lock, and memory stays fixed: nothing is kept per
// message.
type latencies struct {
	shards []*shard
}

// shard is the measured window's histogram and the current progress
// interval's, for the clients mapped to it.
type shard struct {
	mu       sync.Mutex
	window   *hdrhistogram.Histogram
	interval *hdrhistogram.Histogram
}

func newLatencies(clients int) *latencies {
	n := min(max(clients, 1), maxShards)
	l := &latencies{shards: make([]*shard, n)}
	for i := range l.shards {
		l.shards[i] = &shard{window: perfdisk.NewHist(), interval: perfdisk.NewHist()}
	}
	return l
}

// record adds d, taken by client, to the interval and, if inWindow, to
// the window. Out-of-range values are clamped as perfkit.Tally does.
func (l *latencies) record(client int, d time.Duration, inWindow bool) {
	us := min(max(d.Microseconds(), 1), perfkit.HistMaxUS)
	s := l.shards[client%len(l.shards)]
	s.mu.Lock()
	_ = s.interval.RecordValue(us) // in range by the clamp above
	if inWindow {
		_ = s.window.RecordValue(us)
	}
	s.mu.Unlock()
}

// takeInterval returns what was recorded since the last call and starts
// a new interval.
func (l *latencies) takeInterval() *hdrhistogram.Histogram {
	h := perfdisk.NewHist()
	for _, s := range l.shards {
		s.mu.Lock()
		h.Merge(s.interval)
		s.interval.Reset()
		s.mu.Unlock()
	}
	return h
}

// windowHist merges the window's histograms.
func (l *latencies) windowHist() *hdrhistogram.Histogram {
	h := perfdisk.NewHist()
	for _, s := range l.shards {
		s.mu.Lock()
		h.Merge(s.window)
		s.mu.Unlock()
	}
	return h
}

// counters are the run's counts. The *Ops and *Bytes counts cover the
// whole run, for the live line and the timeline; published, pubErrs and
// consumed cover the measured window only.
type counters struct {
	pubOps, pubBytes, pubErrsAll atomic.Int64
	conOps, conBytes             atomic.Int64
	published, pubErrs, consumed atomic.Int64
	conWindowBytes               atomic.Int64
	// lastAck is when (nanoseconds after the run's start) the latest
	// acknowledgement of a measured message came, which ends a producing
	// run's window.
	lastAck atomic.Int64
}

// acked counts one acknowledgement at offset since the run's start.
func (c *counters) acked(bytes int, inWindow bool, err error, offset time.Duration) {
	if err != nil {
		c.pubErrsAll.Add(1)
		if inWindow {
			c.pubErrs.Add(1)
		}
		return
	}
	c.pubOps.Add(1)
	c.pubBytes.Add(int64(bytes))
	if !inWindow {
		return
	}
	c.published.Add(1)
	for {
		last := c.lastAck.Load()
		if int64(offset) <= last || c.lastAck.CompareAndSwap(last, int64(offset)) {
			return
		}
	}
}

// budget hands out at most n measured messages (n == 0: no limit); done
// closes when the last is taken.
type budget struct {
	n    int64
	used atomic.Int64
	done chan struct{}
}

func newBudget(n int64) *budget { return &budget{n: n, done: make(chan struct{})} }

// take claims one message; false once the budget is spent.
func (b *budget) take() bool {
	if b.n == 0 {
		return true
	}
	u := b.used.Add(1)
	if u == b.n {
		close(b.done)
	}
	return u <= b.n
}
