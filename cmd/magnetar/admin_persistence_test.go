package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

// policiesWeb serves the namespace admin API over a fresh configuration
// store with cluster c1, tenant t and namespace t/ns.
func policiesWeb(t *testing.T) (string, *resources.Resources) {
	t.Helper()
	ctx := context.Background()
	store := metadata.NewMemoryServer().NewSession()
	t.Cleanup(func() { store.Close() })
	res, err := resources.New(ctx, store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	mux := http.NewServeMux()
	admin.Register(mux, admin.Config{Resources: res, Namespaces: noTopics{}, ClusterName: "c1", Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, res
}

// TestAdminPersistence: namespaces set-persistence, get-persistence,
// remove-persistence and the bookie affinity group commands, as
// pulsar-admin's.
func TestAdminPersistence(t *testing.T) {
	url, res := policiesWeb(t)
	a := adminCLI{t, url}
	a.ok("clusters", "create", "c1", "--url", "http://localhost:8080", "--broker-url", "pulsar://localhost:6650")
	a.ok("tenants", "create", "t", "--allowed-clusters", "c1")
	a.ok("namespaces", "create", "t/ns")
	if out := a.ok("namespaces", "get-persistence", "t/ns"); out != "(not set)\n" {
		t.Fatalf("unset persistence: %q", out)
	}
	a.ok("namespaces", "set-persistence", "t/ns", "--bookkeeper-ensemble", "3", "--bookkeeper-write-quorum", "3",
		"--bookkeeper-ack-quorum", "2", "--ml-mark-delete-max-rate", "5")
	var p resources.PersistencePolicies
	a.json(&p, "namespaces", "get-persistence", "t/ns")
	if p != (resources.PersistencePolicies{BookkeeperEnsemble: 3, BookkeeperWriteQuorum: 3, BookkeeperAckQuorum: 2, ManagedLedgerMaxMarkDeleteRate: 5}) {
		t.Fatalf("get-persistence: %+v", p)
	}
	wantContains(t, "bad quorums", a.fails(1, "namespaces", "set-persistence", "t/ns", "--bookkeeper-ensemble", "2",
		"--bookkeeper-write-quorum", "3", "--bookkeeper-ack-quorum", "2"), "HTTP 400")
	wantContains(t, "missing quorum", a.fails(2, "namespaces", "set-persistence", "t/ns", "--bookkeeper-ensemble", "2"), "are required")
	a.ok("namespaces", "remove-persistence", "t/ns")

	a.ok("namespaces", "set-bookie-affinity-group", "t/ns", "--primary-group", "eu", "--secondary-group", "us")
	var g resources.BookieAffinityGroupData
	a.json(&g, "namespaces", "get-bookie-affinity-group", "t/ns")
	if g.BookkeeperAffinityGroupPrimary != "eu" || g.BookkeeperAffinityGroupSecondary != "us" {
		t.Fatalf("get-bookie-affinity-group: %+v", g)
	}
	wantContains(t, "no primary", a.fails(2, "namespaces", "set-bookie-affinity-group", "t/ns"), "--primary-group is required")
	// What the broker's managed ledgers are created with.
	pol := broker.LedgerPolicyFunc(res, "c1")
	a.ok("namespaces", "set-persistence", "t/ns", "--bookkeeper-ensemble", "3", "--bookkeeper-write-quorum", "3",
		"--bookkeeper-ack-quorum", "2", "--ml-mark-delete-max-rate", "3")
	deadline := time.Now().Add(5 * time.Second)
	for {
		lp, err := pol(context.Background(), "t/ns/persistent/topic")
		if err == nil && lp.EnsembleSize == 3 && lp.WriteQuorum == 3 && lp.AckQuorum == 2 && lp.MarkDeleteRate == 3 && slices.Equal(lp.BookieGroups, []string{"eu", "us"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger policy of t/ns: %+v, %v", lp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.ok("namespaces", "delete-bookie-affinity-group", "t/ns")
}

// noTopics is a broker with no topics.
type noTopics struct{}

func (noTopics) ListTopics(context.Context, string, string) ([]string, error) { return nil, nil }
