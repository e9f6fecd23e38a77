package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

// fakeTopics stands in for the broker's topic registry.
type fakeTopics struct {
	mu     sync.Mutex
	topics map[string][]string // "tenant/ns" -> full names
}

func (f *fakeTopics) ListTopics(_ context.Context, tenant, ns string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.topics[tenant+"/"+ns]), nil
}

func (f *fakeTopics) set(ns string, topics ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topics[ns] = topics
}

// env is an admin API over a memory store, driven by pulsaradmin.
type env struct {
	t      *testing.T
	ctx    context.Context
	url    string
	pa     pulsaradmin.Client
	res    *resources.Resources
	topics *fakeTopics
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	store := metadata.NewMemoryServer().NewSession()
	t.Cleanup(func() { store.Close() })
	res, err := resources.New(ctx, store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	topics := &fakeTopics{topics: map[string][]string{}}
	mux := http.NewServeMux()
	admin.Register(mux, admin.Config{Resources: res, Namespaces: topics, ClusterName: "standalone",
		Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	pa, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, url: srv.URL, pa: pa, res: res, topics: topics}
}

// withTenant adds cluster standalone (and other), and tenant t allowing
// standalone.
func (e *env) withTenant() *env {
	e.t.Helper()
	e.ok(e.pa.Clusters().Create(utils.ClusterData{Name: "standalone", ServiceURL: "http://localhost:8080",
		BrokerServiceURL: "pulsar://localhost:6650"}))
	e.ok(e.pa.Clusters().Create(utils.ClusterData{Name: "other", ServiceURL: "http://other:8080"}))
	e.ok(e.pa.Tenants().Create(utils.TenantData{Name: "t", AdminRoles: []string{"admin"}, AllowedClusters: []string{"standalone"}}))
	return e
}

func (e *env) ok(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// status checks err is a Pulsar error answer with code and a reason
// containing reason.
func (e *env) status(err error, code int, reason string) {
	e.t.Helper()
	var re rest.Error
	if !errors.As(err, &re) || re.Code != code || !strings.Contains(re.Reason, reason) {
		e.t.Fatalf("got %v, want code %d with reason containing %q", err, code, reason)
	}
}

// do sends a raw request, for what pulsaradmin has no call for.
func (e *env) do(method, path, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) want(method, path, body string, code int, contains string) {
	e.t.Helper()
	got, resp := e.do(method, path, body)
	if got != code || !strings.Contains(resp, contains) {
		e.t.Fatalf("%s %s: %d %s, want %d containing %q", method, path, got, resp, code, contains)
	}
}

func TestClusters(t *testing.T) {
	e := newEnv(t)
	c := e.pa.Clusters()
	names, err := c.List()
	e.ok(err)
	if len(names) != 0 {
		t.Fatalf("List = %v", names)
	}
	e.ok(c.Create(utils.ClusterData{Name: "c1", ServiceURL: "http://c1:8080", BrokerServiceURL: "pulsar://c1:6650"}))
	e.status(c.Create(utils.ClusterData{Name: "c1", ServiceURL: "http://c1:8080"}), 409, "cluster c1 already exists")
	e.status(c.Create(utils.ClusterData{Name: "c2", ServiceURL: "pulsar://c2:8080"}), 400, "serviceUrl: illegal URL")
	e.status(c.Create(utils.ClusterData{Name: "c 2", ServiceURL: "http://c2:8080"}), 400, "cluster: invalid name")
	e.want("PUT", "/admin/v2/clusters/c2", "", 400, "cluster data: request body is required")
	e.want("PUT", "/admin/v2/clusters/c2", `{"serviceUrl": 7}`, 400, "cluster data.serviceUrl: want string")
	got, err := c.Get("c1")
	e.ok(err)
	if got.ServiceURL != "http://c1:8080" || got.BrokerServiceURL != "pulsar://c1:6650" {
		t.Fatalf("Get = %+v", got)
	}
	_, err = c.Get("nope")
	e.status(err, 404, "cluster nope does not exist")
	e.ok(c.Update(utils.ClusterData{Name: "c1", ServiceURL: "http://c1:9090", BrokerServiceURL: "pulsar://c1:6650"}))
	if got, _ = c.Get("c1"); got.ServiceURL != "http://c1:9090" {
		t.Fatalf("after Update: %+v", got)
	}
	e.status(c.Update(utils.ClusterData{Name: "nope", ServiceURL: "http://x:1"}), 404, "cluster nope")

	e.status(c.UpdatePeerClusters("c1", []string{"c2"}), 412, "peer cluster c2 does not exist")
	e.ok(c.Create(utils.ClusterData{Name: "c2", ServiceURL: "http://c2:8080"}))
	e.ok(c.UpdatePeerClusters("c1", []string{"c2"}))
	peers, err := c.GetPeerClusters("c1")
	e.ok(err)
	if !slices.Equal(peers, []string{"c2"}) {
		t.Fatalf("peers = %v", peers)
	}
	names, _ = c.List()
	if !slices.Equal(names, []string{"c1", "c2"}) {
		t.Fatalf("List = %v", names)
	}
	e.ok(c.Delete("c2"))
	e.status(c.Delete("c2"), 404, "cluster c2 does not exist")
}

func TestClusterInUse(t *testing.T) {
	e := newEnv(t).withTenant()
	e.ok(e.pa.Namespaces().CreateNamespace("t/ns"))
	e.status(e.pa.Clusters().Delete("standalone"), 412, "namespace t/ns replicates to it")
	e.ok(e.pa.Namespaces().DeleteNamespace("t/ns"))
	e.ok(e.pa.Clusters().Delete("standalone"))
}

// A member pulsaradmin does not know survives its POST of the rest.
func TestClusterUpdateKeepsUnknownMembers(t *testing.T) {
	e := newEnv(t)
	e.want("PUT", "/admin/v2/clusters/c1", `{"serviceUrl":"http://c1:8080","brokerClientTlsTrustStoreType":"JKS"}`, 204, "")
	e.ok(e.pa.Clusters().Update(utils.ClusterData{Name: "c1", ServiceURL: "http://c1:9090"}))
	e.want("GET", "/admin/v2/clusters/c1", "", 200, `"brokerClientTlsTrustStoreType":"JKS"`)
}

func TestTenants(t *testing.T) {
	e := newEnv(t)
	tn := e.pa.Tenants()
	e.ok(e.pa.Clusters().Create(utils.ClusterData{Name: "c1", ServiceURL: "http://c1:8080"}))
	e.ok(e.pa.Clusters().Create(utils.ClusterData{Name: "c2", ServiceURL: "http://c2:8080"}))
	e.status(tn.Create(utils.TenantData{Name: "t"}), 412, "clusters can not be empty")
	e.status(tn.Create(utils.TenantData{Name: "t", AllowedClusters: []string{"c9"}}), 412, "clusters [c9] do not exist")
	e.status(tn.Create(utils.TenantData{Name: "bad name", AllowedClusters: []string{"c1"}}), 400, "tenant: invalid name")
	e.ok(tn.Create(utils.TenantData{Name: "t", AdminRoles: []string{"admin"}, AllowedClusters: []string{"c1"}}))
	e.status(tn.Create(utils.TenantData{Name: "t", AllowedClusters: []string{"c1"}}), 409, "tenant t already exists")
	got, err := tn.Get("t")
	e.ok(err)
	if !slices.Equal(got.AdminRoles, []string{"admin"}) || !slices.Equal(got.AllowedClusters, []string{"c1"}) {
		t.Fatalf("Get = %+v", got)
	}
	_, err = tn.Get("nope")
	e.status(err, 404, "tenant nope does not exist")
	e.ok(tn.Update(utils.TenantData{Name: "t", AdminRoles: []string{"root"}, AllowedClusters: []string{"c1", "c2"}}))
	got, _ = tn.Get("t")
	if !slices.Equal(got.AdminRoles, []string{"root"}) || !slices.Equal(got.AllowedClusters, []string{"c1", "c2"}) {
		t.Fatalf("after Update: %+v", got)
	}
	e.status(tn.Update(utils.TenantData{Name: "nope", AllowedClusters: []string{"c1"}}), 404, "tenant nope")
	e.ok(tn.Create(utils.TenantData{Name: "u", AllowedClusters: []string{"c2"}}))
	names, err := tn.List()
	e.ok(err)
	if !slices.Equal(names, []string{"t", "u"}) {
		t.Fatalf("List = %v", names)
	}
	e.ok(e.pa.Namespaces().CreateNsWithPolices("t/ns", utils.Policies{ReplicationClusters: []string{"c1"}}))
	e.status(tn.Update(utils.TenantData{Name: "t", AllowedClusters: []string{"c2"}}), 412, "still replicates")
	e.status(tn.Delete("t"), 409, "tenant t is not empty")
	e.want("DELETE", "/admin/v2/tenants/t?force=true", "", 405, "forced deletion of tenants")
	e.ok(tn.Delete("u"))
	e.status(tn.Delete("u"), 404, "tenant u does not exist")
}
