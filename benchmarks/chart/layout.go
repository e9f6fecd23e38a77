package chart

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// Text and spacing, in pixels.
const (
	fontSize   = 12
	titleSize  = 16
	charWidth  = 7.0 // rough advance of a 12px sans-serif character
	tickLen    = 5
	swatchLen  = 24 // legend line sample
	legendRow  = 18
	minPlotPx  = 60 // smallest plot box worth drawing
	yTickSpace = 50 // pixels per y tick interval, roughly
	xTickSpace = 90 // wider than y: labels sit side by side
)

// layout places the plot box inside the chart. The y axis is resolved
// first because its label widths set the left margin, which sets the plot
// width, which sets how many x ticks fit.
type layout struct {
	w, h         float64
	left, top    float64
	plotW, plotH float64
	x, y         scale
}

func (c LineChart) layout() (layout, error) {
	w, h := c.size()
	l := layout{w: float64(w), h: float64(h), top: 16}
	if c.Title != "" {
		l.top = 44
	}
	bottom := float64(tickLen + fontSize + 12)
	if c.X.Label != "" {
		bottom += fontSize + 10
	}
	l.plotH = l.h - l.top - bottom
	xlo, xhi, ylo, yhi := c.bounds()
	l.y = newScale(c.Y, ylo, yhi, max(2, int(l.plotH/yTickSpace)))
	l.left = tickLen + 6 + maxLabelWidth(l.y.major) + 8
	if c.Y.Label != "" {
		l.left += fontSize + 10
	}
	l.plotW = l.w - l.left - c.legendWidth()
	if l.plotW < minPlotPx || l.plotH < minPlotPx {
		return l, fmt.Errorf("labels and legend leave %.0fx%.0f pixels for the plot: %w",
			l.plotW, l.plotH, ErrBadSize)
	}
	l.x = newScale(c.X, xlo, xhi, max(2, int(l.plotW/xTickSpace)))
	return l, nil
}

// bounds returns the extent of all points.
func (c LineChart) bounds() (xlo, xhi, ylo, yhi float64) {
	xlo, ylo = math.Inf(1), math.Inf(1)
	xhi, yhi = math.Inf(-1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			xlo, xhi = min(xlo, p.X), max(xhi, p.X)
			ylo, yhi = min(ylo, p.Y), max(yhi, p.Y)
		}
	}
	return xlo, xhi, ylo, yhi
}

// legendWidth is the right margin: the legend when any series is named,
// else room for half of the last x tick label.
func (c LineChart) legendWidth() float64 {
	longest := 0
	for _, s := range c.Series {
		longest = max(longest, utf8.RuneCountInString(s.Name))
	}
	if longest == 0 {
		return 32
	}
	return 16 + swatchLen + 6 + float64(longest)*charWidth + 12
}

func maxLabelWidth(ts []tick) float64 {
	n := 0
	for _, t := range ts {
		n = max(n, utf8.RuneCountInString(t.label))
	}
	return float64(n) * charWidth
}

// px and py map data values to chart pixels.
func (l layout) px(v float64) float64 { return l.left + l.x.frac(v)*l.plotW }
func (l layout) py(v float64) float64 { return l.top + (1-l.y.frac(v))*l.plotH }
