package broker

import (
	"math"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// The limiter's arithmetic on a fake clock: a period's burst, refill,
// debt paid by waiting, bytes, a rate lifted.
func TestDispatchLimiter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var l dispatchLimiter
	if n, wait := l.permits(t0); n != math.MaxInt || wait != 0 {
		t.Fatalf("zero value: %d %v, want no limit", n, wait)
	}
	l.setRate(dispatchRate{Msgs: 10, Period: time.Second}, t0)
	if n, wait := l.permits(t0); n != 10 || wait != 0 {
		t.Fatalf("start: %d %v, want a period's 10", n, wait)
	}
	l.consume(15, 100) // overdrawn by 5
	if n, wait := l.permits(t0); n != 0 || wait != 600*time.Millisecond {
		t.Fatalf("in debt: %d %v, want to wait 600ms for one permit", n, wait)
	}
	if n, _ := l.permits(t0.Add(800 * time.Millisecond)); n != 3 {
		t.Fatalf("after 800ms: %d, want 3", n)
	}
	if n, _ := l.permits(t0.Add(time.Hour)); n != 10 {
		t.Fatalf("after an hour: %d, want at most a period's 10", n)
	}

	var b dispatchLimiter
	b.setRate(dispatchRate{Bytes: 1000, Period: 2 * time.Second}, t0)
	if n, wait := b.permits(t0); n != math.MaxInt || wait != 0 {
		t.Fatalf("bytes only: %d %v", n, wait)
	}
	b.consume(1, 1500)
	if _, wait := b.permits(t0); wait != time.Second+2*time.Millisecond {
		t.Fatalf("bytes in debt: wait %v, want 1.002s (501 bytes at 500/s)", wait)
	}
	b.setRate(dispatchRate{}, t0)
	if n, wait := b.permits(t0); n != math.MaxInt || wait != 0 {
		t.Fatalf("lifted: %d %v", n, wait)
	}
}

// A policy becomes a rate; relativeToPublishRate adds the publish rate.
func TestDispatchRateOf(t *testing.T) {
	p := resources.DispatchRate{DispatchThrottlingRateInMsg: 100, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 2}
	in := topicRates{MsgRateIn: 30, ThroughputIn: 3000}
	if got, want := dispatchRateOf(p, in), (dispatchRate{Msgs: 100, Bytes: -1, Period: 2 * time.Second}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	p.RelativeToPublishRate = true
	if got, want := dispatchRateOf(p, in), (dispatchRate{Msgs: 160, Bytes: -1, Period: 2 * time.Second}); got != want {
		t.Fatalf("relative: got %+v, want %+v", got, want)
	}
}
