package broker

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// Endpoints of Pulsar's admin API this broker does not serve answer 501
// naming the method and path; a served route's 404 (no such topic) stays
// a 404.
func TestUnsupportedAdminEndpoints(t *testing.T) {
	b, _ := startPolicyBroker(t, func(*resources.Policies) {})
	_, url := policyAdmin(t, b)
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/admin/v2/clusters/test/namespaceIsolationPolicies", "GET /admin/v2/clusters/test/namespaceIsolationPolicies"},
		{"GET", "/admin/v2/resource-quotas/t/ns/0x00000000_0xffffffff", "not supported"},
		{"POST", "/admin/v2/resourcegroups/rg1", "POST /admin/v2/resourcegroups/rg1"},
		{"GET", "/admin/v3/transactions/coordinators", "GET /admin/v3/transactions/coordinators"},
	} {
		req, _ := http.NewRequest(tc.method, url+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), tc.want) {
			t.Fatalf("%s %s: %s %s, want 501 naming it", tc.method, tc.path, resp.Status, body)
		}
	}
	req, _ := http.NewRequest("PUT", url+"/admin/v2/persistent/t/ns/shadow", strings.NewReader(`{"PULSAR.SHADOW_SOURCE": "persistent://t/ns/src"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "shadow topics are not supported") {
		t.Fatalf("create-shadow-topic: %s %s, want 501", resp.Status, body)
	}
	resp, err = http.Get(url + "/admin/v2/persistent/t/ns/no-such-topic/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("stats of a topic that does not exist: %s, want 404", resp.Status)
	}
}

// brokers version and backlog-quota-check are this broker's own, not a
// cluster named "version".
func TestBrokerVersionAndBacklogQuotaCheck(t *testing.T) {
	b, _ := startPolicyBrokerWith(t, func(*resources.Policies) {}, 0, Config{Version: "magnetar-test"})
	_, url := policyAdmin(t, b)
	resp, err := http.Get(url + "/admin/v2/brokers/version")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != `"magnetar-test"` {
		t.Fatalf("version: %s %s", resp.Status, body)
	}
	resp, err = http.Get(url + "/admin/v2/brokers/backlog-quota-check")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("backlog-quota-check: %s, want 204", resp.Status)
	}
}
