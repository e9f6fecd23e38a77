package chart

import (
	"fmt"
	"math"
	"testing"
)

func TestNiceStep(t *testing.T) {
	cases := []struct {
		span   float64
		target int
		want   float64
	}{
		{10, 5, 2}, {10, 10, 1}, {10, 4, 5}, {10, 2, 5}, {10, 1, 10},
		{1, 5, 0.2}, {0.003, 3, 0.001}, {7300, 6, 2000}, {1e9, 5, 2e8},
		{11, 5, 5}, {10.0000000001, 5, 2}, // float noise must not bump the step
	}
	for _, c := range cases {
		if got := niceStep(c.span, c.target); !approxEq(got, c.want) {
			t.Errorf("niceStep(%v, %d) = %v, want %v", c.span, c.target, got, c.want)
		}
	}
}

func TestLinearTicks(t *testing.T) {
	cases := []struct {
		lo, hi, step float64
		want         []float64
	}{
		{0, 1, 0.2, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{-0.3, 0.3, 0.1, []float64{-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3}},
		{0.05, 0.95, 0.2, []float64{0.2, 0.4, 0.6, 0.8}},
		{1e6, 3e6, 5e5, []float64{1e6, 1.5e6, 2e6, 2.5e6, 3e6}},
	}
	for _, c := range cases {
		got := linearTicks(c.lo, c.hi, c.step)
		// Exact equality on purpose: ticks are printed, so 0.30000000000000004 is a bug.
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("linearTicks(%v, %v, %v) = %v, want %v", c.lo, c.hi, c.step, got, c.want)
		}
	}
}

func TestLogTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		want   []float64
	}{
		{1, 1e6, []float64{1, 10, 100, 1000, 1e4, 1e5, 1e6}},
		{0.05, 800, []float64{0.1, 1, 10, 100}},
		{0.2, 50, []float64{0.2, 0.5, 1, 2, 5, 10, 20, 50}},
		{2, 8, []float64{2, 5}},
		{3, 4, []float64{3, 3.5, 4}}, // no 1-2-5 value fits: linear
		{1e-10, 1e10, []float64{1e-10, 1e-7, 1e-4, 0.1, 100, 1e5, 1e8}},
	}
	for _, c := range cases {
		if got := logTicks(c.lo, c.hi); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("logTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

func TestLogMinor(t *testing.T) {
	got := logMinor(1, 100, []float64{1, 10, 100})
	want := []float64{2, 3, 4, 5, 6, 7, 8, 9, 20, 30, 40, 50, 60, 70, 80, 90}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("logMinor(1, 100) = %v, want %v", got, want)
	}
	if got := logMinor(1e-20, 1e20, nil); got != nil {
		t.Errorf("logMinor over 40 decades = %d lines, want none", len(got))
	}
}

func TestLog125Snap(t *testing.T) {
	cases := []struct{ v, down, up float64 }{
		{1, 1, 1}, {0.3, 0.2, 0.5}, {45, 20, 50}, {1000, 1000, 1000}, {999.9999999999, 1000, 1000},
		{7, 5, 10}, {0.012, 0.01, 0.02}, {2, 2, 2},
	}
	for _, c := range cases {
		if got := log125Down(c.v); !approxEq(got, c.down) {
			t.Errorf("log125Down(%v) = %v, want %v", c.v, got, c.down)
		}
		if got := log125Up(c.v); !approxEq(got, c.up) {
			t.Errorf("log125Up(%v) = %v, want %v", c.v, got, c.up)
		}
	}
}

func TestFormatNumber(t *testing.T) {
	cases := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {0.1, "0.1"}, {3 * 0.1, "0.3"}, {-2.5, "-2.5"},
		{999, "999"}, {1000, "1k"}, {1500, "1.5k"}, {25000, "25k"}, {600000, "600k"}, {1e6, "1M"},
		{-3e8, "-300M"}, {1.25e9, "1.25G"}, {7e12, "7T"}, {1e15, "1e15"}, {2e20, "2e20"},
		{1e-4, "0.0001"}, {1e-5, "1e-5"}, {1.5e-7, "1.5e-7"},
	}
	for _, c := range cases {
		if got := formatNumber(c.v); got != c.want {
			t.Errorf("formatNumber(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestPercentileX(t *testing.T) {
	cases := []struct{ p, x float64 }{
		{0, 1}, {50, 2}, {90, 10}, {99, 100}, {99.9, 1000}, {99.99, 1e4}, {99.999, 1e5}, {99.9999, 1e6},
		{100, 1e6}, {-5, 1}, {1e9, 1e6},
	}
	for _, c := range cases {
		got := PercentileX(c.p)
		if math.Abs(got-c.x) > 1e-6*c.x {
			t.Errorf("PercentileX(%v) = %v, want %v", c.p, got, c.x)
		}
	}
	if !math.IsNaN(PercentileX(math.NaN())) {
		t.Error("PercentileX(NaN) is not NaN, so SVG would not reject it")
	}
}

func TestPercentileAxisTicks(t *testing.T) {
	// Data from p=0 to p=100 must yield exactly the labelled ticks, with the
	// range ending on the first and last.
	a := PercentileAxis("p")
	s := newScale(a, PercentileX(0), PercentileX(100), 5)
	var got []string
	for _, tk := range s.major {
		got = append(got, tk.label)
	}
	want := "[50% 90% 99% 99.9% 99.99% 99.999% 99.9999%]"
	if fmt.Sprint(got) != want {
		t.Errorf("labels %v, want %s", got, want)
	}
	if s.lo != 1 || s.hi != PercentileX(100) || len(s.minor) != 0 {
		t.Errorf("range %v..%v with %d minor lines, want 1..%v and none", s.lo, s.hi, len(s.minor), PercentileX(100))
	}
	// Evenly spaced from 90% on: each "9" added moves the same distance.
	for i := 3; i < len(s.major); i++ {
		d1 := s.frac(s.major[i].v) - s.frac(s.major[i-1].v)
		d0 := s.frac(s.major[i-1].v) - s.frac(s.major[i-2].v)
		if math.Abs(d1-d0) > 1e-9 {
			t.Errorf("ticks %d..%d not evenly spaced: %v vs %v", i-2, i, d0, d1)
		}
	}
}

func TestNewScaleAutoRange(t *testing.T) {
	cases := []struct {
		name           string
		a              Axis
		lo, hi         float64
		wantLo, wantHi float64
		wantTicks      string
	}{
		{"linear", Axis{}, 0.3, 9.7, 0, 10, "[0 2 4 6 8 10]"},
		{"linear negative", Axis{}, -42, 17, -60, 20, "[-60 -40 -20 0 20]"},
		{"flat", Axis{}, 5, 5, 4.4, 5.6, "[4.4 4.6 4.8 5 5.2 5.4 5.6]"},
		{"flat zero", Axis{}, 0, 0, -1, 1, "[-1 -0.5 0 0.5 1]"},
		{"log", Axis{Log: true}, 0.3, 45, 0.2, 50, "[0.2 0.5 1 2 5 10 20 50]"},
		{"log decades", Axis{Log: true}, 0.28, 70, 0.1, 100, "[0.1 1 10 100]"},
		{"log flat", Axis{Log: true}, 3, 3, 1, 10, "[1 2 5 10]"},
		{"fixed", Axis{Min: 0, Max: 7}, 100, 200, 0, 7, "[0 2 4 6]"},
		{"explicit ticks", Axis{Ticks: []float64{0, 10, 100}}, 3, 40, 0, 100, "[0 10 100]"},
	}
	for _, c := range cases {
		s := newScale(c.a, c.lo, c.hi, 5)
		var vals []float64
		for _, tk := range s.major {
			vals = append(vals, tk.v)
		}
		if !approxEq(s.lo, c.wantLo) || !approxEq(s.hi, c.wantHi) || fmt.Sprint(vals) != c.wantTicks {
			t.Errorf("%s: range %v..%v ticks %v, want %v..%v ticks %s",
				c.name, s.lo, s.hi, vals, c.wantLo, c.wantHi, c.wantTicks)
		}
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 100: "100", 1.5: "1.5", 1.005: "1", -0.001: "0", 12.345: "12.35"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

func approxEq(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
