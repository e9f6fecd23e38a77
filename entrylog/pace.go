package entrylog

import "time"

// pacer spreads a background write (a write-cache flush, a compaction)
// over time at FlushRate, so the device's queue never holds more than a
// chunk or two of it: a journal datasync on the same device then waits for
// little. It gives way as soon as ingest needs the room (hurry), so it
// never holds back adds. A nil pacer does not pace.
type pacer struct {
	rate  int64 // bytes a second
	start time.Time
	sent  int64
	hurry func() bool
	now   func() time.Time
	sleep func(time.Duration)
}

// pacer returns the pacer for one background write, or nil for writes
// someone waits on (Flush, Close) and when pacing is off.
func (s *shard) pacer(background bool) *pacer {
	if !background || s.opts.FlushRate <= 0 {
		return nil
	}
	return newPacer(s.opts.FlushRate, s.wc.pressed, time.Now, time.Sleep)
}

func newPacer(rate int64, hurry func() bool, now func() time.Time, sleep func(time.Duration)) *pacer {
	return &pacer{rate: rate, start: now(), hurry: hurry, now: now, sleep: sleep}
}

// paceStep is the longest the pacer sleeps without looking whether
// ingest needs it to hurry.
const paceStep = 2 * time.Millisecond

// wrote counts n bytes written and waits until the rate allows the next,
// in steps, so it stops waiting as soon as ingest needs the room.
func (p *pacer) wrote(n int64) {
	if p == nil {
		return
	}
	p.sent += n
	due := p.start.Add(time.Duration(float64(p.sent) / float64(p.rate) * float64(time.Second)))
	for wait := due.Sub(p.now()); wait > 0 && !p.hurry(); wait = due.Sub(p.now()) {
		p.sleep(min(wait, paceStep))
	}
}
