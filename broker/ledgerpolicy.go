package broker

import (
	"context"
	"errors"
	"strings"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// LedgerPolicyFunc is the managed ledgers' Config.LedgerPolicy of a broker
// of cluster: what a topic's next ledger is created with. Persistence (E,
// Qw, Qa; the mark-delete rate at open) is the topic's own policy in this
// cluster, else its namespace's; bookie affinity groups are the
// namespace's. Policies are read through the caches. A managed ledger
// that is not a topic's gets the defaults.
func LedgerPolicyFunc(res *resources.Resources, cluster string) func(context.Context, string) (managedledger.LedgerPolicy, error) {
	return func(ctx context.Context, name string) (managedledger.LedgerPolicy, error) {
		t, ok := TopicOfManagedLedger(name)
		if !ok {
			return managedledger.LedgerPolicy{}, nil
		}
		p, err := res.NamespaceShared(ctx, t.Tenant, t.Namespace)
		if errors.Is(err, resources.ErrNotFound) {
			return managedledger.LedgerPolicy{}, nil // no namespace node: no policy, the defaults
		}
		if err != nil {
			return managedledger.LedgerPolicy{}, err
		}
		persistence := p.Persistence
		own, err := res.TopicPoliciesShared(ctx, resourceTopic(policyName(t)))
		if err != nil {
			return managedledger.LedgerPolicy{}, err
		}
		if q, ok := resources.TopicPolicy[resources.PersistencePolicies](own, cluster, "persistence"); ok {
			persistence = &q
		}
		var out managedledger.LedgerPolicy
		if q := persistence; q != nil {
			out.EnsembleSize, out.WriteQuorum, out.AckQuorum = q.BookkeeperEnsemble, q.BookkeeperWriteQuorum, q.BookkeeperAckQuorum
			out.MarkDeleteRate = q.ManagedLedgerMaxMarkDeleteRate
		}
		if g := p.BookieAffinityGroup; g != nil && g.BookkeeperAffinityGroupPrimary != "" {
			out.BookieGroups = []string{g.BookkeeperAffinityGroupPrimary}
			if g.BookkeeperAffinityGroupSecondary != "" {
				out.BookieGroups = append(out.BookieGroups, g.BookkeeperAffinityGroupSecondary)
			}
		}
		return out, nil
	}
}

// TopicOfManagedLedger is the persistent topic whose managed ledger is
// name (the inverse of TopicName.ManagedLedgerName): v2
// tenant/namespace/persistent/local or v1
// property/cluster/namespace/persistent/local.
func TopicOfManagedLedger(name string) (TopicName, bool) {
	segs := strings.Split(name, "/")
	var t TopicName
	switch {
	case len(segs) == 4 && segs[2] == "persistent":
		t = TopicName{Domain: "persistent", Tenant: segs[0], Namespace: segs[1]}
	case len(segs) == 5 && segs[3] == "persistent":
		t = TopicName{Domain: "persistent", Tenant: segs[0], Namespace: segs[1] + "/" + segs[2]}
	default:
		return TopicName{}, false
	}
	local, err := metadata.UnescapeSegment(segs[len(segs)-1])
	if err != nil {
		return TopicName{}, false
	}
	t.Local = local
	return t, t.check() == nil
}
