package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// electLoop runs the leader election: whoever creates the ephemeral
// leader node leads until its session ends or it closes; the others watch
// the node and try again when it goes. The watch is set before the create
// so that no deletion is missed, which means it may also hold events from
// before this broker's node existed: a node that names this broker is
// this broker's (lead and the ErrExists case check it), so such an event,
// or a lead ended by a lost watch, never leaves the node standing with no
// one leading.
func (s *Service) electLoop() {
	ctx := context.Background()
	value, _ := json.Marshal(LeaderInfo{ServiceURL: s.cfg.WebServiceURL, BrokerID: s.cfg.BrokerID})
	for !s.stopped() {
		w, err := s.store.Watch(ctx, leaderPath)
		if err != nil {
			if !s.sleep(time.Second) {
				return
			}
			continue
		}
		_, _, err = s.store.Create(ctx, leaderPath, value, metadata.CreateOptions{Ephemeral: true})
		switch {
		case err == nil:
			s.lead(w)
		case errors.Is(err, metadata.ErrExists) && s.leaderIsUs(ctx):
			s.lead(w)
		case errors.Is(err, metadata.ErrExists):
			s.waitForLeaderChange(w)
		default:
			w.Close()
			if !s.sleep(time.Second) {
				return
			}
		}
	}
}

// lead runs the leader's duties until the leader node goes away (its
// session ended, or an operator deleted it) or the service stops.
func (s *Service) lead(w *metadata.Watcher) {
	defer w.Close()
	s.setLeader(true)
	defer s.setLeader(false)
	s.log.Info("this broker is now the load-manager leader", "broker", s.cfg.BrokerID)
	lb := s.cfg.LoadBalancer
	shed := time.NewTicker(lb.SheddingInterval)
	defer shed.Stop()
	split := time.NewTicker(lb.SplitInterval)
	defer split.Stop()
	for {
		select {
		case <-s.stop:
			return
		case ev, ok := <-w.Events():
			if !ok || (ev.Path == leaderPath && ev.Type == metadata.EventDeleted && !s.leaderIsUs(context.Background())) {
				s.log.Warn("leadership lost", "broker", s.cfg.BrokerID)
				return
			}
		case <-shed.C:
			if lb.SheddingEnabled {
				s.shedLoad(context.Background())
			}
		case <-split.C:
			if lb.AutoBundleSplitEnabled {
				s.splitBundles(context.Background())
			}
		}
	}
}

func (s *Service) waitForLeaderChange(w *metadata.Watcher) {
	defer w.Close()
	if ok, _, err := s.store.Exists(context.Background(), leaderPath); err == nil && !ok {
		return // gone between our create and the check: try again at once
	}
	for {
		select {
		case <-s.stop:
			return
		case ev, ok := <-w.Events():
			if !ok || (ev.Path == leaderPath && ev.Type == metadata.EventDeleted) {
				return
			}
		}
	}
}

// leaderIsUs reports whether the leader node names this broker: the node
// this broker created (in this or an earlier pass of the election; two
// live brokers never share an id). A failed read says no.
func (s *Service) leaderIsUs(ctx context.Context) bool {
	li, found, err := s.Leader(ctx)
	return err == nil && found && li.BrokerID == s.cfg.BrokerID
}

func (s *Service) setLeader(v bool) {
	s.mu.Lock()
	s.mu.leader = v
	if !v {
		s.mu.pending = map[string]map[string]time.Time{}
	}
	s.mu.Unlock()
}

// Leader returns the current leader, if any.
func (s *Service) Leader(ctx context.Context) (LeaderInfo, bool, error) {
	raw, _, err := s.store.Get(ctx, leaderPath)
	if errors.Is(err, metadata.ErrNotFound) {
		return LeaderInfo{}, false, nil
	}
	if err != nil {
		return LeaderInfo{}, false, err
	}
	var li LeaderInfo
	if err := json.Unmarshal(raw, &li); err != nil {
		return LeaderInfo{}, false, err
	}
	return li, true, nil
}

// leaderBroker is the leader's registration, if a leader is known.
func (s *Service) leaderBroker(ctx context.Context) (BrokerData, bool) {
	li, ok, err := s.Leader(ctx)
	if err != nil || !ok {
		return BrokerData{}, false
	}
	data, _, found, err := s.loads.Get(ctx, brokersRoot+"/"+li.BrokerID)
	if err != nil || !found {
		return BrokerData{}, false
	}
	return data, true
}

func (s *Service) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// sleep waits d or until the service stops (false).
func (s *Service) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.stop:
		return false
	case <-t.C:
		return true
	}
}
