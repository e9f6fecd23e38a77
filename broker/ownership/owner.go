package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/internal/failover"
	"github.com/magnetar-io/magnetar/metadata"
)

// LookupResult says where a client should go for a topic.
type LookupResult struct {
	BrokerURL string // pulsar://host:port
	HTTPURL   string // http://host:port
	// BrokerURLTLS and HTTPURLTLS are the TLS ports' ("" when off).
	BrokerURLTLS, HTTPURLTLS string
	// Redirect: ask BrokerURL again (with Authoritative) rather than
	// connect to it.
	Redirect      bool
	Authoritative bool
	// Self: this broker serves the topic.
	Self bool
}

// Lookup finds, or assigns, the broker serving a topic of namespace ns
// (see the package doc for the rules). authoritative is set when the
// leader sent the client here to take the bundle.
func (s *Service) Lookup(ctx context.Context, ns, topic string, authoritative bool) (LookupResult, error) {
	if s.closed() {
		return s.lookupWhileStopping(ctx, ns, topic)
	}
	if res, ok := s.lookupWhileSuspended(ns, topic); ok {
		return res, nil
	}
	start := time.Now()
	b, err := s.BundleOf(ctx, ns, topic)
	if err != nil {
		return LookupResult{}, err
	}
	if od, found, err := s.Owner(ctx, b); err == nil && found && od.Disabled {
		s.waitReleased(ctx, b) // its owner is releasing it: send the client to the next one
	} else if err == nil && found && s.ownerGone(ctx, od) {
		s.waitGone(ctx, b, od) // its owner died: answer once its session has expired
		s.cfg.Failover.Since(failover.DeadOwnerWait, start)
	}
	if od, found, err := s.Owner(ctx, b); err != nil {
		return LookupResult{}, err
	} else if found && !od.Disabled && !s.maybeStale(b, od) {
		return s.connectTo(od), nil
	}
	unlock := s.lockBundle(b.String())
	defer unlock()
	if od, found, err := s.Owner(ctx, b); err != nil {
		return LookupResult{}, err
	} else if found && !s.staleSelf(ctx, b, od) {
		return s.connectTo(od), nil
	}
	candidate, redirect, err := s.candidate(ctx, b, authoritative)
	if err != nil {
		return LookupResult{}, err
	}
	if redirect {
		return candidate, nil
	}
	if !candidate.Self {
		candidate.Redirect, candidate.Authoritative = true, true
		return candidate, nil
	}
	res, err := s.acquire(ctx, b)
	if err == nil && res.Self {
		s.cfg.Failover.Since(failover.BundleAcquire, start)
	}
	return res, err
}

// candidate picks who should take an unowned bundle: this broker when
// asked authoritatively, the least loaded broker when this one leads (or
// no leader is known), else the leader, to which the client is redirected
// (redirect true).
func (s *Service) candidate(ctx context.Context, b Bundle, authoritative bool) (LookupResult, bool, error) {
	if authoritative {
		return LookupResult{Self: true}, false, nil
	}
	if !s.IsLeader() {
		leader, ok := s.leaderBroker(ctx)
		if ok && leader.WebServiceURL != s.cfg.WebServiceURL && !s.brokerGone(ctx, leader) {
			res := leader.lookupAt()
			res.Redirect = true
			return res, true, nil
		}
		// A dead leader's node outlives it until its session expires:
		// redirecting there would fail the client's lookup and grow its
		// backoff, so this broker places the bundle itself meanwhile.
	}
	id, data, err := s.leastLoaded(ctx, b)
	if err != nil {
		return LookupResult{}, false, err
	}
	if id == s.cfg.BrokerID || s.brokerGone(ctx, data) {
		return LookupResult{Self: true}, false, nil // not a dead broker's report
	}
	return data.lookupAt(), false, nil
}

// lookupWhileStopping answers a lookup on a broker that stopped serving:
// the owner, when another broker serves the bundle, else the broker this
// one hands its bundles to (successor), authoritatively, as the leader
// would, so that broker takes the bundle (once this one released it).
// Refused, the Go client backs off and asks here again: it sends its
// lookups down one connection, which stays open until this process exits.
// With the metadata session lost nothing can be read: ErrNotServing.
func (s *Service) lookupWhileStopping(ctx context.Context, ns, topic string) (LookupResult, error) {
	b, err := s.BundleOf(ctx, ns, topic)
	if err != nil {
		return LookupResult{}, fmt.Errorf("%w: %w", ErrNotServing, err)
	}
	if od, found, err := s.ownerInStore(ctx, b); err != nil {
		return LookupResult{}, fmt.Errorf("%w: %w", ErrNotServing, err)
	} else if found && !od.Disabled && od.NativeURL != s.self.NativeURL {
		return s.connectTo(od), nil
	}
	next := s.successor(ctx)
	if next == nil {
		return LookupResult{}, ErrNotServing
	}
	next.Redirect, next.Authoritative = true, true
	return *next, nil
}

