package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sort"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// ownedChanged asks the reporter for an early report, so the leader's
// view of bundle counts catches up quickly.
func (s *Service) ownedChanged() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// reportLoop writes the load report every ReportInterval, and soon after
// the owned set changes (at most every 100 ms).
func (s *Service) reportLoop() {
	tick := time.NewTicker(s.cfg.ReportInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		case <-s.changed:
			if !s.sleep(100 * time.Millisecond) {
				return
			}
		}
		if err := s.writeReport(context.Background()); err != nil && !s.stopped() {
			s.log.Warn("could not write the load report", "err", err)
		} else if err == nil {
			// What lookupWhileSuspended knows of the peers: a leader reads
			// them every pass anyway, the others would not.
			_, _ = s.Brokers(context.Background())
		}
	}
}

// report is this broker's registration value now.
func (s *Service) report() BrokerData {
	load := s.cfg.Load()
	owned := s.Owned()
	names := make([]string, len(owned))
	for i, b := range owned {
		names[i] = b.String()
	}
	sort.Strings(names)
	return BrokerData{WebServiceURL: s.cfg.WebServiceURL, PulsarServiceURL: s.cfg.PulsarServiceURL,
		WebServiceURLTLS: s.cfg.WebServiceURLTLS, PulsarServiceURLTLS: s.cfg.PulsarServiceURLTLS,
		Load: load, NumBundles: len(names), Bundles: names, LastUpdate: s.cfg.Now().UnixMilli(),
		BrokerVersion: s.cfg.Version}
}

// writeReport updates the registration node by version: an update never
// recreates a node that vanished (that would make it persistent), it
// registers again instead.
func (s *Service) writeReport(ctx context.Context) error {
	if s.closed() {
		return nil
	}
	value, _ := json.Marshal(s.report())
	s.mu.Lock()
	ver := s.mu.regVer
	s.mu.Unlock()
	st, err := s.store.Put(ctx, brokersRoot+"/"+s.cfg.BrokerID, value, ver)
	if errors.Is(err, metadata.ErrBadVersion) || errors.Is(err, metadata.ErrNotFound) {
		return s.register(ctx)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.regVer = st.Version
	s.mu.Unlock()
	return nil
}

// Brokers returns every registered broker by id.
func (s *Service) Brokers(ctx context.Context) (map[string]BrokerData, error) {
	ids, err := s.store.Children(ctx, brokersRoot)
	if errors.Is(err, metadata.ErrNotFound) {
		return map[string]BrokerData{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]BrokerData, len(ids))
	for _, id := range ids {
		data, _, found, err := s.loads.Get(ctx, brokersRoot+"/"+id)
		if err != nil {
			return nil, err
		}
		if found {
			out[id] = data
		}
	}
	peers := maps.Clone(out) // the caller may change out
	delete(peers, s.cfg.BrokerID)
	s.mu.Lock()
	s.mu.peers = peers
	s.mu.Unlock()
	return out, nil
}

// ReportNow writes the load report at once (tests, admin).
func (s *Service) ReportNow(ctx context.Context) error { return s.writeReport(ctx) }
