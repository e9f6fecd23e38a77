package ledger

import (
	"errors"
	"fmt"
	"testing"
)

func bookiesIn(domains map[string]int, key func(b *BookieInfo, d string)) []BookieInfo {
	var out []BookieInfo
	for d, n := range domains {
		for i := range n {
			b := BookieInfo{ID: fmt.Sprintf("%s-b%d", d, i)}
			key(&b, d)
			out = append(out, b)
		}
	}
	return out
}

// writeSetsSpan reports the fewest distinct domains in any write set.
func fewestDomains(ens []string, w int, domainOf map[string]string) int {
	fewest := w
	for start := range ens {
		seen := map[string]bool{}
		for k := range w {
			seen[domainOf[ens[(start+k)%len(ens)]]] = true
		}
		fewest = min(fewest, len(seen))
	}
	return fewest
}

func TestRackAwareSpreadsWriteSets(t *testing.T) {
	bookies := bookiesIn(map[string]int{"r1": 3, "r2": 3, "r3": 2}, func(b *BookieInfo, d string) { b.Rack = d })
	domainOf := map[string]string{}
	for _, b := range bookies {
		domainOf[b.ID] = b.Rack
	}
	for seed := range uint64(50) {
		p := NewRackAwarePlacement(seed)
		ens, err := p.NewEnsemble(bookies, 6, 3, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := fewestDomains(ens, 3, domainOf); got != 3 {
			t.Fatalf("seed %d: ensemble %v has a write set over %d racks, want 3", seed, ens, got)
		}
		// A replacement keeps the write sets spread.
		repl, err := p.Replace(bookies, ens, 2, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		ens[2] = repl
		if got := fewestDomains(ens, 3, domainOf); got < 2 {
			t.Fatalf("seed %d: after replacing position 2 with %s a write set spans %d racks", seed, repl, got)
		}
	}
}

func TestRegionAwareRequiresMinRegions(t *testing.T) {
	two := bookiesIn(map[string]int{"eu": 3, "us": 3}, func(b *BookieInfo, d string) { b.Region = d })
	p := NewRegionAwarePlacement(1, 2)
	domainOf := map[string]string{}
	for _, b := range two {
		domainOf[b.ID] = b.Region
	}
	ens, err := p.NewEnsemble(two, 4, 2, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fewestDomains(ens, 2, domainOf); got != 2 {
		t.Fatalf("ensemble %v: a write quorum within one region", ens)
	}
	// Replacing a bookie must keep both of its write sets across regions.
	for pos := range ens {
		repl, err := p.Replace(two, ens, pos, 2, nil)
		if err != nil {
			t.Fatalf("replace position %d: %v", pos, err)
		}
		next := append([]string(nil), ens...)
		next[pos] = repl
		if got := fewestDomains(next, 2, domainOf); got != 2 {
			t.Fatalf("replacing position %d with %s put a write quorum in one region: %v", pos, repl, next)
		}
	}
	one := bookiesIn(map[string]int{"eu": 5}, func(b *BookieInfo, d string) { b.Region = d })
	if _, err := p.NewEnsemble(one, 3, 2, 2, nil); !errors.Is(err, ErrNotEnoughBookies) {
		t.Fatalf("one region for a two-region policy: %v, want ErrNotEnoughBookies", err)
	}
}

func TestPlacementSkipsReadOnlyAndExcluded(t *testing.T) {
	bookies := []BookieInfo{{ID: "a"}, {ID: "b", ReadOnly: true}, {ID: "c"}, {ID: "d"}}
	p := NewRandomPlacement(3)
	for range 20 {
		ens, err := p.NewEnsemble(bookies, 2, 2, 2, []string{"d"})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range ens {
			if b == "b" || b == "d" {
				t.Fatalf("ensemble %v has a read-only or excluded bookie", ens)
			}
		}
	}
	if _, err := p.NewEnsemble(bookies, 3, 2, 2, []string{"d"}); !errors.Is(err, ErrNotEnoughBookies) {
		t.Fatalf("too few writable bookies: %v", err)
	}
}
