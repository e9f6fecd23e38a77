package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// TestLedgerPolicyOfTopics: the ledgers of a topic are created with its
// own persistence policy, else its namespace's; a v1 topic's namespace is
// property/cluster/namespace (its managed ledger has one more segment),
// and its policy must not be read from the v2 namespace property/cluster.
func TestLedgerPolicyOfTopics(t *testing.T) {
	ctx := context.Background()
	res, err := resources.New(ctx, metadata.NewMemoryServer().NewSession(), resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(res.CreateCluster(ctx, "c1", resources.ClusterData{ServiceURL: "http://localhost:1"}))
	must(res.CreateTenant(ctx, "t", resources.TenantInfo{AllowedClusters: []string{"c1"}}))
	withPersistence := func(e, qw, qa int) resources.Policies {
		p := resources.NewPolicies()
		p.Persistence = &resources.PersistencePolicies{BookkeeperEnsemble: e, BookkeeperWriteQuorum: qw, BookkeeperAckQuorum: qa}
		return p
	}
	_, err = res.CreateNamespace(ctx, "t", "c1", withPersistence(2, 2, 2))
	must(err)
	_, err = res.CreateNamespace(ctx, "t", "c1/ns", withPersistence(3, 3, 2))
	must(err)
	own, _ := json.Marshal(resources.PersistencePolicies{BookkeeperEnsemble: 5, BookkeeperWriteQuorum: 4, BookkeeperAckQuorum: 3})
	must(res.SetTopicPolicy(ctx, resources.TopicName{Domain: "persistent", Tenant: "t", Namespace: "c1", Local: "own"},
		"c1", "persistence", own))
	pol := LedgerPolicyFunc(res, "c1")
	for name, want := range map[string][3]int{
		"t/c1/persistent/plain":    {2, 2, 2}, // v2 namespace t/c1
		"t/c1/ns/persistent/plain": {3, 3, 2}, // v1 namespace t/c1/ns
		"t/c1/persistent/own":      {5, 4, 3}, // the topic's own
		"t/none/persistent/x":      {0, 0, 0}, // no namespace: the defaults
	} {
		var lp managedledger.LedgerPolicy
		eventually(t, name, func() error {
			lp, err = pol(ctx, name)
			if err != nil {
				return err
			}
			if got := [3]int{lp.EnsembleSize, lp.WriteQuorum, lp.AckQuorum}; got != want {
				return fmt.Errorf("%v, want %v", got, want)
			}
			return nil
		})
	}
}
