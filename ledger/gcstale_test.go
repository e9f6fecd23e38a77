package ledger

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// laggingStore models a session on a ZooKeeper follower that has not yet
// applied the latest writes: Exists does not see the nodes named in
// behind until Sync catches the session up.
type laggingStore struct {
	metadata.Store
	mu     sync.Mutex
	behind map[string]bool
	syncs  int
}

func (s *laggingStore) Exists(ctx context.Context, path string) (bool, metadata.Stat, error) {
	s.mu.Lock()
	stale := s.behind[path]
	s.mu.Unlock()
	if stale {
		return false, metadata.Stat{}, nil
	}
	return s.Store.Exists(ctx, path)
}

func (s *laggingStore) Sync(ctx context.Context, path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncs++
	clear(s.behind)
	return nil
}

// TestGCDoesNotTrustAStaleRead (issue 16, defect 6a): a bookie's garbage
// collector asks whether a ledger's metadata exists. On a session whose
// server lags, a just-created ledger looks deleted; the oracle syncs before
// it answers "deleted", so the ledger and its entries stay. Before, one
// plain Exists decided, and the bookie deleted a live ledger's entries.
func TestGCDoesNotTrustAStaleRead(t *testing.T) {
	c := newCluster(t, 3, 1)
	cl := c.client(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []byte("live")); err != nil {
		t.Fatal(err)
	}
	session := c.meta.NewSession()
	defer session.Close()
	lagging := &laggingStore{Store: session, behind: map[string]bool{Path(w.ID()): true}}
	gcClient, err := New(ctx, Config{Store: lagging, Transport: c.faults, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer gcClient.Close()
	for id, nd := range c.nodes {
		n, err := nd.core.CollectGarbage(ctx, gcClient)
		if err != nil || n != 0 {
			t.Fatalf("gc on %s of a live ledger read from a lagging server: deleted %d, %v", id, n, err)
		}
	}
	if lagging.syncs == 0 {
		t.Fatal("the oracle answered without syncing")
	}
	if got, err := w.Append(ctx, []byte("still")); err != nil || got != 1 {
		t.Fatalf("append after gc: %d, %v", got, err)
	}
	r, err := cl.OpenNoRecovery(ctx, w.ID(), []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	if es, err := r.Read(ctx, 0, 0); err != nil || string(es[0].Payload) != "live" {
		t.Fatalf("entry 0 after gc: %v", err)
	}
}
