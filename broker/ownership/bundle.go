package ownership

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// FullUpper is the upper boundary of a namespace's hash space; the bundle
// ending there includes it.
const FullUpper uint32 = 0xffffffff

// DefaultBundles is defaultNumberOfNamespaceBundles.
const DefaultBundles = 4

// Range is a range of topic-name hashes: [Lower, Upper), or [Lower, Upper]
// when Upper is FullUpper.
type Range struct{ Lower, Upper uint32 }

// Contains reports whether hash h falls in r.
func (r Range) Contains(h uint32) bool {
	if r.Upper == FullUpper {
		return h >= r.Lower
	}
	return h >= r.Lower && h < r.Upper
}

// Name is Pulsar's bundle name, "0x00000000_0x40000000".
func (r Range) Name() string { return fmt.Sprintf("0x%08x_0x%08x", r.Lower, r.Upper) }

// Split halves r (Pulsar's range_equally_divide).
func (r Range) Split() (Range, Range, error) {
	if r.Upper-r.Lower < 2 {
		return Range{}, Range{}, fmt.Errorf("bundle %s is too small to split", r.Name())
	}
	mid := r.Lower + (r.Upper-r.Lower)/2
	return Range{r.Lower, mid}, Range{mid, r.Upper}, nil
}

// ParseRange parses a bundle name.
func ParseRange(name string) (Range, error) {
	lo, hi, ok := strings.Cut(name, "_")
	if !ok {
		return Range{}, fmt.Errorf("bundle %q: want 0xLOWER_0xUPPER", name)
	}
	l, err1 := parseHex32(lo)
	u, err2 := parseHex32(hi)
	if err1 != nil || err2 != nil || l >= u {
		return Range{}, fmt.Errorf("bundle %q: want 0xLOWER_0xUPPER with lower < upper", name)
	}
	return Range{l, u}, nil
}

func parseHex32(s string) (uint32, error) {
	if !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
		return 0, fmt.Errorf("%q: no 0x prefix", s)
	}
	v, err := strconv.ParseUint(s[2:], 16, 32)
	return uint32(v), err
}

// Bundle is one bundle of one namespace ("tenant/ns").
type Bundle struct {
	Namespace string
	Range
}

// String is "tenant/ns/0xlower_0xupper", as pulsar-admin prints bundles.
func (b Bundle) String() string { return b.Namespace + "/" + b.Name() }

// path is the bundle's ownership node.
func (b Bundle) path() string { return ownerRoot + "/" + b.Namespace + "/" + b.Name() }

// HashTopic is the hash that places a topic in a bundle.
func HashTopic(topic string) uint32 { return crc32.ChecksumIEEE([]byte(topic)) }

// EvenBoundaries returns n+1 boundaries splitting the hash space evenly,
// as Pulsar computes a new namespace's bundles.
func EvenBoundaries(n int) []uint32 {
	if n < 1 {
		n = 1
	}
	step := (uint64(FullUpper) + 1) / uint64(n)
	b := make([]uint32, n+1)
	for i := range n {
		b[i] = uint32(uint64(i) * step)
	}
	b[n] = FullUpper
	return b
}

// FindRange returns the bundle range of boundaries that holds hash h.
// Boundaries must be sorted, start at 0 and end at FullUpper.
func FindRange(boundaries []uint32, h uint32) (Range, error) {
	if len(boundaries) < 2 || boundaries[0] != 0 || boundaries[len(boundaries)-1] != FullUpper {
		return Range{}, fmt.Errorf("bundle boundaries %x must start at 0x00000000 and end at 0xffffffff", boundaries)
	}
	lo, hi := 0, len(boundaries)-1 // invariant: boundaries[lo] <= h, and h < boundaries[hi] or hi is last
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if boundaries[mid] <= h {
			lo = mid
		} else {
			hi = mid
		}
	}
	return Range{boundaries[lo], boundaries[hi]}, nil
}

// SplitBoundaries returns boundaries with r split in half; r must be one
// of its bundles.
func SplitBoundaries(boundaries []uint32, r Range) ([]uint32, error) {
	for i := 0; i+1 < len(boundaries); i++ {
		if boundaries[i] == r.Lower && boundaries[i+1] == r.Upper {
			left, _, err := r.Split()
			if err != nil {
				return nil, err
			}
			out := append([]uint32{}, boundaries[:i+1]...)
			out = append(out, left.Upper)
			return append(out, boundaries[i+1:]...), nil
		}
	}
	return nil, fmt.Errorf("bundle %s: %w (it may have been split already)", r.Name(), ErrUnknownBundle)
}