// lookupWhileSuspended answers a lookup while the metadata session is
// suspended: the store is unreachable, so no owner can be read, but the
// session has not expired, so the bundles this broker owns are still its
// own. A topic of one of them is served here; any other is redirected to
// a peer this broker last saw registered (the least loaded by its last
// report), which can read the owner. Failed instead, after the store's
// timeouts, each lookup grows the client's backoff, and the client's
// next try may come seconds after another broker took the bundle. false:
// the session is not suspended, or no peer is known; the lookup reads the
// store as usual.
func (s *Service) lookupWhileSuspended(ns, topic string) (LookupResult, bool) {
	s.mu.Lock()
	suspended, peers := s.mu.suspended, s.mu.peers // peers is replaced, never changed
	s.mu.Unlock()
	if !suspended {
		return LookupResult{}, false
	}
	if _, owned := s.OwnedBundleOf(ns, topic); owned {
		return s.connectTo(s.self), true
	}
	if len(peers) == 0 {
		return LookupResult{}, false
	}
	res := peers[pickLeastLoaded(peers, nil, s.cfg.LoadBalancer.BrokerOverloadedThreshold)].lookupAt()
	res.Redirect = true
	return res, true
}

// lookupAt sends a client to broker d.
func (d BrokerData) lookupAt() LookupResult {
	return LookupResult{BrokerURL: d.PulsarServiceURL, HTTPURL: d.WebServiceURL,
		BrokerURLTLS: d.PulsarServiceURLTLS, HTTPURLTLS: d.WebServiceURLTLS}
}

func (s *Service) connectTo(od OwnerData) LookupResult {
	return LookupResult{BrokerURL: od.NativeURL, HTTPURL: od.HTTPURL, BrokerURLTLS: od.NativeURLTLS, HTTPURLTLS: od.HTTPURLTLS,
		Self: od.NativeURL == s.self.NativeURL}
}

// maybeStale reports whether od names this broker for a bundle it does
// not hold: the lookup then continues under the bundle's lock.
func (s *Service) maybeStale(b Bundle, od OwnerData) bool {
	if od.NativeURL != s.self.NativeURL {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, mine := s.mu.owned[b.String()]
	return !mine
}

// staleSelf handles an ownership node naming this broker's address that
// this process does not hold: it was left by an earlier run whose session
// has not expired yet. No other live broker can have our address, so the
// node is deleted and the bundle assigned afresh. The bundle's lock is
// held (lockBundle): no acquire or unload of it is under way here.
func (s *Service) staleSelf(ctx context.Context, b Bundle, od OwnerData) bool {
	if od.NativeURL != s.self.NativeURL {
		return false
	}
	s.mu.Lock()
	_, mine := s.mu.owned[b.String()]
	s.mu.Unlock()
	if mine {
		return false
	}
	s.log.Warn("removing a bundle ownership left by an earlier run of this broker", "bundle", b.String())
	err := s.store.Delete(ctx, b.path(), metadata.AnyVersion)
	return err == nil || errors.Is(err, metadata.ErrNotFound)
}

// acquire takes b: an ephemeral create, so exactly one broker wins a race;
// the loser connects the client to the winner.
func (s *Service) acquire(ctx context.Context, b Bundle) (LookupResult, error) {
	value, _ := json.Marshal(s.self)
	_, _, err := s.store.Create(ctx, b.path(), value, metadata.CreateOptions{Ephemeral: true})
	if err == nil {
		// Recorded only once the node exists: a topic is never served
		// here while another broker may own its bundle.
		s.mu.Lock()
		closed := s.mu.closed
		if !closed {
			s.mu.owned[b.String()] = b
		}
		s.mu.Unlock()
		if closed {
			s.deleteOwnerNode(ctx, b)
			return LookupResult{}, ErrNotServing
		}
		s.log.Info("bundle acquired", "bundle", b.String())
		s.ownedChanged()
		return s.connectTo(s.self), nil
	}
	if !errors.Is(err, metadata.ErrExists) {
		return LookupResult{}, fmt.Errorf("acquire bundle %s: %w", b, err)
	}
	// Read the store, not the cache: the cache may not have seen the
	// winner's create yet.
	od, found, gerr := s.ownerInStore(ctx, b)
	if gerr == nil && !found {
		gerr = metadata.ErrNotFound
	}
	if gerr != nil {
		return LookupResult{}, fmt.Errorf("acquire bundle %s: another broker took it (%v); retry the lookup", b, gerr)
	}
	return s.connectTo(od), nil
}

func (s *Service) forget(b Bundle) bool {
	s.mu.Lock()
	_, had := s.mu.owned[b.String()]
	delete(s.mu.owned, b.String())
	s.mu.Unlock()
	if had {
		s.ownedChanged()
	}
	return had
}

// Unload stops serving b and releases it: its topics are closed (clients
// reconnect and look the topic up again, landing on whichever broker the
// leader picks), then the ownership node is deleted.
func (s *Service) Unload(ctx context.Context, b Bundle) error {
	// Under the bundle's lock: an acquire in progress has created the
	// node but not yet recorded the bundle, and a namespace unload that
	// read the node sends us here in that moment; two unloads must not
	// both release (the second would delete the next owner's node).
	unlock := s.lockBundle(b.String())
	defer unlock()
	if !s.holds(b) {
		return s.notHeld(ctx, b)
	}
	s.release(ctx, b)
	return nil
}

// holds reports whether b is recorded as owned here.
func (s *Service) holds(b Bundle) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, mine := s.mu.owned[b.String()]
	return mine
}

