package broker

import (
	"sync/atomic"
	"time"
)

// topicRates are a topic's rates over the last stats interval
// (statsUpdateFrequencyInSecs): what topic stats and load reports show.
type topicRates struct {
	MsgRateIn, MsgRateOut, ThroughputIn, ThroughputOut float64
	MsgDropRate                                        float64 // non-persistent topics
}

// rateWindow turns a topic's counters into rates once per stats interval.
type rateWindow struct {
	prev  rateSample
	rates atomic.Pointer[topicRates]
}

// update computes the rates since the previous update. Called by one
// goroutine (the broker's stats ticker).
func (w *rateWindow) update(s *topicStats, now time.Time) {
	cur := rateSample{at: now, msgsIn: s.msgsIn.Load(), bytesIn: s.bytesIn.Load(),
		msgsOut: s.msgsOut.Load(), bytesOut: s.bytesOut.Load(), msgsDropped: s.msgsDropped.Load()}
	prev := w.prev
	w.prev = cur
	secs := now.Sub(prev.at).Seconds()
	if prev.at.IsZero() || secs <= 0 {
		return
	}
	w.rates.Store(&topicRates{
		MsgRateIn:     float64(cur.msgsIn-prev.msgsIn) / secs,
		MsgRateOut:    float64(cur.msgsOut-prev.msgsOut) / secs,
		ThroughputIn:  float64(cur.bytesIn-prev.bytesIn) / secs,
		ThroughputOut: float64(cur.bytesOut-prev.bytesOut) / secs,
		MsgDropRate:   float64(cur.msgsDropped-prev.msgsDropped) / secs,
	})
}

// current is the last computed rates (zero before the first interval).
func (w *rateWindow) current() topicRates {
	if r := w.rates.Load(); r != nil {
		return *r
	}
	return topicRates{}
}

// updateRates refreshes every loaded topic's rates.
func (b *Broker) updateRates() {
	now := time.Now()
	for t := range b.topicPass() {
		t.rates.update(&t.stats, now)
		t.updateReplicationRates(now)
	}
}
