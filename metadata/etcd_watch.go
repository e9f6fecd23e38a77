package metadata

// Watches on etcd. Behaviour:
//   - A watch is an etcd watch on the prefix's marker range (see etcd.go),
//     starting at the revision after the one Watch read, so every change
//     committed after Watch returns is delivered, in revision order, events
//     of one transaction in the order it wrote them (parents first).
//   - etcd keeps history: when the connection drops or the member loses
//     its leader, the watch is opened again from the revision after the
//     last one delivered, so nothing is missed (unlike ZooKeeper, where
//     watches end with ErrWatchInterrupted). The client library resumes by
//     itself too; this loop covers the watches it gives up on.
//   - If that revision was compacted meanwhile, the watch ends with
//     ErrWatchCompacted (which matches ErrWatchInterrupted: re-read and
//     watch again).
//   - Children-changed events for parents are derived from creates and
//     deletes, as on ZooKeeper.

import (
	"context"

	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrWatchCompacted ends an etcd watch that must resume from a revision
// the server has compacted away. It matches ErrWatchInterrupted.
var ErrWatchCompacted = fmt.Errorf("%w (etcd compacted the revisions the watch needed)", ErrWatchInterrupted)

func (s *etcdStore) Watch(ctx context.Context, prefix string) (*Watcher, error) {
	rctx, cancel, err := s.begin(ctx, "watch", prefix)
	if err != nil {
		return nil, err
	}
	defer cancel()
	// A read gives the revision the watch starts after.
	resp, err := s.cli.Get(rctx, s.markerKey(prefix), clientv3.WithCountOnly())
	if err != nil {
		return nil, s.mapError("watch", prefix, err)
	}
	wctx, stop := context.WithCancel(context.Background())
	w := newWatcher(prefix, func(w *Watcher) { s.detach(w) })
	s.mu.Lock()
	if s.ended != nil {
		s.mu.Unlock()
		stop()
		return nil, opError("watch", prefix, s.ended)
	}
	s.watchers[w] = stop
	s.mu.Unlock()
	go s.runWatch(wctx, w, resp.Header.Revision)
	return w, nil
}

func (s *etcdStore) detach(w *Watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stop, ok := s.watchers[w]; ok {
		stop()
		delete(s.watchers, w)
	}
}

// runWatch follows the marker range from rev+1 until ctx ends, opening
// the etcd watch again from the last delivered revision when it fails.
func (s *etcdStore) runWatch(ctx context.Context, w *Watcher, rev int64) {
	start, end := s.markerKey(w.prefix), s.markerKey(w.prefix)+"0"
	if w.prefix == "/" {
		start, end = s.markerKey("/"), clientv3.GetPrefixRangeEnd(s.markerKey("/"))
	}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), start, clientv3.WithRange(end), clientv3.WithRev(rev+1))
		for resp := range wch {
			if resp.CompactRevision != 0 {
				s.endWatch(w, fmt.Errorf("%w: resuming at revision %d, compacted up to %d", ErrWatchCompacted, rev+1, resp.CompactRevision))
				return
			}
			if resp.Err() != nil {
				s.log.Debug("metadata: etcd watch interrupted; resuming", "prefix", w.prefix, "revision", rev+1, "err", resp.Err())
				break
			}
			for _, ev := range resp.Events {
				if !s.deliverEtcd(w, ev) {
					return
				}
				rev = max(rev, ev.Kv.ModRevision)
			}
			backoff = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

func (s *etcdStore) endWatch(w *Watcher, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stop, ok := s.watchers[w]; ok {
		stop()
		delete(s.watchers, w)
	}
	w.end(err)
}

// deliverEtcd maps one etcd event on a marker key to the contract's
// events; false once the watcher is closed.
func (s *etcdStore) deliverEtcd(w *Watcher, ev *clientv3.Event) bool {
	path := string(ev.Kv.Key[len(s.markerKey("")):])
	if path == "" {
		path = "/"
	}
	if !underPrefix(path, w.prefix) {
		return true // a sibling sharing the prefix's bytes
	}
	typ := EventModified
	switch {
	case ev.Type == mvccpb.DELETE:
		typ = EventDeleted
	case ev.Kv.CreateRevision == ev.Kv.ModRevision:
		typ = EventCreated
	}
	if !w.deliver(Event{Type: typ, Path: path}) {
		return false
	}
	if typ != EventModified && path != "/" && underPrefix(parentOf(path), w.prefix) {
		return w.deliver(Event{Type: EventChildrenChanged, Path: parentOf(path)})
	}
	return true
}
