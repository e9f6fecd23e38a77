package chart

import "fmt"

// Point is one data point in data units.
type Point struct{ X, Y float64 }

// Series is one line of the chart, drawn in the order given.
type Series struct {
	Name   string
	Points []Point
	Dashed bool
}

// Axis says how one dimension of the chart is scaled and labelled.
type Axis struct {
	Label string
	// Log uses a base-10 log scale; every value on the axis must then be
	// positive.
	Log bool
	// Min and Max fix the range; both zero means fit the data, widened to
	// tick values.
	Min, Max float64
	// Ticks are explicit tick positions; nil means 1-2-5 steps on a linear
	// axis and decades on a log axis. Ticks outside the range are dropped.
	Ticks []float64
	// Format labels the ticks; nil means plain decimal numbers.
	Format func(float64) string
}

// LineChart is a whole chart. Width and Height of zero mean 800x450.
type LineChart struct {
	Title         string
	X, Y          Axis
	Series        []Series
	Width, Height int
}

// Limits that bound the work and the size of the output.
const (
	defaultWidth, defaultHeight = 800, 450
	minWidth, minHeight         = 320, 200
	maxWidth, maxHeight         = 10000, 10000
	maxSeries                   = 64
	maxPoints                   = 1 << 20       // over all series together
	maxTicks                    = 100           // per axis, explicit or generated
	minMagnitude, maxMagnitude  = 1e-100, 1e100 // far beyond any benchmark
)

// SVG renders the chart as a standalone SVG document. It fails if the chart
// has no series, a series has no points, a value is NaN, infinite or of
// magnitude outside 1e-100..1e100, a value on a log axis is not positive,
// or a range or size is invalid.
func (c LineChart) SVG() ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("chart %q: %w", c.Title, err)
	}
	l, err := c.layout()
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", c.Title, err)
	}
	return render(c, l), nil
}

// size applies the default size.
func (c LineChart) size() (w, h int) {
	w, h = c.Width, c.Height
	if w == 0 {
		w = defaultWidth
	}
	if h == 0 {
		h = defaultHeight
	}
	return w, h
}
