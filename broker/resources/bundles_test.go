package resources

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestEvenBoundariesDefault(t *testing.T) {
	got, err := EvenBoundaries(DefaultNumberOfNamespaceBundles)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"}
	if !slices.Equal(got, want) {
		t.Fatalf("EvenBoundaries(4) = %v, want %v", got, want)
	}
	for _, n := range []int{0, -1, MaxBundles + 1} {
		if _, err := EvenBoundaries(n); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "bundles.numBundles") {
			t.Errorf("EvenBoundaries(%d) = %v, want ErrInvalid naming bundles.numBundles", n, err)
		}
	}
}

// Every n gives n+1 strictly increasing boundaries covering the space,
// equal widths but for the last, which takes the remainder. Small counts
// are drawn at random; the largest are checked once (each costs 65536
// boundaries).
func TestEvenBoundariesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		if err := checkEven(rapid.IntRange(1, 4096).Draw(t, "n")); err != nil {
			t.Fatal(err)
		}
	})
	for _, n := range []int{MaxBundles - 1, MaxBundles} {
		if err := checkEven(n); err != nil {
			t.Fatal(err)
		}
	}
}

func checkEven(n int) error {
	b, err := EvenBoundaries(n)
	if err != nil {
		return err
	}
	if len(b) != n+1 || b[0] != FirstBoundary || b[n] != LastBoundary {
		return fmt.Errorf("n=%d: %d boundaries from %s to %s", n, len(b), b[0], b[len(b)-1])
	}
	if norm, err := ValidateBoundaries(b); err != nil || !slices.Equal(norm, b) {
		return fmt.Errorf("n=%d: not canonical and valid: %v", n, err)
	}
	width := (uint64(1) << 32) / uint64(n)
	for i := 0; i < n-1; i++ {
		if w := mustParse(b[i+1]) - mustParse(b[i]); w != width {
			return fmt.Errorf("n=%d: bundle %d is %d wide, want %d", n, i, w, width)
		}
	}
	if last := mustParse(b[n]) - mustParse(b[n-1]) + 1; last < width || last >= width+uint64(n) {
		return fmt.Errorf("n=%d: last bundle %d wide, want %d plus a remainder below n", n, last, width)
	}
	return nil
}

// Sorted distinct inner points plus both ends validate and come back
// canonical; breaking the order, an end, or the syntax is an ErrInvalid
// naming the field.
func TestValidateBoundariesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		inner := rapid.SliceOfNDistinct(rapid.Uint32Range(1, 0xfffffffe), 0, 50, rapid.ID[uint32]).Draw(t, "inner")
		slices.Sort(inner)
		vals := append(append([]uint64{0}, toU64(inner)...), 0xffffffff)
		upper := rapid.Bool().Draw(t, "upper")
		in := make([]string, len(vals))
		for i, v := range vals {
			in[i] = formatBoundary(v)
			if upper {
				in[i] = "0x" + strings.ToUpper(in[i][2:])
			}
		}
		norm, err := ValidateBoundaries(in)
		if err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		for i, v := range vals {
			if norm[i] != formatBoundary(v) {
				t.Fatalf("norm[%d] = %s, want %s", i, norm[i], formatBoundary(v))
			}
		}
		expectInvalid(t, breakBoundaries(t, in))
	})
}

func breakBoundaries(t *rapid.T, in []string) []string {
	out := slices.Clone(in)
	switch rapid.IntRange(0, 3).Draw(t, "how") {
	case 0: // out of order or repeated
		i := rapid.IntRange(1, len(out)-1).Draw(t, "i")
		out[i] = out[i-1]
	case 1: // missing an end
		if rapid.Bool().Draw(t, "first") {
			out = out[1:]
		} else {
			out = out[:len(out)-1]
		}
	case 2: // not hex
		out[rapid.IntRange(0, len(out)-1).Draw(t, "i")] = "0xg0000000"
	case 3: // too wide
		out[len(out)-1] = "0x100000000"
	}
	return out
}

func expectInvalid(t *rapid.T, in []string) {
	_, err := ValidateBoundaries(in)
	var fe *FieldError
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "bundles.boundaries") {
		t.Fatalf("ValidateBoundaries(%v) = %v, want ErrInvalid on bundles.boundaries", in, err)
	}
}

func TestCompleteBundles(t *testing.T) {
	b, err := completeBundles(nil, 4)
	if err != nil || b.NumBundles != 4 || len(b.Boundaries) != 5 {
		t.Fatalf("default: %+v %v", b, err)
	}
	b, err = completeBundles(&BundlesData{NumBundles: 8}, 4)
	if err != nil || b.NumBundles != 8 || b.Boundaries[1] != "0x20000000" {
		t.Fatalf("count only: %+v %v", b, err)
	}
	b, err = completeBundles(&BundlesData{Boundaries: []string{"0x0", "0X80000000", "0xFFFFFFFF"}}, 4)
	if err != nil || b.NumBundles != 2 || !slices.Equal(b.Boundaries, []string{FirstBoundary, "0x80000000", LastBoundary}) {
		t.Fatalf("boundaries only: %+v %v", b, err)
	}
	_, err = completeBundles(&BundlesData{Boundaries: []string{FirstBoundary, LastBoundary}, NumBundles: 3}, 4)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "bundles.numBundles") {
		t.Fatalf("mismatched count: %v", err)
	}
}

// mustParse reads a boundary EvenBoundaries made, which ValidateBoundaries
// has already accepted.
func mustParse(s string) uint64 {
	v, err := parseBoundary(s)
	if err != nil {
		panic(err)
	}
	return v
}

func toU64(in []uint32) []uint64 {
	out := make([]uint64, len(in))
	for i, v := range in {
		out[i] = uint64(v)
	}
	return out
}