// notHeld answers an unload of a bundle not held here: a node naming this
// broker is left by an earlier run and is removed (the bundle is then
// unowned, as asked); otherwise the caller asked the wrong broker.
func (s *Service) notHeld(ctx context.Context, b Bundle) error {
	if od, found, err := s.ownerInStore(ctx, b); err == nil && found && s.staleSelf(ctx, b, od) {
		return nil
	}
	return fmt.Errorf("bundle %s: %w by this broker", b, ErrNotOwned)
}

// release stops serving b and deletes its ownership node; the bundle's
// lock is held.
func (s *Service) release(ctx context.Context, b Bundle) {
	// Once begun, a release finishes whatever becomes of the caller: an
	// unload asked by the leader over HTTP lost its context when the
	// leader was killed mid-request, and the ownership node was left
	// behind naming this live broker, which no longer held the bundle;
	// lookups elsewhere sent clients here, and only a lookup arriving
	// here cleaned it up (11 s without a producer in the fault suite).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	// Forget first: new loads of its topics are refused while the
	// existing ones close.
	s.forget(b)
	s.handOver(ctx, b)
	s.log.Info("bundle unloaded", "bundle", b.String())
}

// handOver gives up a bundle this broker no longer records as owned: its
// ownership node is marked disabled first, so that lookups elsewhere wait
// for the release instead of sending clients here (where their topics are
// closing); its topics close with the least loaded other broker named as
// where to reconnect; then the node is deleted, and the first broker a
// client reaches takes the bundle (TakeOver).
func (s *Service) handOver(ctx context.Context, b Bundle) {
	s.mu.Lock()
	s.mu.handedOver[b.String()] = s.cfg.Now()
	s.mu.Unlock()
	if err := s.markDisabled(ctx, b); err != nil {
		s.log.Warn("bundle not marked disabled before its release; lookups may send clients here meanwhile", "bundle", b.String(), "err", err)
	}
	s.cfg.CloseBundle(ctx, b, s.successor(ctx))
	s.deleteOwnerNode(ctx, b)
}

// markDisabled rewrites b's ownership node, if it still names this
// broker, with Disabled set: at its version, so the node stays the
// ephemeral one this broker created (never re-created persistent).
func (s *Service) markDisabled(ctx context.Context, b Bundle) error {
	raw, st, err := s.store.Get(ctx, b.path())
	if err != nil {
		return err
	}
	var od OwnerData
	if err := json.Unmarshal(raw, &od); err != nil || od.NativeURL != s.self.NativeURL {
		return fmt.Errorf("ownership node of %s does not name this broker", b)
	}
	od.Disabled = true
	value, _ := json.Marshal(od)
	_, err = s.store.Put(ctx, b.path(), value, st.Version)
	return err
}

// successor is the least loaded other registered broker (nil: none).
func (s *Service) successor(ctx context.Context) *LookupResult {
	brokers, err := s.Brokers(ctx)
	if err != nil {
		return nil
	}
	delete(brokers, s.cfg.BrokerID)
	if len(brokers) == 0 {
		return nil
	}
	s.mu.Lock()
	id := pickLeastLoaded(brokers, s.mu.pending, s.cfg.LoadBalancer.BrokerOverloadedThreshold)
	s.mu.Unlock()
	res := brokers[id].lookupAt()
	return &res
}

