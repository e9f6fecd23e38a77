package ledger

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
)

// BookieInfo is what placement knows about a bookie.
type BookieInfo struct {
	ID      string
	Address string // plaintext bookie protocol; "" when the bookie serves only TLS
	// TLSAddress is the TLS endpoint (bookiePortTls); "" without one.
	TLSAddress string
	Rack       string
	Region     string
	ReadOnly   bool
	// OutOfSpace: read-only because a disk is full (it returns by itself).
	OutOfSpace bool
}

// PlacementPolicy chooses ensembles.
type PlacementPolicy interface {
	// NewEnsemble picks size writable bookies, none in exclude.
	NewEnsemble(bookies []BookieInfo, size, writeQuorum, ackQuorum int, exclude []string) ([]string, error)
	// Replace picks a bookie for position idx of ensemble (whose current
	// bookie failed), none in exclude or the ensemble.
	Replace(bookies []BookieInfo, ensemble []string, idx, writeQuorum int, exclude []string) (string, error)
}

func writable(bookies []BookieInfo, exclude []string) []BookieInfo {
	var out []BookieInfo
	for _, b := range bookies {
		if !b.ReadOnly && !slices.Contains(exclude, b.ID) {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// readOnlyNote names the read-only bookies outside skip, for an error
// that would otherwise not say why bookies are missing: a bookie is
// read-only when its disks are full (or its storage failed), and an
// operator reading "not enough bookies" needs to know that.
func readOnlyNote(bookies []BookieInfo, skip []string) string {
	var ro []string
	full := false
	for _, b := range bookies {
		if b.ReadOnly && !slices.Contains(skip, b.ID) {
			ro = append(ro, b.ID)
			full = full || b.OutOfSpace
		}
	}
	if len(ro) == 0 {
		return ""
	}
	sort.Strings(ro)
	if full {
		return fmt.Sprintf("; read-only: %s: out of disk space", strings.Join(ro, ", "))
	}
	return fmt.Sprintf("; read-only: %s (out of disk space, or storage failed)", strings.Join(ro, ", "))
}

// RandomPlacement picks bookies uniformly at random (BookKeeper's default).
type RandomPlacement struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// NewRandomPlacement returns a random placement seeded with seed.
func NewRandomPlacement(seed uint64) *RandomPlacement {
	return &RandomPlacement{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (p *RandomPlacement) shuffle(c []BookieInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
}

// NewEnsemble implements PlacementPolicy.
func (p *RandomPlacement) NewEnsemble(bookies []BookieInfo, size, _, _ int, exclude []string) ([]string, error) {
	c := writable(bookies, exclude)
	if len(c) < size {
		return nil, fmt.Errorf("%w: need %d, have %d writable (of %d registered%s)", ErrNotEnoughBookies, size, len(c), len(bookies), readOnlyNote(bookies, nil))
	}
	p.shuffle(c)
	out := make([]string, size)
	for i := range out {
		out[i] = c[i].ID
	}
	return out, nil
}

// Replace implements PlacementPolicy.
func (p *RandomPlacement) Replace(bookies []BookieInfo, ensemble []string, _, _ int, exclude []string) (string, error) {
	c := writable(bookies, append(slices.Clone(exclude), ensemble...))
	if len(c) == 0 {
		return "", fmt.Errorf("%w: no writable bookie outside the ensemble %v%s", ErrNotEnoughBookies, ensemble, readOnlyNote(bookies, nil))
	}
	p.shuffle(c)
	return c[0].ID, nil
}

// SpreadPlacement spreads each write quorum over distinct failure domains
// (racks, or regions) where it can: rack-aware placement with Key =
// rack, region-aware with Key = region and MinDomains the minimum number
// of regions every write quorum must span (synchronous geo-replication
// relies on it; below that the ensemble is refused).
type SpreadPlacement struct {
	Key        func(BookieInfo) string
	MinDomains int
	random     *RandomPlacement
}

// NewRackAwarePlacement spreads write quorums over racks (best effort).
func NewRackAwarePlacement(seed uint64) *SpreadPlacement {
	return &SpreadPlacement{Key: func(b BookieInfo) string { return b.Rack }, random: NewRandomPlacement(seed)}
}

// NewRegionAwarePlacement spreads write quorums over regions and requires
// at least minRegions per write quorum.
func NewRegionAwarePlacement(seed uint64, minRegions int) *SpreadPlacement {
	return &SpreadPlacement{Key: func(b BookieInfo) string { return b.Region }, MinDomains: minRegions, random: NewRandomPlacement(seed)}
}

// NewEnsemble implements PlacementPolicy: bookies are taken round-robin
// over shuffled domains, so any writeQuorum consecutive positions (a
// write set) hold as many distinct domains as exist, up to writeQuorum.
func (p *SpreadPlacement) NewEnsemble(bookies []BookieInfo, size, writeQuorum, _ int, exclude []string) ([]string, error) {
	c := writable(bookies, exclude)
	if len(c) < size {
		return nil, fmt.Errorf("%w: need %d, have %d writable (of %d registered%s)", ErrNotEnoughBookies, size, len(c), len(bookies), readOnlyNote(bookies, nil))
	}
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
	if p.MinDomains > 0 && min(len(domains), writeQuorum) < p.MinDomains {
		return nil, fmt.Errorf("%w: write quorums must span %d domains, only %d have writable bookies", ErrNotEnoughBookies, p.MinDomains, len(domains))
	}
	var out []string
	for len(out) < size {
		for _, d := range domains {
			if len(byDomain[d]) > 0 && len(out) < size {
				out = append(out, byDomain[d][0].ID)
				byDomain[d] = byDomain[d][1:]
			}
		}
	}
	return out, nil
}

// Replace implements PlacementPolicy: prefer a bookie from a domain not in
// the write sets that include idx.
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
	for _, b := range c {
		if p.MinDomains == 0 || p.writeSetsSpan(ensemble, idx, writeQuorum, domainOf, p.Key(b)) {
			return b.ID, nil
		}
	}
	return "", fmt.Errorf("%w: no writable bookie keeps every write quorum of position %d across %d domains", ErrNotEnoughBookies, idx, p.MinDomains)
}

// writeSetsSpan reports whether every write set that includes idx spans at
// least MinDomains domains once idx's bookie is in domain d.
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
		if len(seen) < min(p.MinDomains, writeQuorum) {
			return false
		}
	}
	return true
}
