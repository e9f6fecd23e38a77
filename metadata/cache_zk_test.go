package metadata

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// cuttableDialer lets the test drop one client's connections.
type cuttableDialer struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (d *cuttableDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return nil, errors.New("test partition")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cuttableDialer) set(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
	if down {
		for _, c := range d.conns {
			c.Close()
		}
		d.conns = nil
	}
}

// TestCacheRewatchesAfterConnectionLoss: a change made while the cache's
// connection is down is seen after it comes back, and the cache caches
// (and invalidates) again afterwards.
func TestCacheRewatchesAfterConnectionLoss(t *testing.T) {
	zk, err := zktest.Start(t.TempDir(), 1)
	if err != nil {
		t.Fatalf("ZooKeeper is required for this test: %v", err)
	}
	t.Cleanup(func() { _ = zk.Stop() })
	target, _ := ParseTarget(zk.Connection)
	ctx := context.Background()
	dialer := &cuttableDialer{}
	cached, err := OpenZK(ctx, target, ZKOptions{SessionTimeout: 10 * time.Second, Dial: dialer.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer cached.Close()
	writer, err := OpenZK(ctx, target, ZKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if _, err := writer.Put(ctx, "/p/x", []byte(`{"N":1}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	c, err := NewCache[struct{ N int }](ctx, cached, "/p")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, _, _, err := c.Get(ctx, "/p/x"); err != nil || v.N != 1 {
		t.Fatalf("first read: %v %v", v, err)
	}
	dialer.set(true)
	if _, err := writer.Put(ctx, "/p/x", []byte(`{"N":2}`), AnyVersion); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	dialer.set(false)
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
