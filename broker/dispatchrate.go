package broker

// Dispatch rate limiting, as Pulsar's DispatchRateLimiter over its token
// buckets (AsyncTokenBucket, PIP-322): one limiter type for every
// dispatcher Pulsar throttles. Replicators use it today
// (replicatorDispatchRate, dispatchThrottlingRatePerReplicatorIn*);
// subscription and topic dispatch rates would use the same type with
// their own policy lookup.
//
// Behaviour:
//   - A rate is N messages and M bytes per period (each <= 0: no limit on
//     it). Each limited dimension is a bucket holding at most one
//     period's permits, refilled continuously at N (M) per period, so a
//     dispatcher idle for a while may send one period's worth at once,
//     never more.
//   - A dispatcher asks permits() before a read: it may read at most the
//     message permits left (it cannot know the bytes before reading), or
//     must wait while either bucket is empty. After sending it consume()s
//     what it sent, which may overdraw the buckets (a read's entries are
//     larger than expected); the debt is paid by waiting, so the average
//     rate holds over a few periods.
//   - setRate changes the rate in place and keeps the tokens, capped to
//     the new period's permits; off clears any debt.
//
// The clock is passed in, so the arithmetic is tested without sleeping.

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// dispatchRate is a limit: Msgs messages and Bytes bytes every Period.
type dispatchRate struct {
	Msgs, Bytes int64
	Period      time.Duration
}

// limited reports whether the rate limits anything.
func (r dispatchRate) limited() bool { return r.Period > 0 && (r.Msgs > 0 || r.Bytes > 0) }

// dispatchRateOf turns a DispatchRate policy into a rate; publishRate
// (messages and bytes a second in) is added when the policy is relative
// to it, as Pulsar's relativeToPublishRate.
func dispatchRateOf(p resources.DispatchRate, publishRate topicRates) dispatchRate {
	period := time.Duration(max(p.RatePeriodInSecond, 1)) * time.Second
	r := dispatchRate{Msgs: int64(p.DispatchThrottlingRateInMsg), Bytes: p.DispatchThrottlingRateInByte, Period: period}
	if p.RelativeToPublishRate {
		secs := period.Seconds()
		if r.Msgs > 0 {
			r.Msgs += int64(publishRate.MsgRateIn * secs)
		}
		if r.Bytes > 0 {
			r.Bytes += int64(publishRate.ThroughputIn * secs)
		}
	}
	return r
}

// dispatchLimiter holds a dispatcher to a dispatchRate. The zero value
// limits nothing.
type dispatchLimiter struct {
	mu          sync.Mutex
	rate        dispatchRate
	msgs, bytes float64   // tokens; negative is debt
	at          time.Time // when the tokens were last refilled
}

// setRate applies a new rate (unlimited when !r.limited()).
func (l *dispatchLimiter) setRate(r dispatchRate, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r == l.rate {
		return
	}
	if !l.rate.limited() { // starting: a full period's permits
		l.msgs, l.bytes, l.at = float64(r.Msgs), float64(r.Bytes), now
	}
	l.refillLocked(now)
	l.rate = r
	l.msgs, l.bytes = min(l.msgs, float64(r.Msgs)), min(l.bytes, float64(r.Bytes))
	if !r.limited() {
		l.msgs, l.bytes = 0, 0
	}
}

// refillLocked adds the permits earned since the last refill.
func (l *dispatchLimiter) refillLocked(now time.Time) {
	if !l.rate.limited() {
		return
	}
	elapsed := now.Sub(l.at)
	if elapsed <= 0 {
		return
	}
	l.at = now
	frac := float64(elapsed) / float64(l.rate.Period)
	if l.rate.Msgs > 0 {
		l.msgs = min(l.msgs+frac*float64(l.rate.Msgs), float64(l.rate.Msgs))
	}
	if l.rate.Bytes > 0 {
		l.bytes = min(l.bytes+frac*float64(l.rate.Bytes), float64(l.rate.Bytes))
	}
}

// permits is how many messages may be read now (math.MaxInt: no
// message limit) and, when none, how long until some may.
func (l *dispatchLimiter) permits(now time.Time) (msgs int, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.rate.limited() {
		return math.MaxInt, 0
	}
	l.refillLocked(now)
	// The time until a bucket holds one whole permit again.
	until := func(tokens float64, perPeriod int64) time.Duration {
		if perPeriod <= 0 || tokens >= 1 {
			return 0
		}
		return time.Duration((1 - tokens) / float64(perPeriod) * float64(l.rate.Period))
	}
	wait = max(until(l.msgs, l.rate.Msgs), until(l.bytes, l.rate.Bytes))
	if wait > 0 {
		return 0, max(wait, time.Millisecond)
	}
	if l.rate.Msgs <= 0 {
		return math.MaxInt, 0
	}
	return int(l.msgs), 0
}

// consume takes what was sent; the buckets may go into debt.
func (l *dispatchLimiter) consume(msgs, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.rate.limited() {
		return
	}
	if l.rate.Msgs > 0 {
		l.msgs -= float64(msgs)
	}
	if l.rate.Bytes > 0 {
		l.bytes -= float64(bytes)
	}
}

// acquire waits until some messages may be dispatched and returns how
// many (math.MaxInt: no limit). It returns 0 when stop or ctx ends
// first. The wait is sliced, so a rate lifted meanwhile applies within
// maxDispatchWait.
func (l *dispatchLimiter) acquire(ctx context.Context, stop <-chan struct{}) int {
	for {
		n, wait := l.permits(time.Now())
		if wait == 0 {
			return n
		}
		timer := time.NewTimer(min(wait, maxDispatchWait))
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0
		case <-stop:
			timer.Stop()
			return 0
		case <-timer.C:
		}
	}
}

// maxDispatchWait bounds one wait of acquire.
const maxDispatchWait = 100 * time.Millisecond
