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
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
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
