package chart

import (
	"errors"
	"fmt"
	"math"
)

// Errors returned (wrapped) by LineChart.SVG; test with errors.Is.
var (
	ErrNoSeries    = errors.New("no series")
	ErrEmptySeries = errors.New("series has no points")
	ErrNonFinite   = errors.New("value is NaN or infinite")
	ErrNonPositive = errors.New("value is not positive on a log axis")
	ErrOutOfRange  = errors.New("value magnitude outside 1e-100..1e100")
	ErrBadRange    = errors.New("axis Min must be below Max")
	ErrBadSize     = errors.New("size out of bounds")
	ErrTooLarge    = errors.New("too much data")
)

// validate checks everything that does not depend on layout, so that
// rendering can assume finite values and positive ones on log axes.
func (c LineChart) validate() error {
	if err := c.validateSize(); err != nil {
		return err
	}
	if err := validateAxis(c.X); err != nil {
		return fmt.Errorf("x axis: %w", err)
	}
	if err := validateAxis(c.Y); err != nil {
		return fmt.Errorf("y axis: %w", err)
	}
	return c.validateSeries()
}

func (c LineChart) validateSize() error {
	w, h := c.size()
	if w < minWidth || w > maxWidth || h < minHeight || h > maxHeight {
		return fmt.Errorf("%dx%d not within %dx%d..%dx%d: %w",
			w, h, minWidth, minHeight, maxWidth, maxHeight, ErrBadSize)
	}
	return nil
}

func validateAxis(a Axis) error {
	if a.Min != 0 || a.Max != 0 {
		if err := checkValue(a, a.Min); err != nil {
			return fmt.Errorf("min %v: %w", a.Min, err)
		}
		if err := checkValue(a, a.Max); err != nil {
			return fmt.Errorf("max %v: %w", a.Max, err)
		}
		if !(a.Min < a.Max) {
			return fmt.Errorf("min %v, max %v: %w", a.Min, a.Max, ErrBadRange)
		}
	}
	if len(a.Ticks) > maxTicks {
		return fmt.Errorf("%d ticks, at most %d: %w", len(a.Ticks), maxTicks, ErrTooLarge)
	}
	for i, t := range a.Ticks {
		if err := checkValue(a, t); err != nil {
			return fmt.Errorf("tick %d (%v): %w", i, t, err)
		}
	}
	return nil
}

func (c LineChart) validateSeries() error {
	if len(c.Series) == 0 {
		return ErrNoSeries
	}
	if len(c.Series) > maxSeries {
		return fmt.Errorf("%d series, at most %d: %w", len(c.Series), maxSeries, ErrTooLarge)
	}
	total := 0
	for i, s := range c.Series {
		total += len(s.Points)
		if err := validatePoints(s.Points, c.X, c.Y); err != nil {
			return fmt.Errorf("series %d (%q): %w", i, s.Name, err)
		}
	}
	if total > maxPoints {
		return fmt.Errorf("%d points, at most %d: %w", total, maxPoints, ErrTooLarge)
	}
	return nil
}

func validatePoints(pts []Point, x, y Axis) error {
	if len(pts) == 0 {
		return ErrEmptySeries
	}
	for i, p := range pts {
		if err := checkValue(x, p.X); err != nil {
			return fmt.Errorf("point %d: x %v: %w", i, p.X, err)
		}
		if err := checkValue(y, p.Y); err != nil {
			return fmt.Errorf("point %d: y %v: %w", i, p.Y, err)
		}
	}
	return nil
}

// checkValue reports whether v can be placed on axis a.
func checkValue(a Axis, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ErrNonFinite
	}
	if a.Log && v <= 0 {
		return ErrNonPositive
	}
	// Keeps spans, steps and powers of ten finite and normal: a range
	// near 1e308 overflows when widened, one near 5e-324 underflows to a
	// zero tick step.
	if abs := math.Abs(v); abs > maxMagnitude || (abs != 0 && abs < minMagnitude) {
		return ErrOutOfRange
	}
	return nil
}
