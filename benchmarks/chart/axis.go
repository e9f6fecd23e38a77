package chart

import "math"

// tick is one labelled position on an axis.
type tick struct {
	v     float64
	label string
}

// scale is an axis resolved against the data: its range, its ticks and
// the mapping from values to a fraction of the plot.
type scale struct {
	log    bool
	lo, hi float64
	major  []tick
	minor  []float64 // unlabelled grid lines
}

// frac maps v to its position in the range, 0 at lo and 1 at hi.
func (s scale) frac(v float64) float64 {
	if s.log {
		l := math.Log10(s.lo)
		return (math.Log10(v) - l) / (math.Log10(s.hi) - l)
	}
	return (v - s.lo) / (s.hi - s.lo)
}

// newScale resolves axis a for data spanning [lo, hi] (already validated:
// finite, and positive on a log axis). target is how many linear tick
// intervals fit the plot.
func newScale(a Axis, lo, hi float64, target int) scale {
	lo, hi, step := resolveRange(a, lo, hi, target)
	s := scale{log: a.Log, lo: lo, hi: hi}
	vals := tickValues(a, lo, hi, step)
	if a.Log && a.Ticks == nil {
		s.minor = logMinor(lo, hi, vals)
	}
	format := a.Format
	if format == nil {
		format = formatNumber
	}
	for _, v := range vals {
		s.major = append(s.major, tick{v: v, label: format(v)})
	}
	return s
}

// resolveRange returns the axis range and the linear tick step. An
// automatic range is the data range widened outwards to the nearest
// explicit ticks, or else to step multiples (linear) or 1-2-5 values
// (log), so that the plot edges fall on round numbers. The step is chosen
// once, before widening, so that the edges stay on ticks.
func resolveRange(a Axis, lo, hi float64, target int) (float64, float64, float64) {
	if a.Min != 0 || a.Max != 0 {
		return a.Min, a.Max, niceStep(a.Max-a.Min, target)
	}
	lo, hi = widenEmpty(a.Log, lo, hi)
	step := niceStep(hi-lo, target)
	lo, hi = snapDown(a, lo, step), snapUp(a, hi, step)
	if d0, d1 := decades(lo, hi); a.Log && a.Ticks == nil && d1-d0 >= 2 {
		// Decade ticks will be drawn: end on decades too, or the edges
		// would be unlabelled 1-2-5 values.
		lo, hi = math.Pow10(floorExp(lo)), math.Pow10(ceilExp(hi))
	}
	return lo, hi, step
}

// tickValues picks the tick positions within [lo, hi].
func tickValues(a Axis, lo, hi, step float64) []float64 {
	switch {
	case a.Ticks != nil:
		return inRange(a.Ticks, lo, hi)
	case a.Log:
		return logTicks(lo, hi)
	default:
		return linearTicks(lo, hi, step)
	}
}

// widenEmpty gives a flat range some width, so that a flat series is
// drawn across the middle of the plot. Ranges within float noise of flat
// count as flat: snapping their ends to round values could make them
// empty.
func widenEmpty(log bool, lo, hi float64) (float64, float64) {
	switch {
	case hi-lo > 1e-6*max(math.Abs(lo), math.Abs(hi)):
		return lo, hi
	case log:
		return lo / 2, hi * 2
	case lo == 0 && hi == 0:
		return -1, 1
	default:
		mid := lo/2 + hi/2
		d := math.Abs(mid) / 10
		return mid - d, mid + d
	}
}

func snapDown(a Axis, v, step float64) float64 {
	best, found := 0.0, false
	for _, t := range a.Ticks {
		if t <= v && (!found || t > best) {
			best, found = t, true
		}
	}
	switch {
	case found:
		return best
	case a.Log:
		return log125Down(v)
	default:
		return cleanFloat(math.Floor(v/step+eps) * step)
	}
}

func snapUp(a Axis, v, step float64) float64 {
	best, found := 0.0, false
	for _, t := range a.Ticks {
		if t >= v && (!found || t < best) {
			best, found = t, true
		}
	}
	switch {
	case found:
		return best
	case a.Log:
		return log125Up(v)
	default:
		return cleanFloat(math.Ceil(v/step-eps) * step)
	}
}
