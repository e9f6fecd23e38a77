package ownership

import (
	"context"
	"errors"
	"net"
	"net/url"
	"syscall"
	"time"
)

// A broker killed outright (kill -9, a crash, its host's power) leaves its
// ownership nodes behind until its metadata session expires. Until then a
// lookup found the dead broker as the owner and sent the client there; the
// client's connection was refused, it backed off and looked up again, and
// by the time the bundle was free its backoff had grown to seconds: the
// official Go client reconnected 6-8 s after a broker's death with 4 s
// sessions (docs/chaos). So a lookup that finds an owner whose service port
// refuses connections holds the answer until the node is gone, then takes
// or assigns the bundle as for any free one, and the client connects to the
// new owner as soon as there is one.
//
// Only a refused connection counts as gone: a broker that is alive but slow,
// stopped (SIGSTOP) or out of reach answers a connect with silence or a
// timeout, and keeps its bundles as before.

// probe is the outcome of one liveness check of an owner's service port.
type probe struct {
	gone bool
	at   time.Time
}

const (
	// probeTimeout bounds one connect to an owner's service port.
	probeTimeout = 250 * time.Millisecond
	// goneTTL and aliveTTL are how long a probe's outcome is reused: a
	// burst of lookups for one dead broker's topics costs one connect, not
	// one each; a live owner is probed again soon, since a kill in between
	// would otherwise send clients to it for the whole TTL.
	goneTTL  = time.Second
	aliveTTL = 200 * time.Millisecond
	// maxProbes bounds the cache (a cluster has far fewer brokers).
	maxProbes = 1024
)

// ownerGone reports whether od's broker refuses connections on the service
// port clients are told to use.
func (s *Service) ownerGone(ctx context.Context, od OwnerData) bool {
	if od.NativeURL == s.self.NativeURL {
		return false
	}
	return s.serviceGone(ctx, serviceAddr(od.NativeURL, od.NativeURLTLS))
}

// brokerGone is ownerGone for a broker of the registry (the leader, or the
// least loaded one, whose registration also outlives it until its session
// expires).
func (s *Service) brokerGone(ctx context.Context, bd BrokerData) bool {
	if bd.WebServiceURL == s.cfg.WebServiceURL {
		return false
	}
	return s.serviceGone(ctx, serviceAddr(bd.PulsarServiceURL, bd.PulsarServiceURLTLS))
}

// serviceGone reports whether the broker at addr refuses connections (a
// probe, cached).
func (s *Service) serviceGone(ctx context.Context, addr string) bool {
	if addr == "" {
		return false
	}
	now := time.Now()
	s.mu.Lock()
	p, ok := s.mu.probes[addr]
	s.mu.Unlock()
	if ok && (p.gone && now.Sub(p.at) < goneTTL || !p.gone && now.Sub(p.at) < aliveTTL) {
		return p.gone
	}
	gone := s.cfg.OwnerRefuses(ctx, addr)
	s.mu.Lock()
	if len(s.mu.probes) >= maxProbes {
		clear(s.mu.probes)
	}
	s.mu.probes[addr] = probe{gone: gone, at: now}
	s.mu.Unlock()
	if gone {
		s.log.Warn("broker refuses connections: lookups wait for its session to expire instead of sending clients there", "broker", addr)
	}
	return gone
}

// refuses connects to addr and reports whether the connection was refused.
func refuses(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: probeTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// serviceAddr is the host:port of the owner's binary protocol service (the
// plaintext port, else the TLS one).
func serviceAddr(urls ...string) string {
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			return u.Host
		}
	}
	return ""
}

// waitGone waits until b's ownership node is no longer the one a dead
// broker left (its session expired, another broker took over, or the dead
// broker, restarted under the same address, took the bundle again: the
// node is then new though it names the same broker, so nodes are told apart
// by their creation id, not their content), at most the session timeout and
// two seconds more: the node goes within the session timeout of the death,
// so a longer wait means the owner was not dead after all.
//
// It also ends when the dead broker accepts connections again (restarted:
// the node may already be its new run's, taken before this wait read it)
// or the node names another broker.
func (s *Service) waitGone(ctx context.Context, b Bundle, dead OwnerData) {
	_, first, found, err := s.owners.Get(ctx, b.path())
	if err != nil || !found {
		return
	}
	deadline := time.Now().Add(s.cfg.SessionTimeout + 2*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil && !s.closed() {
		od, st, found, err := s.owners.Get(ctx, b.path())
		if err != nil || !found || st.CreateID != first.CreateID || od.NativeURL != dead.NativeURL ||
			!s.ownerGone(ctx, dead) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