// handOverMemory is how long this broker refuses to take back, without a
// lookup, a bundle it handed over: a client that reconnects here from a
// stale lookup must not pull the bundle back (an unload or load shedding
// moved it away on purpose); it is refused and looks the topic up.
const handOverMemory = 30 * time.Second

// handedOverRecently reports whether b was handed over from here within
// handOverMemory.
func (s *Service) handedOverRecently(b Bundle) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	for name, at := range s.mu.handedOver {
		if now.Sub(at) > handOverMemory {
			delete(s.mu.handedOver, name)
		}
	}
	_, recent := s.mu.handedOver[b.String()]
	return recent
}

// releaseWait bounds how long a lookup or a take-over waits for a
// disabled bundle (its owner is releasing it) to become free.
const releaseWait = 5 * time.Second

// waitReleased waits until b's owner node is gone or no longer disabled
// (polling the watched cache), at most releaseWait.
func (s *Service) waitReleased(ctx context.Context, b Bundle) {
	deadline := time.Now().Add(releaseWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		od, found, err := s.Owner(ctx, b)
		if err != nil || !found || !od.Disabled {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TakeOver acquires the bundle of a topic that a client reached this
// broker for without a lookup (sent here by the previous owner as it
// released it): once the bundle is free (waiting for a release under way),
// this broker takes it as an authoritative lookup would. It reports
// whether this broker serves the topic now; false if another broker owns
// the bundle.
func (s *Service) TakeOver(ctx context.Context, ns, topic string) (bool, error) {
	if s.closed() {
		return false, ErrNotServing
	}
	b, err := s.BundleOf(ctx, ns, topic)
	if err != nil {
		return false, err
	}
	if s.handedOverRecently(b) {
		return false, nil
	}
	s.waitReleased(ctx, b)
	res, err := s.Lookup(ctx, ns, topic, true)
	if err != nil {
		return false, err
	}
	return res.Self && s.holds(b), nil
}

// releaseTimeout bounds a release (closing the bundle's topics, deleting
// its ownership node) once it has begun.
const releaseTimeout = 30 * time.Second

func (s *Service) deleteOwnerNode(ctx context.Context, b Bundle) {
	err := s.store.Delete(ctx, b.path(), metadata.AnyVersion)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		// The node stays until this broker's session ends; meanwhile a
		// lookup here finds it stale and replaces it (staleSelf).
		s.log.Warn("could not delete a bundle's ownership node", "bundle", b.String(), "err", err)
	}
}

// Split splits an owned bundle in half in the namespace policies and
// unloads it, so that its halves are assigned like any unowned bundle.
func (s *Service) Split(ctx context.Context, b Bundle) error {
	unlock := s.lockBundle(b.String()) // as Unload
	defer unlock()
	if !s.holds(b) {
		return fmt.Errorf("bundle %s: %w by this broker", b, ErrNotOwned)
	}
	if s.cfg.SplitBundle == nil {
		return errors.New("bundle split is not available: no namespace policies store")
	}
	if err := s.cfg.SplitBundle(ctx, b); err != nil {
		return fmt.Errorf("split bundle %s: %w", b, err)
	}
	s.log.Info("bundle split", "bundle", b.String())
	s.release(ctx, b)
	return nil
}

// watchOwnership notices owned bundles whose node was deleted or taken by
// someone else (an operator, a stale cleanup) and stops serving them.
// The watch is made before Start returns, so no change after it is missed.
func (s *Service) watchOwnership(w *metadata.Watcher) {
	ctx := context.Background()
	defer w.Close()
	for {
		select {
		case <-s.stop:
			return
		case ev, ok := <-w.Events():
			if !ok {
				return // interrupted: the session watcher handles loss
			}
			if ev.Type == metadata.EventDeleted || ev.Type == metadata.EventModified {
				s.checkStillOwned(ctx, ev.Path)
			}
		}
	}
}

func (s *Service) checkStillOwned(ctx context.Context, path string) {
	key := strings.TrimPrefix(path, ownerRoot+"/")
	s.mu.Lock()
	b, mine := s.mu.owned[key]
	s.mu.Unlock()
	if !mine {
		return
	}
	raw, _, err := s.store.Get(ctx, path)
	if err == nil {
		var od OwnerData
		if json.Unmarshal(raw, &od) == nil && od.NativeURL == s.self.NativeURL {
			return
		}
	} else if !errors.Is(err, metadata.ErrNotFound) {
		return // cannot tell; the session watcher covers a lost session
	}
	if s.forget(b) {
		s.log.Warn("bundle ownership lost: its node was removed or taken; its topics are closed", "bundle", b.String())
		s.cfg.CloseBundle(ctx, b, nil)
	}
}
