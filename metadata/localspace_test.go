package metadata

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 30: the local store's Pebble commit met a full disk, the store
// failed, every session was lost and the broker dropped every bundle:
// reads stopped. Now a write that would grow the store is refused while
// the disk is nearly full; reads, ephemeral nodes, deletions and the
// session go on, and writes resume once space is freed.
func TestLocalStoreFullDiskRefusesWritesKeepsReads(t *testing.T) {
	var full atomic.Bool
	usage := func(string) (uint64, uint64, error) {
		if full.Load() {
			return 1 << 20, 10 << 30, nil
		}
		return 5 << 30, 10 << 30, nil
	}
	srv, err := OpenLocal(t.TempDir(), LocalOptions{DiskUsage: usage})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s := srv.NewSession()
	ctx := context.Background()
	if _, _, err := s.Create(ctx, "/a", []byte("1"), CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, "/eph", []byte("x"), CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	time.Sleep(spaceCheckEvery)
	if _, _, err := s.Create(ctx, "/b", nil, CreateOptions{}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("create on a full disk: %v, want ErrNoSpace", err)
	}
	if _, err := s.Put(ctx, "/a", []byte("2"), AnyVersion); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("put on a full disk: %v, want ErrNoSpace", err)
	}
	if v, _, err := s.Get(ctx, "/a"); err != nil || string(v) != "1" {
		t.Fatalf("read on a full disk: %q %v", v, err)
	}
	if _, err := s.Put(ctx, "/eph", []byte("read-only"), AnyVersion); err != nil {
		t.Fatalf("ephemeral put (a bookie's mode) on a full disk: %v", err)
	}
	if _, _, err := s.Create(ctx, "/eph2", nil, CreateOptions{Ephemeral: true}); err != nil {
		t.Fatalf("ephemeral create on a full disk: %v", err)
	}
	if err := s.Delete(ctx, "/eph2", AnyVersion); err != nil {
		t.Fatalf("delete on a full disk: %v", err)
	}
	select {
	case st := <-s.SessionEvents().States():
		if st == SessionLost {
			t.Fatal("session lost on a full disk")
		}
	default:
	}
	full.Store(false)
	time.Sleep(spaceCheckEvery)
	if _, _, err := s.Create(ctx, "/b", nil, CreateOptions{}); err != nil {
		t.Fatalf("create once space is freed: %v", err)
	}
}
