package chart

import (
	"math"
	"strconv"
)

// maxPercentile is where PercentileX clamps: 100% itself maps to infinity.
const maxPercentile = 99.9999

// PercentileX maps a percentile p in 0..100 to the x at which
// PercentileAxis draws it: 1/(1-p/100), so that on a log axis 90, 99,
// 99.9, ... are evenly spaced. p is clamped to 0..99.9999, which keeps
// p = 100 (the maximum) finite and draws it where 99.9999% would go.
// NaN stays NaN and is rejected by LineChart.SVG.
func PercentileX(p float64) float64 {
	p = min(max(p, 0), maxPercentile)
	return 1 / (1 - p/100)
}

// PercentileAxis returns a log axis for x values from PercentileX, with
// ticks at 50%, 90%, 99%, ..., 99.9999% labelled as percentiles. There is
// no 0% tick: it sits too close to 50% for both labels to fit, and a plot
// that starts there still ends on x = 1 (0%).
func PercentileAxis(label string) Axis {
	ps := []float64{50, 90, 99, 99.9, 99.99, 99.999, maxPercentile}
	ticks := make([]float64, len(ps))
	for i, p := range ps {
		ticks[i] = PercentileX(p)
	}
	return Axis{Label: label, Log: true, Ticks: ticks, Format: formatPercentile}
}

// formatPercentile labels an x from PercentileX with its percentile,
// e.g. 1000 as "99.9%". It rounds to four decimals, enough to tell
// 99.9999% from 100%, and hides the float error of 1/(1-p/100).
func formatPercentile(x float64) string {
	p := 100 * (1 - 1/x)
	p = math.Round(p*1e4) / 1e4
	return strconv.FormatFloat(p, 'f', -1, 64) + "%"
}
