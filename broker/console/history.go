package console

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// HistoryInterval is how often a topic's figures are sampled, and
// HistorySamples how many are kept: the topic page's charts cover the
// last HistoryInterval * HistorySamples (5 minutes). A sample is 56 bytes,
// a topic's ring about 3.5 KiB, so a broker with 10,000 topics holds about
// 34 MiB of history (TestRingSize).
const (
	HistoryInterval = 5 * time.Second
	HistorySamples  = 60
)

// Sample is a topic's figures at T (Unix ms, a multiple of the interval).
type Sample struct {
	T int64 `json:"t"`
	Rates
	Backlog     int64 `json:"backlog"`
	StorageSize int64 `json:"storageSize"`
}

// History is a topic's samples, oldest first.
type History struct {
	IntervalSeconds int      `json:"intervalSeconds"`
	Samples         []Sample `json:"samples"`
}

// Counters are a topic's cumulative counters and current sizes, read at
// each sampling.
type Counters struct {
	MsgsIn, MsgsOut, BytesIn, BytesOut int64
	Backlog, StorageSize               int64
}

// Ring keeps a topic's last HistorySamples samples. Record is called by
// one goroutine (the broker's sampler); Snapshot by any.
type Ring struct {
	mu      sync.Mutex
	samples [HistorySamples]Sample
	n, next int
	prev    Counters
	prevAt  time.Time
}

// Record turns the counters at now into a sample (rates since the last
// call; the first call only sets the base).
func (r *Ring) Record(c Counters, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, prevAt := r.prev, r.prevAt
	r.prev, r.prevAt = c, now
	secs := now.Sub(prevAt).Seconds()
	if prevAt.IsZero() || secs <= 0 {
		return
	}
	rate := func(cur, old int64) float64 { return float64(max(cur-old, 0)) / secs }
	s := Sample{T: now.Truncate(HistoryInterval).UnixMilli(), Backlog: c.Backlog, StorageSize: c.StorageSize,
		Rates: Rates{MsgRateIn: rate(c.MsgsIn, prev.MsgsIn), MsgRateOut: rate(c.MsgsOut, prev.MsgsOut),
			MsgThroughputIn: rate(c.BytesIn, prev.BytesIn), MsgThroughputOut: rate(c.BytesOut, prev.BytesOut)}}
	if last := r.lastLocked(); last != nil && last.T == s.T {
		*last = s // a late tick within the same interval replaces its sample
		return
	}
	r.samples[r.next] = s
	r.next = (r.next + 1) % HistorySamples
	r.n = min(r.n+1, HistorySamples)
}

func (r *Ring) lastLocked() *Sample {
	if r.n == 0 {
		return nil
	}
	return &r.samples[(r.next+HistorySamples-1)%HistorySamples]
}

// Last is the newest sample (zero before the first), without copying
// the ring.
func (r *Ring) Last() Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last := r.lastLocked(); last != nil {
		return *last
	}
	return Sample{}
}

// Snapshot is the kept samples, oldest first.
func (r *Ring) Snapshot() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Sample, 0, r.n)
	for i := range r.n {
		out = append(out, r.samples[(r.next-r.n+i+HistorySamples)%HistorySamples])
	}
	return History{IntervalSeconds: int(HistoryInterval / time.Second), Samples: out}
}

// SumHistories adds histories sample by sample at equal times (the
// partitions of a partitioned topic, sampled on one clock grid); a time
// only some have counts what they have.
func SumHistories(hs []History) History {
	byT := map[int64]*Sample{}
	for _, h := range hs {
		for _, s := range h.Samples {
			sum, ok := byT[s.T]
			if !ok {
				sum = &Sample{T: s.T}
				byT[s.T] = sum
			}
			sum.Rates.Add(s.Rates)
			sum.Backlog += s.Backlog
			sum.StorageSize += s.StorageSize
		}
	}
	out := make([]Sample, 0, len(byT))
	for _, s := range byT {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Sample) int { return cmp.Compare(a.T, b.T) })
	if len(out) > HistorySamples {
		out = out[len(out)-HistorySamples:]
	}
	return History{IntervalSeconds: int(HistoryInterval / time.Second), Samples: out}
}
