package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

// TestInitClusterMetadataJoinsAnInstance: clusters initialised one after
// another on one configuration store, as Pulsar's docs set up an instance,
// each join tenant public and namespace public/default (the second one
// failed: "cluster c2 is not in the list of allowed clusters of tenant
// public"); a repeated run changes nothing, and what an operator set on
// them stays.
func TestInitClusterMetadataJoinsAnInstance(t *testing.T) {
	ctx := context.Background()
	store := metadata.NewMemoryServer().NewSession()
	res, err := resources.New(ctx, store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	data := func(c string) resources.ClusterData {
		return resources.ClusterData{ServiceURL: "http://" + c + ":8080", BrokerServiceURL: "pulsar://" + c + ":6650"}
	}
	if err := initClusterMetadata(ctx, store, "c1", data("c1"), 16); err != nil {
		t.Fatal(err)
	}
	// An operator's change to what exists must survive the next joins.
	if _, err := res.UpdateTenant(ctx, "public", func(ti *resources.TenantInfo) error {
		ti.AdminRoles = []string{"ops"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c2", "c3", "c2"} {
		if err := initClusterMetadata(ctx, store, c, data(c), 4); err != nil {
			t.Fatalf("initialise %s: %v", c, err)
		}
	}
	want := []string{"c1", "c2", "c3"}
	ti, err := res.GetTenant(ctx, "public")
	if err != nil || !sameSet(ti.AllowedClusters, want) || !slices.Equal(ti.AdminRoles, []string{"ops"}) {
		t.Fatalf("tenant public: %+v %v, want allowed clusters %v and admin ops kept", ti, err, want)
	}
	p, err := res.GetNamespace(ctx, "public", "default")
	if err != nil || !sameSet(p.ReplicationClusters, want) {
		t.Fatalf("public/default replication clusters %v %v, want %v", p.ReplicationClusters, err, want)
	}
	sys, err := res.GetNamespace(ctx, "pulsar", "system")
	if err != nil || !sameSet(sys.ReplicationClusters, want) {
		t.Fatalf("pulsar/system replication clusters %v %v, want %v", sys.ReplicationClusters, err, want)
	}
	assign, err := res.GetPartitionedTopic(ctx, resources.TopicName{Domain: "persistent", Tenant: "pulsar", Namespace: "system",
		Local: "transaction_coordinator_assign"})
	if err != nil || assign.Partitions != 16 {
		t.Fatalf("transaction coordinators: %+v %v, want the first cluster's 16 kept", assign, err)
	}
	for _, c := range want {
		cd, err := res.GetCluster(ctx, c)
		if err != nil || !strings.Contains(cd.ServiceURL, c) {
			t.Fatalf("cluster %s: %+v %v", c, cd, err)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
