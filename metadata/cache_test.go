package metadata

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type policies struct {
	Retention int      `json:"retention"`
	Clusters  []string `json:"clusters"`
}

// twoSessionCache is a cache of /admin/policies on one session of a
// memory store and another session of it (another process) to change it.
func twoSessionCache(t *testing.T) (*Cache[policies], Store) {
	t.Helper()
	srv := NewMemoryServer()
	a, b := srv.NewSession(), srv.NewSession()
	t.Cleanup(func() { a.Close(); b.Close() })
	cache, err := NewCache[policies](context.Background(), a, "/admin/policies")
	if err != nil {
		t.Fatal(err)
	}
	return cache, b
}

func TestCacheReadThroughAndInvalidation(t *testing.T) {
	ctx := context.Background()
	cache, b := twoSessionCache(t)
	defer cache.Close()
	if _, _, found, err := cache.Get(ctx, "/admin/policies/t/ns"); found || err != nil {
		t.Fatalf("missing node: found=%v err=%v", found, err)
	}
	// Another session (process) writes: the cached absence must go.
	if _, err := b.Put(ctx, "/admin/policies/t/ns", []byte(`{"retention":5}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		v, _, found, err := cache.Get(ctx, "/admin/policies/t/ns")
		return err == nil && found && v.Retention == 5
	})
	if _, err := b.Put(ctx, "/admin/policies/t/ns", []byte(`{"retention":9}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		v, _, _, _ := cache.Get(ctx, "/admin/policies/t/ns")
		return v.Retention == 9
	})
	if _, _, _, err := cache.Get(ctx, "/elsewhere"); err == nil {
		t.Fatal("read outside the cache's prefix accepted")
	}
	if _, err := b.Put(ctx, "/admin/policies/t/bad", []byte(`not json`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := cache.Get(ctx, "/admin/policies/t/bad"); err == nil {
		t.Fatal("undecodable value served")
	}
}

func TestReadModifyUpdateUnderContention(t *testing.T) {
	ctx := context.Background()
	srv := NewMemoryServer()
	var wg sync.WaitGroup
	const writers, each = 8, 20
	for w := 0; w < writers; w++ {
		s := srv.NewSession()
		defer s.Close()
		c, err := NewCache[policies](ctx, s, "/counters")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := c.ReadModifyUpdate(ctx, "/counters/x", func(cur policies, _ bool) (policies, error) {
					cur.Retention++
					return cur, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := srv.NewSession()
	c, _ := NewCache[policies](ctx, s, "/counters")
	defer c.Close()
	v, _, _, err := c.Get(ctx, "/counters/x")
	if err != nil || v.Retention != writers*each {
		t.Fatalf("lost updates: %d of %d (%v)", v.Retention, writers*each, err)
	}
	boom := errors.New("refused")
	if _, err := c.ReadModifyUpdate(ctx, "/counters/x", func(policies, bool) (policies, error) { return policies{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("modify error not returned: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCacheHitAllocatesNothing: a read served from the cache allocates
// nothing (the broker reads policies on its publish path and in passes
// over every loaded topic: with 10,000 topics the hits' copies were a
// twentieth of the broker's allocation), for a present node and for a
// cached absence alike.
func TestCacheHitAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryServer().NewSession()
	defer s.Close()
	if _, err := s.Put(ctx, "/admin/policies/t/ns", []byte(`{"retention":5,"clusters":["a"]}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	cache, err := NewCache[policies](ctx, s, "/admin/policies")
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	// A value as large as the broker's policies, too.
	big, err := NewCache[struct {
		Limits [40]int64
		Names  map[string]string
	}](ctx, s, "/admin/policies")
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	for _, path := range []string{"/admin/policies/t/ns", "/admin/policies/t/none"} {
		if _, _, _, err := cache.Get(ctx, path); err != nil { // fills the entry
			t.Fatal(err)
		}
		if _, _, _, err := big.Get(ctx, path); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _, _, _, _ = cache.Get(ctx, path) }); n != 0 {
			t.Errorf("a cache hit on %s allocates %.0f times", path, n)
		}
		if n := testing.AllocsPerRun(100, func() { _, _, _, _ = big.Get(ctx, path) }); n != 0 {
			t.Errorf("a cache hit on %s (a large value) allocates %.0f times", path, n)
		}
	}
}

// Version stays while nothing under the cache's prefix changes (reads and
// fills do not change it) and moves with every change, from any process
// or Invalidate; after Close nothing may be kept (live false).
func TestCacheVersionMovesWithEveryChange(t *testing.T) {
	ctx := context.Background()
	cache, b := twoSessionCache(t)
	v0, live := cache.Version()
	if !live {
		t.Fatal("a watching cache is not live")
	}
	for range 3 {
		if _, _, _, err := cache.Get(ctx, "/admin/policies/t/ns"); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := cache.Version(); v != v0 {
		t.Fatalf("version %d after reads, want %d unchanged", v, v0)
	}
	if _, err := b.Put(ctx, "/admin/policies/t/other", []byte(`{"retention":5}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { v, _ := cache.Version(); return v != v0 })
	v1, _ := cache.Version()
	cache.Invalidate("/admin/policies/t/ns")
	if v, live := cache.Version(); v == v1 || !live {
		t.Fatalf("version %d (live %v) after Invalidate, want a new one than %d", v, live, v1)
	}
	cache.Close()
	if _, live := cache.Version(); live {
		t.Fatal("a closed cache (reads go to the store) reports live")
	}
}
