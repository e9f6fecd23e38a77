package ledger

// Rack- and region-aware placement (BookKeeper's RackawareEnsemblePlacement-
// Policy and RegionAwareEnsemblePlacementPolicy, as Pulsar configures them).
//
// Behavior:
//   - A failure domain is a bookie's rack (its network location
//     "/region/rack") or, region-aware, its region. Ensembles are laid out
//     round-robin over shuffled domains, so every write set (Qw
//     consecutive positions) spans as many domains as exist, up to Qw;
//     region-aware placement also alternates racks inside a region.
//   - MinDomains (bookkeeperClientMinNumRacksPerWriteQuorum; for the
//     region-aware policy it counts regions) is what every write set must
//     span, capped at Qw. With Enforce
//     (bookkeeperClientEnforceMinNumRacksPerWriteQuorum) an ensemble or a
//     replacement below it is refused with ErrNotEnoughBookies naming the
//     domains that have no writable bookie; without, the best layout is
//     used and one warning is logged (none when every known bookie is in
//     one domain: a cluster without a topology, not a lost domain).
//   - Replace (ensemble changes, re-replication) prefers a domain that no
//     write set holding the position has yet, so a replacement restores
//     the spread whenever a bookie of a missing domain is writable.
//   - Domains are known from every bookie the client knows: registered
//     (writable or read-only) and Absent ones, which the rack map names
//     or which this client saw leave, but which are not running; so a
//     lost region is named in errors.

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/magnetar-io/magnetar/bookie/registry"
)

// SpreadPlacement spreads each write quorum over distinct failure domains
// (racks, or regions) where it can.
type SpreadPlacement struct {
	Key func(BookieInfo) string
	// Kind names a domain in messages ("rack", "region").
	Kind string
	// MinDomains is the minimum number of domains every write set must
	// span (capped at the write quorum); 0: no minimum.
	MinDomains int
	// Enforce refuses ensembles below MinDomains instead of logging them.
	Enforce bool
	// Log receives the best-effort warnings (default slog.Default()).
	Log    *slog.Logger
	random *RandomPlacement
}

// RackLocation is a bookie's network location "/region/rack" (the
// rack-aware policy's domain).
func RackLocation(b BookieInfo) string { return registry.Location(b.Region, b.Rack) }

// RegionOf is a bookie's region (the region-aware policy's domain).
func RegionOf(b BookieInfo) string {
	if b.Region == "" {
		return registry.DefaultRegion
	}
	return b.Region
}

// NewRackAwarePlacement spreads write quorums over racks (best effort).
func NewRackAwarePlacement(seed uint64) *SpreadPlacement {
	return &SpreadPlacement{Key: RackLocation, Kind: "rack", random: NewRandomPlacement(seed)}
}

// NewRegionAwarePlacement spreads write quorums over regions and requires
// at least minRegions per write quorum.
func NewRegionAwarePlacement(seed uint64, minRegions int) *SpreadPlacement {
	return &SpreadPlacement{Key: RegionOf, Kind: "region", MinDomains: minRegions, Enforce: true, random: NewRandomPlacement(seed)}
}

// TopologyConfig is the placement part of a broker's configuration
// (Pulsar's keys in parentheses).
type TopologyConfig struct {
	RackAware   bool // bookkeeperClientRackawarePolicyEnabled (Pulsar's default: true)
	RegionAware bool // bookkeeperClientRegionawarePolicyEnabled (wins over RackAware)
	// MinRacksPerWriteQuorum (bookkeeperClientMinNumRacksPerWriteQuorum);
	// region-aware, the minimum number of regions.
	MinRacksPerWriteQuorum int
	Enforce                bool // bookkeeperClientEnforceMinNumRacksPerWriteQuorum
	Seed                   uint64
	Logger                 *slog.Logger
}

// NewPlacement returns the policy cfg describes: region-aware, rack-aware,
// or random.
func NewPlacement(cfg TopologyConfig) PlacementPolicy {
	var p *SpreadPlacement
	switch {
	case cfg.RegionAware:
		p = &SpreadPlacement{Key: RegionOf, Kind: "region"}
	case cfg.RackAware:
		p = &SpreadPlacement{Key: RackLocation, Kind: "rack"}
	default:
		return NewRandomPlacement(cfg.Seed)
	}
	p.MinDomains, p.Enforce, p.Log, p.random = cfg.MinRacksPerWriteQuorum, cfg.Enforce, cfg.Logger, NewRandomPlacement(cfg.Seed)
	return p
}

func (p *SpreadPlacement) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// knownDomains counts the domains of every bookie known.
func (p *SpreadPlacement) knownDomains(bookies []BookieInfo) int {
	seen := map[string]bool{}
	for _, b := range bookies {
		seen[p.Key(b)] = true
	}
	return len(seen)
}

// required is how many domains each write set must span.
func (p *SpreadPlacement) required(writeQuorum int) int { return min(p.MinDomains, writeQuorum) }

