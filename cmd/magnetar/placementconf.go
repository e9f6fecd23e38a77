package main

// Bookie placement settings under Pulsar's broker keys and BookKeeper's
// bookie keys (for the bookie's auditor and replication worker, which must
// place re-replicated copies by the same policy as the brokers):
//
//	broker.conf                                        bk_server.conf
//	bookkeeperClientRackawarePolicyEnabled=true         ensemblePlacementPolicy=...RackawareEnsemblePlacementPolicy
//	bookkeeperClientRegionawarePolicyEnabled=false      ensemblePlacementPolicy=...RegionAwareEnsemblePlacementPolicy
//	bookkeeperClientMinNumRacksPerWriteQuorum=2         minNumRacksPerWriteQuorum=2
//	bookkeeperClientEnforceMinNumRacksPerWriteQuorum=false  enforceMinNumRacksPerWriteQuorum=false
//
// Region-aware, the minimum counts regions. Racks and regions come from
// the rack map (magnetar admin bookies set-bookie-rack) or each bookie's
// --region/--rack.
//
// bookieAddressMap (ours, broker.conf) makes this broker dial some bookies
// at other addresses than they registered: registered=dialed pairs,
// comma-separated. Use it where a broker reaches a bookie through a tunnel
// or NAT; the stretched-cluster tests route each broker's traffic to
// other regions' bookies through delaying relays with it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
)

// placementSettings configure the ledger client's placement policy.
type placementSettings struct {
	rackAware, regionAware bool
	minRacks               int
	enforce                bool
	// dialAt is bookieAddressMap: registered endpoint -> address dialed.
	dialAt map[string]string
}

// defaultPlacementSettings are Pulsar's broker defaults.
func defaultPlacementSettings() placementSettings {
	return placementSettings{rackAware: true, minRacks: 2}
}

func (p *placementSettings) brokerKeys() map[string]confSetter {
	return map[string]confSetter{
		"bookkeeperClientRackawarePolicyEnabled":           setBool(&p.rackAware),
		"bookkeeperClientRegionawarePolicyEnabled":         setBool(&p.regionAware),
		"bookkeeperClientMinNumRacksPerWriteQuorum":        setInt(&p.minRacks),
		"bookkeeperClientEnforceMinNumRacksPerWriteQuorum": setBool(&p.enforce),
		"bookieAddressMap":                                 p.setAddressMap,
	}
}

// setAddressMap reads bookieAddressMap: host:port=host:port pairs,
// comma-separated (empty: none).
func (p *placementSettings) setAddressMap(v string) error {
	m := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		from, to, ok := strings.Cut(pair, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok {
			return fmt.Errorf("bookieAddressMap: %q is not registered=dialed", pair)
		}
		for _, a := range []string{from, to} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("bookieAddressMap: %q: want host:port: %w", a, err)
			}
		}
		if _, dup := m[from]; dup {
			return fmt.Errorf("bookieAddressMap: %s is mapped twice", from)
		}
		m[from] = to
	}
	p.dialAt = m
	return nil
}

func (p *placementSettings) bookieKeys() map[string]confSetter {
	return map[string]confSetter{
		"ensemblePlacementPolicy":          p.setPolicyClass,
		"minNumRacksPerWriteQuorum":        setInt(&p.minRacks),
		"enforceMinNumRacksPerWriteQuorum": setBool(&p.enforce),
	}
}

// setPolicyClass reads BookKeeper's ensemblePlacementPolicy class name.
func (p *placementSettings) setPolicyClass(v string) error {
	switch c := v[strings.LastIndexByte(v, '.')+1:]; c {
	case "RegionAwareEnsemblePlacementPolicy":
		p.regionAware, p.rackAware = true, false
	case "RackawareEnsemblePlacementPolicy":
		p.regionAware, p.rackAware = false, true
	case "DefaultEnsemblePlacementPolicy", "RandomEnsemblePlacementPolicy":
		p.regionAware, p.rackAware = false, false
	default:
		return fmt.Errorf("ensemblePlacementPolicy %q: want RackawareEnsemblePlacementPolicy, RegionAwareEnsemblePlacementPolicy or DefaultEnsemblePlacementPolicy", v)
	}
	return nil
}

func (p *placementSettings) validate() error {
	if p.minRacks < 0 {
		return fmt.Errorf("bookkeeperClientMinNumRacksPerWriteQuorum %d: want 0 or more", p.minRacks)
	}
	return nil
}

// policy builds the ledger client's placement policy.
func (p *placementSettings) policy(log *slog.Logger) ledger.PlacementPolicy {
	return ledger.NewPlacement(ledger.TopologyConfig{RackAware: p.rackAware, RegionAware: p.regionAware,
		MinRacksPerWriteQuorum: p.minRacks, Enforce: p.enforce, Seed: uint64(time.Now().UnixNano()), Logger: log})
}

// namespaceLedgerPolicy reads a managed ledger's namespace policies
// (cached) for its next ledger: persistence (E, Qw, Qa; the mark-delete
// rate at open) and bookie affinity groups. Managed ledgers are named tenant/namespace/domain/topic.
func namespaceLedgerPolicy(res *resources.Resources) func(context.Context, string) (managedledger.LedgerPolicy, error) {
	return func(ctx context.Context, name string) (managedledger.LedgerPolicy, error) {
		parts := strings.SplitN(name, "/", 3)
		if len(parts) < 3 {
			return managedledger.LedgerPolicy{}, nil // not a topic's
		}
		p, err := res.GetNamespaceCached(ctx, parts[0], parts[1])
		if errors.Is(err, resources.ErrNotFound) {
			return managedledger.LedgerPolicy{}, nil // no namespace node: no policy, the defaults
		}
		if err != nil {
			return managedledger.LedgerPolicy{}, err
		}
		var out managedledger.LedgerPolicy
		if q := p.Persistence; q != nil {
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
