package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// fixture is a store with cluster c1 (and c2), tenant t allowing c1, and
// namespace t/ns replicating to c1.
type fixture struct {
	ctx   context.Context
	srv   *metadata.MemoryServer
	store metadata.Store
	r     *Resources
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	srv := metadata.NewMemoryServer()
	store := srv.NewSession()
	t.Cleanup(func() { store.Close() })
	f := &fixture{ctx: ctx, srv: srv, store: store, r: newResources(t, store)}
	must(t, f.r.CreateCluster(ctx, "c1", ClusterData{ServiceURL: "http://c1:8080", BrokerServiceURL: "pulsar://c1:6650"}))
	must(t, f.r.CreateCluster(ctx, "c2", ClusterData{ServiceURL: "http://c2:8080"}))
	must(t, f.r.CreateTenant(ctx, "t", TenantInfo{AdminRoles: []string{"admin"}, AllowedClusters: []string{"c1"}}))
	p := NewPolicies()
	p.ReplicationClusters = []string{"c1"}
	if _, err := f.r.CreateNamespace(ctx, "t", "ns", p); err != nil {
		t.Fatal(err)
	}
	return f
}

func newResources(t *testing.T, store metadata.Store) *Resources {
	t.Helper()
	r, err := New(context.Background(), store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantKind(t *testing.T, err, kind error, contains string) {
	t.Helper()
	if !errors.Is(err, kind) || !strings.Contains(err.Error(), contains) {
		t.Fatalf("got %v, want %v containing %q", err, kind, contains)
	}
}

func TestClusterLifecycle(t *testing.T) {
	f := newFixture(t)
	names, err := f.r.ListClusters(f.ctx)
	if err != nil || !slices.Equal(names, []string{"c1", "c2"}) {
		t.Fatalf("ListClusters = %v, %v", names, err)
	}
	wantKind(t, f.r.CreateCluster(f.ctx, "c1", ClusterData{}), ErrExists, "cluster c1 already exists")
	wantKind(t, f.r.CreateCluster(f.ctx, "c 3", ClusterData{}), ErrInvalid, "cluster: invalid name")
	wantKind(t, f.r.CreateCluster(f.ctx, "c3", ClusterData{ServiceURL: "ftp://x"}), ErrInvalid, "serviceUrl: illegal URL")
	_, err = f.r.GetCluster(f.ctx, "nope")
	wantKind(t, err, ErrNotFound, "cluster nope does not exist")
	c, err := f.r.UpdateCluster(f.ctx, "c2", func(c *ClusterData) error { c.BrokerServiceURL = "pulsar://c2:6650"; return nil })
	if err != nil || c.ServiceURL != "http://c2:8080" || c.BrokerServiceURL != "pulsar://c2:6650" {
		t.Fatalf("UpdateCluster = %+v, %v", c, err)
	}
	_, err = f.r.SetPeerClusters(f.ctx, "c2", []string{"c9"})
	wantKind(t, err, ErrPrecondition, "peer cluster c9 does not exist")
	if c, err = f.r.SetPeerClusters(f.ctx, "c2", []string{"c1"}); err != nil || !slices.Equal(c.PeerClusterNames, []string{"c1"}) {
		t.Fatalf("SetPeerClusters = %+v, %v", c, err)
	}
	wantKind(t, f.r.DeleteCluster(f.ctx, "c1"), ErrPrecondition, "namespace t/ns replicates to it")
	must(t, f.r.DeleteCluster(f.ctx, "c2"))
	wantKind(t, f.r.DeleteCluster(f.ctx, "c2"), ErrNotFound, "cluster c2")
}

func TestTenantLifecycle(t *testing.T) {
	f := newFixture(t)
	wantKind(t, f.r.CreateTenant(f.ctx, "u", TenantInfo{}), ErrPrecondition, "clusters can not be empty")
	wantKind(t, f.r.CreateTenant(f.ctx, "u", TenantInfo{AllowedClusters: []string{"c9"}}), ErrPrecondition, "[c9] do not exist")
	wantKind(t, f.r.CreateTenant(f.ctx, "t", TenantInfo{AllowedClusters: []string{"c1"}}), ErrExists, "tenant t already exists")
	must(t, f.r.CreateTenant(f.ctx, "u", TenantInfo{AllowedClusters: []string{"c2", "global"}}))
	if names, err := f.r.ListTenants(f.ctx); err != nil || !slices.Equal(names, []string{"t", "u"}) {
		t.Fatalf("ListTenants = %v, %v", names, err)
	}
	_, err := f.r.UpdateTenant(f.ctx, "t", func(ti *TenantInfo) error { ti.AllowedClusters = []string{"c2"}; return nil })
	wantKind(t, err, ErrPrecondition, "namespace t/ns still replicates")
	ti, err := f.r.UpdateTenant(f.ctx, "t", func(ti *TenantInfo) error { ti.AllowedClusters = append(ti.AllowedClusters, "c2"); return nil })
	if err != nil || !slices.Equal(ti.AllowedClusters, []string{"c1", "c2"}) || !slices.Equal(ti.AdminRoles, []string{"admin"}) {
		t.Fatalf("UpdateTenant = %+v, %v", ti, err)
	}
	wantKind(t, f.r.DeleteTenant(f.ctx, "t"), ErrNotEmpty, "tenant t is not empty: it still has 1 namespaces")
	must(t, f.r.DeleteTenant(f.ctx, "u"))
	wantKind(t, f.r.DeleteTenant(f.ctx, "u"), ErrNotFound, "tenant u does not exist")
}

func TestNamespaceCreate(t *testing.T) {
	f := newFixture(t)
	p, err := f.r.GetNamespace(f.ctx, "t", "ns")
	if err != nil || p.Bundles.NumBundles != DefaultNumberOfNamespaceBundles || p.Bundles.Boundaries[1] != "0x40000000" {
		t.Fatalf("default bundles: %+v, %v", p.Bundles, err)
	}
	_, err = f.r.CreateNamespace(f.ctx, "t", "ns", NewPolicies())
	wantKind(t, err, ErrExists, "namespace t/ns already exists")
	_, err = f.r.CreateNamespace(f.ctx, "nobody", "ns", NewPolicies())
	wantKind(t, err, ErrNotFound, "tenant nobody does not exist")
	q := NewPolicies()
	q.Bundles = &BundlesData{NumBundles: 16}
	if q, err = f.r.CreateNamespace(f.ctx, "t", "sixteen", q); err != nil || len(q.Bundles.Boundaries) != 17 {
		t.Fatalf("16 bundles: %+v, %v", q.Bundles, err)
	}
	bad := NewPolicies()
	bad.ReplicationClusters = []string{"c2"}
	_, err = f.r.CreateNamespace(f.ctx, "t", "other", bad)
	wantKind(t, err, ErrNotAllowed, "cluster c2 is not in the list of allowed clusters of tenant t")
	if names, err := f.r.ListNamespaces(f.ctx, "t"); err != nil || !slices.Equal(names, []string{"ns", "sixteen"}) {
		t.Fatalf("ListNamespaces = %v, %v", names, err)
	}
	_, err = f.r.ListNamespaces(f.ctx, "nobody")
	wantKind(t, err, ErrNotFound, "tenant nobody")
}

func TestSetReplicationClusters(t *testing.T) {
	f := newFixture(t)
	_, err := f.r.SetReplicationClusters(f.ctx, "t", "ns", nil)
	wantKind(t, err, ErrPrecondition, "replication_clusters: must not be empty")
	_, err = f.r.SetReplicationClusters(f.ctx, "t", "ns", []string{"global"})
	wantKind(t, err, ErrPrecondition, "cannot specify global")
	_, err = f.r.SetReplicationClusters(f.ctx, "t", "ns", []string{"c9"})
	wantKind(t, err, ErrNotAllowed, "cluster c9 does not exist")
	_, err = f.r.SetReplicationClusters(f.ctx, "t", "ns", []string{"c1", "c2"})
	wantKind(t, err, ErrNotAllowed, "cluster c2 is not in the list of allowed clusters")
	// A generic update that sneaks in a cluster is checked the same way.
	_, err = f.r.UpdateNamespace(f.ctx, "t", "ns", func(p *Policies) error { p.ReplicationClusters = []string{"c2"}; return nil })
	wantKind(t, err, ErrNotAllowed, "cluster c2")
	_, err = f.r.UpdateTenant(f.ctx, "t", func(ti *TenantInfo) error { ti.AllowedClusters = []string{"c1", "c2"}; return nil })
	must(t, err)
	p, err := f.r.SetReplicationClusters(f.ctx, "t", "ns", []string{"c2", "c1", "c2"})
	if err != nil || !slices.Equal(p.ReplicationClusters, []string{"c1", "c2"}) {
		t.Fatalf("SetReplicationClusters = %v, %v", p.ReplicationClusters, err)
	}
}

// A failed validation writes nothing: the update is all or nothing.
func TestUpdateNamespaceAllOrNothing(t *testing.T) {
	f := newFixture(t)
	_, err := f.r.UpdateNamespace(f.ctx, "t", "ns", func(p *Policies) error {
		ttl, bad := 60, -5
		p.MessageTTLInSeconds = &ttl
		p.RetentionPolicies = &RetentionPolicies{RetentionTimeInMinutes: bad, RetentionSizeInMB: 1}
		return nil
	})
	wantKind(t, err, ErrInvalid, "retention_policies.retentionTimeInMinutes: must be >= -1, got -5")
	p, err := f.r.GetNamespace(f.ctx, "t", "ns")
	if err != nil || p.MessageTTLInSeconds != nil {
		t.Fatalf("half an update landed: %+v, %v", p, err)
	}
	_, err = f.r.UpdateNamespace(f.ctx, "t", "gone", func(*Policies) error { return nil })
	wantKind(t, err, ErrNotFound, "namespace t/gone does not exist")
}

// Two updaters race: the first reads, the second writes, the first's
// compare-and-set fails, and it retries on the fresh value. Both land.
func TestUpdateNamespaceRetriesOnConflict(t *testing.T) {
	f := newFixture(t)
	read, wrote := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	errc := make(chan error, 1)
	go func() {
		_, err := f.r.UpdateNamespace(f.ctx, "t", "ns", func(p *Policies) error {
			if calls.Add(1) == 1 {
				close(read)
				<-wrote
			}
			ttl := 60
			p.MessageTTLInSeconds = &ttl
			return nil
		})
		errc <- err
	}()
	<-read
	_, err := f.r.UpdateNamespace(f.ctx, "t", "ns", func(p *Policies) error {
		n := 7
		p.MaxProducersPerTopic = &n
		return nil
	})
	must(t, err)
	close(wrote)
	must(t, <-errc)
	if calls.Load() != 2 {
		t.Fatalf("mutator ran %d times, want 2 (one conflict)", calls.Load())
	}
	p, err := f.r.GetNamespace(f.ctx, "t", "ns")
	if err != nil || p.MessageTTLInSeconds == nil || *p.MessageTTLInSeconds != 60 || p.MaxProducersPerTopic == nil || *p.MaxProducersPerTopic != 7 {
		t.Fatalf("an update was lost: %+v, %v", p, err)
	}
}

// Many updaters on two "brokers" (sessions) each grant one role; every
// grant survives.
func TestConcurrentUpdatersAllLand(t *testing.T) {
	f := newFixture(t)
	other := f.srv.NewSession()
	defer other.Close()
	brokers := []*Resources{f.r, newResources(t, other)}
	var wg sync.WaitGroup
	const perBroker = 10
	for b, r := range brokers {
		for i := 0; i < perBroker; i++ {
			wg.Add(1)
			go func(role string) {
				defer wg.Done()
				_, err := r.UpdateNamespace(f.ctx, "t", "ns", func(p *Policies) error {
					p.AuthPolicies.NamespaceAuth[role] = []AuthAction{ActionConsume}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}(fmt.Sprintf("role-%d-%d", b, i))
		}
	}
	wg.Wait()
	p, err := f.r.GetNamespace(f.ctx, "t", "ns")
	if err != nil || len(p.AuthPolicies.NamespaceAuth) != 2*perBroker {
		t.Fatalf("%d grants landed, want %d: %v", len(p.AuthPolicies.NamespaceAuth), 2*perBroker, err)
	}
}

// A node Pulsar wrote keeps the members this package does not model
// through an update.
func TestUpdateKeepsPulsarMembers(t *testing.T) {
	f := newFixture(t)
	must(t, f.r.CreateCluster(f.ctx, "us-west", ClusterData{ServiceURL: "http://w:8080"}))
	must(t, f.r.CreateTenant(f.ctx, "acme", TenantInfo{AllowedClusters: []string{"us-west"}}))
	path := "/admin/policies/acme/orders"
	if _, err := f.store.Put(f.ctx, path, readTestdata(t, "pulsar-policies.json"), metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.UpdateNamespace(f.ctx, "acme", "orders", func(p *Policies) error {
		ttl := 5
		p.MessageTTLInSeconds = &ttl
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	raw, _, err := f.store.Get(f.ctx, path)
	must(t, err)
	m := decodeMap(t, raw)
	if m["message_ttl_in_seconds"] != float64(5) || m["persistence"] == nil || m["topicDispatchRate"] == nil ||
		m["properties"].(map[string]any)["owner"] != "team-a" {
		t.Fatalf("update lost Pulsar's members: %s", raw)
	}
}

func TestCorruptNodeIsNotNotFound(t *testing.T) {
	f := newFixture(t)
	if _, err := f.store.Put(f.ctx, "/admin/policies/t/broken", []byte("{not json"), metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	_, err := f.r.GetNamespace(f.ctx, "t", "broken")
	if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}

func TestNamespaceCache(t *testing.T) {
	f := newFixture(t)
	p, err := f.r.GetNamespaceCached(f.ctx, "t", "ns")
	must(t, err)
	p.AuthPolicies.NamespaceAuth["intruder"] = []AuthAction{ActionProduce} // the caller's copy only
	// Another broker changes the policies; the cache must follow.
	other := f.srv.NewSession()
	defer other.Close()
	_, err = newResources(t, other).UpdateNamespace(f.ctx, "t", "ns", func(p *Policies) error {
		ttl := 42
		p.MessageTTLInSeconds = &ttl
		return nil
	})
	must(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err = f.r.GetNamespaceCached(f.ctx, "t", "ns")
		must(t, err)
		if p.MessageTTLInSeconds != nil && *p.MessageTTLInSeconds == 42 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cache never saw the update")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := p.AuthPolicies.NamespaceAuth["intruder"]; ok {
		t.Fatal("a caller's change leaked into the cache")
	}
	_, err = f.r.GetNamespaceCached(f.ctx, "t", "none")
	wantKind(t, err, ErrNotFound, "namespace t/none")
	// The shared value is the cached one: what the copy says, update seen.
	shared, err := f.r.NamespaceShared(f.ctx, "t", "ns")
	must(t, err)
	if shared.MessageTTLInSeconds == nil || *shared.MessageTTLInSeconds != 42 {
		t.Fatalf("shared policies have TTL %v, want 42", shared.MessageTTLInSeconds)
	}
	if _, ok := shared.AuthPolicies.NamespaceAuth["intruder"]; ok {
		t.Fatal("a caller's change to its copy shows in the shared policies")
	}
	_, err = f.r.NamespaceShared(f.ctx, "t", "none")
	wantKind(t, err, ErrNotFound, "namespace t/none")
}

func TestPartitionedTopics(t *testing.T) {
	f := newFixture(t)
	topic := TopicName{Domain: DomainPersistent, Tenant: "t", Namespace: "ns", Local: "orders in/eu"}
	must(t, f.r.CreatePartitionedTopic(f.ctx, topic, PartitionedTopicMetadata{Partitions: 3}))
	raw, _, err := f.store.Get(f.ctx, "/admin/partitioned-topics/t/ns/persistent/orders+in%2Feu")
	if err != nil || string(raw) != `{"partitions":3}` {
		t.Fatalf("stored %q at the encoded path: %v", raw, err)
	}
	wantKind(t, f.r.CreatePartitionedTopic(f.ctx, topic, PartitionedTopicMetadata{Partitions: 3}), ErrExists, "already exists")
	wantKind(t, f.r.CreatePartitionedTopic(f.ctx, TopicName{Domain: "persistent", Tenant: "t", Namespace: "none", Local: "x"},
		PartitionedTopicMetadata{Partitions: 1}), ErrNotFound, "namespace t/none")
	wantKind(t, f.r.CreatePartitionedTopic(f.ctx, TopicName{Domain: "persistent", Tenant: "t", Namespace: "ns", Local: "x"},
		PartitionedTopicMetadata{Partitions: 0}), ErrInvalid, "partitions: must be between 1 and 10000, got 0")
	// What the broker writes today (raw name, {"partitions": N}) reads back.
	if _, err := f.store.Put(f.ctx, "/admin/partitioned-topics/t/ns/non-persistent/legacy",
		readTestdata(t, "pulsar-partitioned.json"), metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	legacy := TopicName{Domain: DomainNonPersistent, Tenant: "t", Namespace: "ns", Local: "legacy"}
	if m, err := f.r.GetPartitionedTopic(f.ctx, legacy); err != nil || m.Partitions != 4 || m.Properties["team"] != "a" {
		t.Fatalf("GetPartitionedTopic = %+v, %v", m, err)
	}
	_, err = f.r.UpdatePartitionedTopic(f.ctx, topic, func(m *PartitionedTopicMetadata) error { m.Partitions = 2; return nil })
	wantKind(t, err, ErrInvalid, "partitions: can only be increased, from 3, got 2")
	if m, err := f.r.UpdatePartitionedTopic(f.ctx, topic, func(m *PartitionedTopicMetadata) error { m.Partitions = 5; return nil }); err != nil || m.Partitions != 5 {
		t.Fatalf("grow: %+v, %v", m, err)
	}
	names, err := f.r.ListPartitionedTopics(f.ctx, "t", "ns")
	want := []string{"persistent://t/ns/orders in/eu", "non-persistent://t/ns/legacy"}
	if err != nil || !slices.Equal(names, want) {
		t.Fatalf("ListPartitionedTopics = %q, %v; want %q", names, err, want)
	}
	must(t, f.r.DeletePartitionedTopic(f.ctx, legacy))
	_, err = f.r.GetPartitionedTopic(f.ctx, legacy)
	wantKind(t, err, ErrNotFound, "partitioned topic non-persistent://t/ns/legacy")
}

func TestDeleteNamespace(t *testing.T) {
	f := newFixture(t)
	topic := TopicName{Domain: DomainPersistent, Tenant: "t", Namespace: "ns", Local: "p"}
	must(t, f.r.CreatePartitionedTopic(f.ctx, topic, PartitionedTopicMetadata{Partitions: 2}))
	wantKind(t, f.r.DeleteNamespace(f.ctx, "t", "ns", false), ErrNotEmpty, "namespace t/ns is not empty: it still has 1 partitioned topics")
	must(t, f.r.DeleteNamespace(f.ctx, "t", "ns", true))
	if ok, _ := f.r.NamespaceExists(f.ctx, "t", "ns"); ok {
		t.Fatal("namespace still there")
	}
	if ok, _, _ := f.store.Exists(f.ctx, "/admin/partitioned-topics/t/ns"); ok {
		t.Fatal("partitioned-topic nodes of the namespace left behind")
	}
	wantKind(t, f.r.DeleteNamespace(f.ctx, "t", "ns", false), ErrNotFound, "namespace t/ns does not exist")
	must(t, f.r.DeleteTenant(f.ctx, "t"))
}

func TestStoredJSONIsPulsars(t *testing.T) {
	f := newFixture(t)
	raw, _, err := f.store.Get(f.ctx, "/admin/policies/t/ns")
	must(t, err)
	var m map[string]json.RawMessage
	must(t, json.Unmarshal(raw, &m))
	for _, k := range []string{"auth_policies", "replication_clusters", "bundles", "backlog_quota_map", "deleted",
		"schema_compatibility_strategy", "offload_threshold", "subscription_auth_mode"} {
		if _, ok := m[k]; !ok {
			t.Errorf("member %s missing from %s", k, raw)
		}
	}
	raw, _, err = f.store.Get(f.ctx, "/admin/policies/t")
	if err != nil || string(raw) != `{"adminRoles":["admin"],"allowedClusters":["c1"]}` {
		t.Fatalf("tenant stored as %s, %v", raw, err)
	}
}

// deafStore never tells its watchers of a change: caches over it are
// invalidated only by what this process does itself.
type deafStore struct{ metadata.Store }

func (s deafStore) Watch(ctx context.Context, _ string) (*metadata.Watcher, error) {
	return s.Store.Watch(ctx, "/deaf-store-watch")
}

// An admin call that sets a policy is followed at once by this broker's
// own reads of it (pulsar-admin set, then the topic acts on it), not when
// the store's watch event arrives, which it may do later.
func TestPolicyWritesAreReadBackAtOnce(t *testing.T) {
	ctx := context.Background()
	srv := metadata.NewMemoryServer()
	store := srv.NewSession()
	t.Cleanup(func() { store.Close() })
	r := newResources(t, deafStore{store})
	must(t, r.CreateCluster(ctx, "c1", ClusterData{ServiceURL: "http://c1:8080"}))
	must(t, r.CreateTenant(ctx, "t", TenantInfo{AllowedClusters: []string{"c1"}}))
	if _, err := r.NamespaceShared(ctx, "t", "ns"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("namespace before it is created: %v, want not found", err)
	}
	p := NewPolicies()
	p.ReplicationClusters = []string{"c1"}
	if _, err := r.CreateNamespace(ctx, "t", "ns", p); err != nil {
		t.Fatal(err)
	}
	if _, err := r.NamespaceShared(ctx, "t", "ns"); err != nil {
		t.Fatalf("namespace just created: %v", err)
	}
	ttl := 60
	if _, err := r.UpdateNamespace(ctx, "t", "ns", func(p *Policies) error { p.MessageTTLInSeconds = &ttl; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := r.NamespaceShared(ctx, "t", "ns"); err != nil || got.MessageTTLInSeconds == nil || *got.MessageTTLInSeconds != ttl {
		t.Fatalf("namespace TTL read after it was set: %v %v, want %d", got.MessageTTLInSeconds, err, ttl)
	}
	topic := TopicName{Domain: "persistent", Tenant: "t", Namespace: "ns", Local: "x"}
	if own, err := r.TopicPoliciesShared(ctx, topic); err != nil || len(own.Local) != 0 || len(own.Global) != 0 {
		t.Fatalf("topic policies before any is set: %+v %v", own, err)
	}
	must(t, r.SetTopicPolicy(ctx, topic, "c1", "messageTTL", json.RawMessage("1")))
	own, err := r.TopicPoliciesShared(ctx, topic)
	if v, ok := TopicPolicy[int](own, "c1", "messageTTL"); err != nil || !ok || v != 1 {
		t.Fatalf("topic TTL read after it was set: %v %v %v, want 1", v, ok, err)
	}
	if err := r.DeleteNamespace(ctx, "t", "ns", false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.NamespaceShared(ctx, "t", "ns"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("namespace read after it was deleted: %v, want not found", err)
	}
}