// shortfall explains why write sets cannot span required domains: the
// domains with a writable bookie and those without one.
func (p *SpreadPlacement) shortfall(bookies []BookieInfo, writable []BookieInfo, need int) string {
	have, known := map[string]bool{}, map[string]bool{}
	for _, b := range writable {
		have[p.Key(b)] = true
	}
	for _, b := range bookies {
		known[p.Key(b)] = true
	}
	var haveL, missing []string
	for d := range have {
		haveL = append(haveL, d)
	}
	for d := range known {
		if !have[d] {
			missing = append(missing, d)
		}
	}
	sort.Strings(haveL)
	sort.Strings(missing)
	msg := fmt.Sprintf("write quorums must span %d %ss, writable bookies are in %d (%s)", need, p.Kind, len(haveL), strings.Join(haveL, ", "))
	if len(missing) > 0 {
		msg += fmt.Sprintf("; %ss without a writable bookie: %s", p.Kind, strings.Join(missing, ", "))
	}
	return msg
}

// NewEnsemble implements PlacementPolicy: bookies are taken round-robin
// over shuffled domains (several shuffles are tried, the best kept), so
// any writeQuorum consecutive positions (a write set) hold as many
// distinct domains as exist, up to writeQuorum.
func (p *SpreadPlacement) NewEnsemble(bookies []BookieInfo, size, writeQuorum, _ int, exclude []string) ([]string, error) {
	c := writable(bookies, exclude)
	if len(c) < size {
		return nil, fmt.Errorf("%w: need %d, have %d writable (of %d registered%s)", ErrNotEnoughBookies, size, len(c), registered(bookies), readOnlyNote(bookies, nil))
	}
	domainOf := map[string]string{}
	for _, b := range c {
		domainOf[b.ID] = p.Key(b)
	}
	var best []string
	bestSpan := -1
	for range 8 {
		ens, ndomains := p.layout(c, size, writeQuorum)
		span := fewestDomainsIn(ens, writeQuorum, domainOf)
		if span > bestSpan {
			best, bestSpan = ens, span
		}
		if bestSpan >= min(ndomains, writeQuorum) {
			break
		}
	}
	if need := p.required(writeQuorum); bestSpan < need {
		why := p.shortfall(bookies, c, need)
		if p.Enforce {
			return nil, fmt.Errorf("%w: %s", ErrNotEnoughBookies, why)
		}
		if p.knownDomains(bookies) > 1 { // one rack or region everywhere is a layout, not a loss: say nothing
			p.log().Warn("ledger placement below the minimum spread (best effort, not enforced)", "ensemble", best, "spans", bestSpan, "why", why)
		}
	}
	return best, nil
}

// layout shuffles c and fills the ensemble position by position with a
// bookie of the domain with the most bookies left among those not already
// in a write set the position shares (the previous positions and, near the
// end, the first ones it wraps onto); where every domain is, it takes the
// one with the most left. It returns the ensemble and the number of
// domains.
func (p *SpreadPlacement) layout(c []BookieInfo, size, writeQuorum int) ([]string, int) {
	c = slices.Clone(c)
	p.random.shuffle(c)
	byDomain := map[string][]BookieInfo{}
	var domains []string
	for _, b := range c {
		k := p.Key(b)
		if _, ok := byDomain[k]; !ok {
			domains = append(domains, k)
		}
		byDomain[k] = append(byDomain[k], b)
	}
	if p.Kind == "region" {
		for d, bs := range byDomain {
			byDomain[d] = alternateRacks(bs)
		}
	}
	out := make([]string, 0, size)
	placed := make([]string, 0, size) // domain of each position
	for i := range size {
		near := map[string]bool{}
		for k := 1; k < writeQuorum; k++ {
			if i-k >= 0 {
				near[placed[i-k]] = true
			}
			if j := i + k; j >= size && j-size < i {
				near[placed[j-size]] = true
			}
		}
		pick, pickFree := "", false
		for _, d := range domains {
			n := len(byDomain[d])
			if n == 0 {
				continue
			}
			free := !near[d]
			if pick == "" || (free && !pickFree) || (free == pickFree && n > len(byDomain[pick])) {
				pick, pickFree = d, free
			}
		}
		out = append(out, byDomain[pick][0].ID)
		placed = append(placed, pick)
		byDomain[pick] = byDomain[pick][1:]
	}
	return out, len(domains)
}

