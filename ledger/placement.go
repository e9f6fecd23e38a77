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
	// Group is the rack-map group naming the bookie ("" if none); ledgers
	// with bookie affinity groups are placed only in theirs.
	Group string
	// Absent: named by the rack map, or seen registered by this client
	// earlier, but not registered now (down). Never
	// placed on; placement names its region or rack when one is missing.
	Absent bool
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
		if !b.ReadOnly && !b.Absent && !slices.Contains(exclude, b.ID) {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// registered counts the bookies that are registered (not Absent).
func registered(bookies []BookieInfo) int {
	n := 0
	for _, b := range bookies {
		if !b.Absent {
			n++
		}
	}
	return n
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
		return nil, fmt.Errorf("%w: need %d, have %d writable (of %d registered%s)", ErrNotEnoughBookies, size, len(c), registered(bookies), readOnlyNote(bookies, nil))
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
