package broker

// Subscribe rate, as Pulsar's SubscribeRateLimiter: one consumer, known by
// its client's address and its consumer name, may subscribe to a topic at
// most N times per period; a SUBSCRIBE past that gets NotAllowedError
// "Subscribe limited by subscribe rate limit per consumer." and the client
// retries later. It bounds a client stuck in a subscribe loop (each
// subscribe reads the cursor, maybe from the bookies).
//
// The rate in force is the topic's subscribeRate, else its namespace's
// clusterSubscribeRate for this cluster, else the broker's
// subscribeThrottlingRatePerConsumer per subscribeRatePeriodPerConsumerInSecond
// (0: no limit). Buckets are per consumer and hold one period's subscribes;
// those unused for two periods are dropped at the next refresh, so the
// table is bounded by the consumers active lately.

import (
	"net"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// subscribeLimits are a topic's per-consumer subscribe buckets.
type subscribeLimits struct {
	mu      sync.Mutex
	rate    dispatchRate                // guarded by mu; Msgs are subscribes
	buckets map[string]*subscribeBucket // guarded by mu; by consumer identity
}

type subscribeBucket struct {
	lim  dispatchLimiter
	last time.Time
}

// subscribeRate is the subscribe rate in force: the topic's own (own),
// else its namespace's for this cluster, else the broker's.
func (b *Broker) subscribeRate(ns resources.Policies, own *resources.SubscribeRate) resources.SubscribeRate {
	s := b.settings()
	return inForce(own, ns.ClusterSubscribeRate, b.cfg.ClusterName,
		resources.SubscribeRate{SubscribeThrottlingRatePerConsumer: int(s.subscribeRate), RatePeriodInSecond: int(s.subscribePeriod)})
}

// refreshSubscribeRate applies r, the rate in force, drops buckets unused
// for two periods (refreshDispatchRates calls it), and reports whether r
// limits anything.
func (t *topic) refreshSubscribeRate(r resources.SubscribeRate, now time.Time) (limited bool) {
	rate := dispatchRate{Msgs: int64(r.SubscribeThrottlingRatePerConsumer), Period: time.Duration(max(r.RatePeriodInSecond, 1)) * time.Second}
	l := &t.subscribeLimits
	l.mu.Lock()
	defer l.mu.Unlock()
	if rate != l.rate {
		l.rate, l.buckets = rate, nil
	}
	for id, bk := range l.buckets {
		if now.Sub(bk.last) > 2*rate.Period {
			delete(l.buckets, id)
		}
	}
	return rate.limited()
}

// admitSubscribe takes one subscribe of consumer id (address and name)
// from its bucket, or reports that it has none left.
func (t *topic) admitSubscribe(id string, now time.Time) bool {
	l := &t.subscribeLimits
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.rate.limited() {
		return true
	}
	bk := l.buckets[id]
	if bk == nil {
		if l.buckets == nil {
			l.buckets = map[string]*subscribeBucket{}
		}
		bk = &subscribeBucket{}
		bk.lim.setRate(l.rate, now)
		l.buckets[id] = bk
	}
	bk.last = now
	if _, wait := bk.lim.permits(now); wait > 0 {
		return false
	}
	bk.lim.consume(1, 0)
	return true
}

// remoteHost is the client's address without its port: a consumer that
// reconnects from a new port is the same consumer.
func (c *serverConn) remoteHost() string {
	a := c.t.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}