// alternateRacks reorders one region's bookies so consecutive ones are on
// different racks where possible (keeping the shuffled order per rack).
func alternateRacks(bs []BookieInfo) []BookieInfo {
	byRack := map[string][]BookieInfo{}
	var racks []string
	for _, b := range bs {
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	out := make([]BookieInfo, 0, len(bs))
	for len(out) < len(bs) {
		for _, r := range racks {
			if len(byRack[r]) > 0 {
				out = append(out, byRack[r][0])
				byRack[r] = byRack[r][1:]
			}
		}
	}
	return out
}

// fewestDomainsIn is the fewest distinct domains in any write set of ens.
func fewestDomainsIn(ens []string, writeQuorum int, domainOf map[string]string) int {
	fewest := writeQuorum
	for start := range ens {
		seen := map[string]bool{}
		for k := range writeQuorum {
			seen[domainOf[ens[(start+k)%len(ens)]]] = true
		}
		fewest = min(fewest, len(seen))
	}
	return fewest
}

// Replace implements PlacementPolicy: prefer a bookie from a domain not in
// the write sets that include idx; else one that keeps each of them at the
// minimum spread; else (not enforced) any, with a warning.
func (p *SpreadPlacement) Replace(bookies []BookieInfo, ensemble []string, idx, writeQuorum int, exclude []string) (string, error) {
	c := writable(bookies, append(slices.Clone(exclude), ensemble...))
	if len(c) == 0 {
		return "", fmt.Errorf("%w: no writable bookie outside the ensemble %v%s", ErrNotEnoughBookies, ensemble, readOnlyNote(bookies, nil))
	}
	p.random.shuffle(c)
	domainOf := map[string]string{}
	for _, b := range bookies {
		domainOf[b.ID] = p.Key(b)
	}
	used := map[string]bool{}
	e := len(ensemble)
	for off := -(writeQuorum - 1); off <= writeQuorum-1; off++ {
		if j := ((idx+off)%e + e) % e; j != idx {
			used[domainOf[ensemble[j]]] = true
		}
	}
	for _, b := range c {
		if !used[p.Key(b)] {
			return b.ID, nil
		}
	}
	need := p.required(writeQuorum)
	for _, b := range c {
		if need == 0 || p.writeSetsSpan(ensemble, idx, writeQuorum, domainOf, p.Key(b)) {
			return b.ID, nil
		}
	}
	why := p.shortfall(bookies, writable(bookies, exclude), need)
	if p.Enforce {
		return "", fmt.Errorf("%w: no writable bookie keeps every write quorum of position %d across %d %ss: %s",
			ErrNotEnoughBookies, idx, need, p.Kind, why)
	}
	if p.knownDomains(bookies) > 1 {
		p.log().Warn("ledger replacement below the minimum spread (best effort, not enforced)", "position", idx, "bookie", c[0].ID, "why", why)
	}
	return c[0].ID, nil
}

// writeSetsSpan reports whether every write set that includes idx spans at
// least the required domains once idx's bookie is in domain d.
func (p *SpreadPlacement) writeSetsSpan(ensemble []string, idx, writeQuorum int, domainOf map[string]string, d string) bool {
	e := len(ensemble)
	for start := idx - writeQuorum + 1; start <= idx; start++ {
		seen := map[string]bool{}
		for k := range writeQuorum {
			j := ((start+k)%e + e) % e
			if j == idx {
				seen[d] = true
			} else {
				seen[domainOf[ensemble[j]]] = true
			}
		}
		if len(seen) < p.required(writeQuorum) {
			return false
		}
	}
	return true
}

// misplacedTask finds, in the closed fragments of md, a replica that the
// policy would rather have elsewhere (BookKeeper's placement policy
// check): a position whose write sets span fewer domains than the
// writable bookies allow, held by a bookie whose domain is repeated in one
// of them, while a writable bookie outside the ensemble is in a domain
// none of them has. Only a SpreadPlacement has an opinion; lost bookies
// (unknown to bookies) are left to the lost-bookie path.
func misplacedTask(p PlacementPolicy, md *Metadata, bookies []BookieInfo) *replicaTask {
	sp, ok := p.(*SpreadPlacement)
	if !ok {
		return nil
	}
	domainOf := map[string]string{}
	writableDomains := map[string]bool{}
	for _, b := range bookies {
		domainOf[b.ID] = sp.Key(b)
		if !b.ReadOnly && !b.Absent {
			writableDomains[sp.Key(b)] = true
		}
	}
	qw := md.WriteQuorumSize
	for i, f := range md.Ensembles {
		closed := md.State == StateClosed || (md.State == StateOpen && i < len(md.Ensembles)-1)
		if !closed || fewestDomainsIn(f.Bookies, qw, domainOf) >= min(qw, len(writableDomains)) {
			continue
		}
		spare := writable(bookies, f.Bookies)
		e := len(f.Bookies)
		for pos, b := range f.Bookies {
			d, known := domainOf[b]
			if !known {
				continue
			}
			used, repeated := map[string]bool{}, false
			for off := -(qw - 1); off <= qw-1; off++ {
				if j := ((pos+off)%e + e) % e; j != pos {
					used[domainOf[f.Bookies[j]]] = true
					repeated = repeated || domainOf[f.Bookies[j]] == d
				}
			}
			if !repeated {
				continue
			}
			if slices.ContainsFunc(spare, func(s BookieInfo) bool { return !used[sp.Key(s)] }) {
				return &replicaTask{frag: i, pos: pos, bookie: b}
			}
		}
	}
	return nil
}
