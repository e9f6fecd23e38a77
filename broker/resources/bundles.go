package resources

import (
	"fmt"
	"strconv"
	"strings"
)

// A namespace's topics are spread over bundles: hash ranges that together
// cover the 32-bit space [0x00000000, 0xffffffff]. A namespace stores the
// n+1 boundaries of its n bundles, as Pulsar's hex strings; bundle i is
// [boundaries[i], boundaries[i+1]), the last one including 0xffffffff.

// Boundary limits and defaults.
const (
	FirstBoundary = "0x00000000"
	LastBoundary  = "0xffffffff"
	// DefaultNumberOfNamespaceBundles is Pulsar's
	// defaultNumberOfNamespaceBundles.
	DefaultNumberOfNamespaceBundles = 4
	// MaxBundles bounds a namespace's bundles: 65537 boundaries of 13 JSON
	// bytes each keep the policies node well under metadata.MaxValueSize.
	MaxBundles = 1 << 16
)

// BundlesData is Pulsar's BundlesData: {"boundaries": [...], "numBundles": n}.
type BundlesData struct {
	Boundaries []string `json:"boundaries"`
	NumBundles int      `json:"numBundles"`
}

// EvenBoundaries splits the hash space into n bundles as Pulsar's
// getBundles does: each floor(2^32/n) wide, the last one also taking the
// remainder and ending at 0xffffffff.
func EvenBoundaries(n int) ([]string, error) {
	if n < 1 || n > MaxBundles {
		return nil, invalidf("bundles.numBundles", "must be between 1 and %d, got %d", MaxBundles, n)
	}
	const space = uint64(1) << 32
	width := space / uint64(n)
	out := make([]string, 0, n+1)
	for i := 0; i < n; i++ {
		out = append(out, formatBoundary(uint64(i)*width))
	}
	return append(out, LastBoundary), nil
}

// NewBundles returns n even bundles.
func NewBundles(n int) (BundlesData, error) {
	b, err := EvenBoundaries(n)
	if err != nil {
		return BundlesData{}, err
	}
	return BundlesData{Boundaries: b, NumBundles: n}, nil
}

// ValidateBoundaries checks given boundaries (strictly increasing, from
// 0x00000000 to 0xffffffff, at most MaxBundles bundles) and returns them
// in Pulsar's canonical spelling (lower-case, eight hex digits).
func ValidateBoundaries(boundaries []string) ([]string, error) {
	if len(boundaries) < 2 || len(boundaries) > MaxBundles+1 {
		return nil, invalidf("bundles.boundaries", "want between 2 and %d boundaries, got %d", MaxBundles+1, len(boundaries))
	}
	out := make([]string, len(boundaries))
	var prev uint64
	for i, s := range boundaries {
		v, err := parseBoundary(s)
		if err != nil {
			return nil, invalidf(fmt.Sprintf("bundles.boundaries[%d]", i), "%v", err)
		}
		if i > 0 && v <= prev {
			return nil, invalidf(fmt.Sprintf("bundles.boundaries[%d]", i),
				"must be greater than the one before (%s), got %s", formatBoundary(prev), s)
		}
		out[i], prev = formatBoundary(v), v
	}
	if out[0] != FirstBoundary || out[len(out)-1] != LastBoundary {
		return nil, invalidf("bundles.boundaries", "must start at %s and end at %s, got %s..%s",
			FirstBoundary, LastBoundary, boundaries[0], boundaries[len(boundaries)-1])
	}
	return out, nil
}

// validate checks stored bundles: canonical boundaries and a matching count.
func (b *BundlesData) validate() error {
	norm, err := ValidateBoundaries(b.Boundaries)
	if err != nil {
		return err
	}
	if b.NumBundles != len(norm)-1 {
		return invalidf("bundles.numBundles", "must be %d for %d boundaries, got %d", len(norm)-1, len(norm), b.NumBundles)
	}
	return nil
}

// completeBundles fills in what a create request may leave out, as Pulsar does:
// no bundles means defaultN even ones, a count alone means that many even
// ones, boundaries alone imply the count.
func completeBundles(b *BundlesData, defaultN int) (*BundlesData, error) {
	if b == nil || (len(b.Boundaries) == 0 && b.NumBundles == 0) {
		nb, err := NewBundles(defaultN)
		return &nb, err
	}
	if len(b.Boundaries) == 0 {
		nb, err := NewBundles(b.NumBundles)
		return &nb, err
	}
	norm, err := ValidateBoundaries(b.Boundaries)
	if err != nil {
		return nil, err
	}
	nb := BundlesData{Boundaries: norm, NumBundles: b.NumBundles}
	if nb.NumBundles == 0 {
		nb.NumBundles = len(norm) - 1
	}
	return &nb, nb.validate()
}

func formatBoundary(v uint64) string { return fmt.Sprintf("0x%08x", v) }

// parseBoundary reads "0x" followed by one to eight hex digits.
func parseBoundary(s string) (uint64, error) {
	digits, ok := strings.CutPrefix(strings.ToLower(s), "0x")
	if !ok || len(digits) == 0 || len(digits) > 8 {
		return 0, fmt.Errorf("%q is not a 32-bit hex value like 0x40000000", s)
	}
	v, err := strconv.ParseUint(digits, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 32-bit hex value like 0x40000000", s)
	}
	return v, nil
}
