package main

// A cluster of real processes with every store on etcd: the cluster store
// and the configuration store (two prefixes of one etcd server), bookies
// registered there, brokers, and a client workload through a namespace
// unload and the kill -9 of a broker.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/etcdtest"
)

// TestClusterOfProcessesOnEtcd: 3 bookies (metadataServiceUri=
// metadata-store:etcd:...), 2 brokers (--metadata-store etcd:...
// --configuration-metadata-store etcd:...), 8 topics produced and
// consumed. A namespace unload moves every bundle; then the broker the
// client does not bootstrap through is killed with SIGKILL, its lease
// expires and the other takes its bundles. Every acknowledged message is
// received, in order, and each store holds only its own part.
func TestClusterOfProcessesOnEtcd(t *testing.T) {
	skipProcessesIfShort(t)
	etcd := etcdtest.StartForTest(t, 1, "")
	meta, config := etcd.Connection+"/c1", etcd.Connection+"/global"
	c := startProcessCluster(t, clusterStores{metadata: meta, configuration: config, bookies: "metadata-store:" + meta}, 2)
	c.startWorkload(t, 8)
	checkEtcdStores(t, meta, config)

	// Unload through the second broker's admin API: every bundle is
	// released and assigned again while the workload runs. Only owned
	// bundles are unloaded (as Pulsar's namespace unload), and the leader
	// sheds bundles every 3 s, so wait until all four are owned; a bundle
	// shed after that point is released too and counts.
	c.waitOwned(t, 4)
	before := c.logOffsets()
	req, _ := http.NewRequest(http.MethodPut, "http://"+c.brokers[1].id+"/admin/v2/namespaces/public/default/unload", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("unload: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("unload: %s: %s", resp.Status, body)
	}
	unloaded := time.Now()
	// The log lines reach the test through the processes' output pipes,
	// possibly a moment after the unload answered.
	for released := c.bundlesUnloadedSince(before); len(released) < 4; released = c.bundlesUnloadedSince(before) {
		if time.Since(unloaded) > 5*time.Second {
			t.Fatalf("the unload released %d bundles %v, want all 4", len(released), released)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.waitProgress(t, 5)
	t.Logf("every topic made progress again %.1f s after the unload", time.Since(unloaded).Seconds())

	// Kill the broker the client does not bootstrap through, once it serves
	// bundles (its address is not in the service URL).
	victim := c.brokers[1]
	deadline := time.Now().Add(30 * time.Second)
	for victim.ownedBundles(t) <= 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second broker owns no bundle 30 s after the unload")
		}
		time.Sleep(200 * time.Millisecond)
	}
	victim.proc.kill()
	killed := time.Now()
	c.waitProgress(t, 10)
	t.Logf("every topic made progress again %.1f s after the kill -9 (lease TTL 4 s)", time.Since(killed).Seconds())
	// Every topic moving again does not mean every bundle has: the leader
	// may have shed bundles to the victim in the seconds before its lease
	// expired, and those come back once clients look their topics up again.
	deadline = time.Now().Add(30 * time.Second)
	for n := c.brokers[0].ownedBundles(t); n != 4; n = c.brokers[0].ownedBundles(t) {
		if time.Now().After(deadline) {
			t.Fatalf("the surviving broker owns %d bundles 30 s after the kill, want all 4", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.waitProgress(t, 5)
	c.stopWorkload(t)
}

// checkEtcdStores checks that the cluster store holds the bookies, the
// brokers and the topics' managed ledgers, and the configuration store the
// cluster and the namespace, each only its own part.
func checkEtcdStores(t *testing.T, meta, config string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(url string) metadata.Store {
		s, err := metadata.Open(ctx, url, metadata.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	ms, cs := open(meta), open(config)
	if list, err := registry.Bookies(ctx, ms); err != nil || len(list) != 3 {
		t.Fatalf("bookies registered in %s: %+v %v", meta, list, err)
	}
	for _, c := range []struct {
		url   string
		store metadata.Store
		want  map[string]int // path: children
	}{
		{meta, ms, map[string]int{"/loadbalance/brokers": 2, "/managed-ledgers/public/default/persistent": 8, "/admin/clusters": 0}},
		{config, cs, map[string]int{"/admin/clusters": 1, "/admin/policies/public": 1, "/loadbalance/brokers": 0, "/ledgers/available": 0}},
	} {
		for path, n := range c.want {
			children, err := c.store.Children(ctx, path)
			if err != nil && !errors.Is(err, metadata.ErrNotFound) {
				t.Fatalf("%s %s: %v", c.url, path, err)
			}
			if len(children) != n {
				t.Errorf("%s %s holds %d children %v, want %d", c.url, path, len(children), children, n)
			}
		}
	}
}

// logOffsets marks how much of each broker's log the test has seen.
func (c *processCluster) logOffsets() []int {
	out := make([]int, len(c.brokers))
	for i, b := range c.brokers {
		out[i] = len(b.proc.out.String())
	}
	return out
}

// bundlesUnloadedSince names the distinct bundles the brokers released
// after the offsets, from their logs.
func (c *processCluster) bundlesUnloadedSince(offsets []int) map[string]bool {
	released := map[string]bool{}
	for i, b := range c.brokers {
		for _, line := range strings.Split(b.proc.out.String()[offsets[i]:], "\n") {
			if !strings.Contains(line, "msg=\"bundle unloaded\"") {
				continue
			}
			if _, rest, ok := strings.Cut(line, " bundle="); ok {
				name, _, _ := strings.Cut(rest, " ")
				released[name] = true
			}
		}
	}
	return released
}

// waitOwned waits until the brokers together own n bundles.
func (c *processCluster) waitOwned(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		owned := 0
		for _, b := range c.brokers {
			owned += max(b.ownedBundles(t), 0)
		}
		if owned == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the brokers own %d bundles 30 s into the workload, want %d", owned, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
