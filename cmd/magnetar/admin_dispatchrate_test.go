package main

import (
	"context"
	"testing"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// TestAdminReplicatorDispatchRate: namespaces set-, get- and
// remove-replicator-dispatch-rate with pulsar-admin's flags; the policy is
// stored under the cluster of the broker asked (c1), as Pulsar's.
func TestAdminReplicatorDispatchRate(t *testing.T) {
	url, res := policiesWeb(t)
	a := adminCLI{t, url}
	a.ok("clusters", "create", "c1", "--url", "http://localhost:8080", "--broker-url", "pulsar://localhost:6650")
	a.ok("tenants", "create", "t", "--allowed-clusters", "c1")
	a.ok("namespaces", "create", "t/ns")
	if out := a.ok("namespaces", "get-replicator-dispatch-rate", "t/ns"); out != "(not set)\n" {
		t.Fatalf("unset: %q", out)
	}
	a.ok("namespaces", "set-replicator-dispatch-rate", "t/ns", "--msg-dispatch-rate", "100",
		"--byte-dispatch-rate", "1048576", "--dispatch-rate-period", "2")
	var r resources.DispatchRate
	a.json(&r, "namespaces", "get-replicator-dispatch-rate", "t/ns")
	want := resources.DispatchRate{DispatchThrottlingRateInMsg: 100, DispatchThrottlingRateInByte: 1 << 20, RatePeriodInSecond: 2}
	if r != want {
		t.Fatalf("get: %+v, want %+v", r, want)
	}
	p, err := res.GetNamespace(context.Background(), "t", "ns")
	if err != nil || p.ReplicatorDispatchRate["c1"] != want {
		t.Fatalf("stored: %+v %v", p.ReplicatorDispatchRate, err)
	}
	wantContains(t, "bad period", a.fails(2, "namespaces", "set-replicator-dispatch-rate", "t/ns", "--dispatch-rate-period", "0"), "want 1 or more")
	a.ok("namespaces", "remove-replicator-dispatch-rate", "t/ns")
	if out := a.ok("namespaces", "get-replicator-dispatch-rate", "t/ns"); out != "(not set)\n" {
		t.Fatalf("after remove: %q", out)
	}
}
