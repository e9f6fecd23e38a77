package metadata

import (
	"context"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// TestCacheRewatchesAfterConnectionLoss: a change made while the cache's
// connection is down is seen after it comes back, and the cache caches
// (and invalidates) again afterwards.
func TestCacheRewatchesAfterConnectionLoss(t *testing.T) {
	ctx := context.Background()
	cached, writer, dialer := cutPair(t)
	c, err := NewCache[struct{ N int }](ctx, cached, "/p")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, _, _, err := c.Get(ctx, "/p/x"); err != nil || v.N != 1 {
		t.Fatalf("first read: %v %v", v, err)
	}
	dialer.Cut()
	if _, err := writer.Put(ctx, "/p/x", []byte(`{"N":2}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	dialer.Heal()
	waitCached(t, c, 2)
	if _, err := writer.Put(ctx, "/p/x", []byte(`{"N":3}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitCached(t, c, 3)
}

// waitCached waits until the cache holds n for /p/x as a cached entry,
// which needs a live watch.
func waitCached(t *testing.T, c *Cache[struct{ N int }], n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if v, _, _, err := c.Get(context.Background(), "/p/x"); err == nil && v.N == n {
			c.mu.Lock()
			e, hit := c.entries["/p/x"]
			c.mu.Unlock()
			if hit && e.value.N == n {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("cache never held N=%d as a watched entry", n)
}

// TestCacheServesStaleWhileDisconnected: a cache made with
// StaleWhileDisconnected keeps answering from its entries while its
// connection is down (Pulsar's policy caches do): a broker reading a
// topic's policies on the publish path used to wait for ZooKeeper there
// (partition-zk-minority seed 4: 3.4 s without an acknowledgement). Once
// the connection is back, a change made meanwhile is seen.
func TestCacheServesStaleWhileDisconnected(t *testing.T) {
	ctx := context.Background()
	cached, writer, dialer := cutPair(t)
	c, err := NewCacheWith[struct{ N int }](ctx, cached, "/p", CacheOptions{StaleWhileDisconnected: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitCached(t, c, 1)
	dialer.Cut()
	if _, err := writer.Put(ctx, "/p/x", []byte(`{"N":2}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for !c.disconnected() {
		if time.Now().After(deadline) {
			t.Fatal("the cache never saw its connection go")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	v, _, found, err := c.Get(rctx, "/p/x")
	cancel()
	if err != nil || !found || v.N != 1 {
		t.Fatalf("read while disconnected: %v found=%v err=%v, want the cached N=1", v, found, err)
	}
	// GetFresh (bundle boundaries) never takes the stale entry.
	rctx, cancel = context.WithTimeout(ctx, time.Second)
	v, _, _, err = c.GetFresh(rctx, "/p/x")
	cancel()
	if err == nil {
		t.Fatalf("GetFresh while disconnected answered %v, want the store's error", v)
	}
	dialer.Heal()
	waitCached(t, c, 2)

	// Closed while disconnected, the cache serves nothing stale for ever.
	dialer.Cut()
	deadline = time.Now().Add(15 * time.Second)
	for !c.disconnected() {
		if time.Now().After(deadline) {
			t.Fatal("the cache never saw its connection go the second time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Close()
	rctx, cancel = context.WithTimeout(ctx, time.Second)
	v, _, _, err = c.Get(rctx, "/p/x")
	cancel()
	if err == nil {
		t.Fatalf("a closed cache answered %v from its stale entries", v)
	}
	dialer.Heal()
}

// cutPair starts a ZooKeeper server and returns a store whose connection
// the dialer can cut (session 10 s), a second store to write with, and
// /p/x holding N=1.
func cutPair(t *testing.T) (cached, writer Store, dialer *zktest.Dialer) {
	t.Helper()
	zk := zktest.StartForTest(t, 1)
	target, _ := ParseTarget(zk.Connection)
	ctx := context.Background()
	dialer = &zktest.Dialer{}
	cached, err := OpenZK(ctx, target, ZKOptions{SessionTimeout: 10 * time.Second, Dial: dialer.Dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cached.Close() })
	writer, err = OpenZK(ctx, target, ZKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close() })
	if _, err := writer.Put(ctx, "/p/x", []byte(`{"N":1}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	return cached, writer, dialer
}
