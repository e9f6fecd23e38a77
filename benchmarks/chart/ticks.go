package chart

import (
	"math"
	"strconv"
	"strings"
)

// eps absorbs floating-point error when comparing values against step
// multiples and powers of ten (log10(1000) need not be exactly 3).
const eps = 1e-9

// niceStep returns the smallest 1-2-5 step (1, 2, 5, 10, 20, ...) that
// cuts span into at most target intervals. span must be positive.
func niceStep(span float64, target int) float64 {
	rough := span / float64(max(target, 1))
	mag := math.Pow10(clampExp(math.Floor(math.Log10(rough))))
	for _, m := range []float64{1, 2, 5} {
		if rough <= m*mag*(1+eps) {
			return m * mag
		}
	}
	return 10 * mag
}

// linearTicks returns the multiples of step in [lo, hi].
func linearTicks(lo, hi, step float64) []float64 {
	first := math.Ceil(lo/step - eps)
	last := math.Floor(hi/step + eps)
	var out []float64
	for k := first; k <= last && len(out) < maxTicks; k++ {
		out = append(out, cleanFloat(k*step))
	}
	return out
}

// maxDecadeTicks keeps decade labels apart on axes that span many decades.
const maxDecadeTicks = 10

// logTicks returns the powers of ten in [lo, hi], thinned to at most
// maxDecadeTicks. When fewer than three fit, it returns the 1-2-5
// multiples instead, and when even those are too few, linear ticks.
func logTicks(lo, hi float64) []float64 {
	d0, d1 := decades(lo, hi)
	if n := d1 - d0 + 1; n >= 3 {
		stride := (n + maxDecadeTicks - 1) / maxDecadeTicks
		var out []float64
		for d := d0; d <= d1; d += stride {
			out = append(out, math.Pow10(d))
		}
		return out
	}
	out := inRange(log125(d0-1, d1), lo, hi)
	if len(out) < 2 {
		return linearTicks(lo, hi, niceStep(hi-lo, 4))
	}
	return out
}

// decades returns the exponents of the first and last powers of ten in
// [lo, hi]; d1 < d0 when there are none.
func decades(lo, hi float64) (d0, d1 int) { return ceilExp(lo), floorExp(hi) }

// floorExp and ceilExp return the exponent of the power of ten at or below
// (at or above) v > 0, tolerating log10's rounding: log10(1000) need not
// be exactly 3.
func floorExp(v float64) int { return clampExp(math.Floor(math.Log10(v) + eps)) }
func ceilExp(v float64) int  { return clampExp(math.Ceil(math.Log10(v) - eps)) }

// clampExp turns an exponent into an int bounded to where float64 powers
// of ten exist, so loops over exponents stay short whatever the input.
func clampExp(e float64) int {
	const limit = 330
	if math.IsNaN(e) {
		return 0
	}
	return int(min(max(e, -limit), limit))
}

// log125 returns 1, 2 and 5 times each power of ten from 10^d0 to 10^d1.
func log125(d0, d1 int) []float64 {
	var out []float64
	for d := d0; d <= d1; d++ {
		for _, m := range []float64{1, 2, 5} {
			out = append(out, cleanFloat(m*math.Pow10(d)))
		}
	}
	return out
}

// logMinor returns the minor grid positions of a log axis: 2..9 times each
// power of ten in [lo, hi] that is not a major tick. It returns nil for
// axes over maxDecadeTicks decades, where the lines would merge.
func logMinor(lo, hi float64, major []float64) []float64 {
	d0, d1 := floorExp(lo), floorExp(hi)
	if d1-d0 > maxDecadeTicks {
		return nil
	}
	var out []float64
	for d := d0; d <= d1; d++ {
		for m := 2.0; m <= 9; m++ {
			v := cleanFloat(m * math.Pow10(d))
			if within(v, lo, hi) && !contains(major, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// log125Down returns the largest 1-2-5 value at or below v > 0.
func log125Down(v float64) float64 {
	base := math.Pow10(floorExp(v))
	for _, m := range []float64{5, 2} {
		if m*base <= v*(1+eps) {
			return cleanFloat(m * base)
		}
	}
	return base
}

// log125Up returns the smallest 1-2-5 value at or above v > 0.
func log125Up(v float64) float64 {
	base := math.Pow10(ceilExp(v) - 1)
	for _, m := range []float64{1, 2, 5} {
		if m*base >= v*(1-eps) {
			return cleanFloat(m * base)
		}
	}
	return cleanFloat(10 * base)
}

// inRange returns the values of vs within [lo, hi], in order.
func inRange(vs []float64, lo, hi float64) []float64 {
	var out []float64
	for _, v := range vs {
		if within(v, lo, hi) {
			out = append(out, v)
		}
	}
	return out
}

// within is lo <= v <= hi with a relative tolerance, so that a tick
// computed as 0.1*3 still counts as inside a range that ends at 0.3.
func within(v, lo, hi float64) bool {
	tol := eps * math.Max(math.Abs(hi-lo), math.Max(math.Abs(lo), math.Abs(hi)))
	return v >= lo-tol && v <= hi+tol
}

func contains(vs []float64, v float64) bool {
	for _, x := range vs {
		if math.Abs(x-v) <= eps*math.Abs(v) {
			return true
		}
	}
	return false
}

// cleanFloat rounds to 12 significant digits, so that 3*0.1 becomes 0.3
// and -0 becomes 0 before values are compared or printed.
func cleanFloat(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	if err != nil || r == 0 {
		return 0 // err is impossible: FormatFloat output always parses
	}
	return r
}

// formatNumber is the default tick label: plain decimals such as "0.05",
// SI suffixes from 1000 on ("1.5k", "600k", "2M"), and exponents such as
// "1e-5" or "2e15" where those get too long to read.
func formatNumber(v float64) string {
	v = cleanFloat(v)
	a := math.Abs(v)
	if a != 0 && (a < 1e-4 || a >= 1e15) {
		s := strconv.FormatFloat(v, 'g', -1, 64)
		return strings.NewReplacer("e+0", "e", "e+", "e", "e-0", "e-").Replace(s)
	}
	// SI suffixes because "600k" reads faster than "600000".
	siUnits := [...]struct {
		scale  float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}
	for _, u := range siUnits {
		if a >= u.scale {
			return strconv.FormatFloat(cleanFloat(v/u.scale), 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
