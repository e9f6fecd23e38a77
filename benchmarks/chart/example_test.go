package chart_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/magnetar-io/magnetar/benchmarks/chart"
)

// percentileCurve is a synthetic latency distribution: y = base*x^k at the
// percentiles HdrHistogram prints with 4 ticks per half distance, then 100%.
func percentileCurve(base, k float64) []chart.Point {
	var pts []chart.Point
	for i := 0; ; i++ {
		p := 100 * (1 - math.Pow(0.5, float64(i)/4))
		if p > 99.9999 {
			break
		}
		x := chart.PercentileX(p)
		pts = append(pts, chart.Point{X: x, Y: base * math.Pow(x, k)})
	}
	x := chart.PercentileX(100)
	return append(pts, chart.Point{X: x, Y: base * math.Pow(x, k) * 1.3})
}

func latencyChart() chart.LineChart {
	return chart.LineChart{
		Title: "Publish latency, 1 KiB messages <fsync & batch>",
		X:     chart.PercentileAxis("percentile"),
		Y:     chart.Axis{Label: "latency (ms)", Log: true},
		Series: []chart.Series{
			{Name: "magnetar, batch=1", Points: percentileCurve(0.35, 0.22)},
			{Name: "magnetar, batch=64", Points: percentileCurve(0.6, 0.15)},
			{Name: "magnetar, io_uring", Points: percentileCurve(0.28, 0.2)},
			{Name: "pulsar 4.0 (baseline)", Points: percentileCurve(0.9, 0.3), Dashed: true},
		},
	}
}

func throughputChart() chart.LineChart {
	c := chart.LineChart{
		Title: "Throughput over time",
		X:     chart.Axis{Label: "time (s)"},
		Y:     chart.Axis{Label: "msg/s", Min: 0, Max: 600000},
	}
	for i, rate := range []float64{520000, 310000} {
		s := chart.Series{Name: []string{"magnetar", "pulsar"}[i], Dashed: i == 1}
		for t := 0; t <= 120; t++ {
			wobble := 0.05 * math.Sin(float64(t)/4+float64(i))
			s.Points = append(s.Points, chart.Point{X: float64(t), Y: rate * (1 + wobble)})
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// TestWriteExample writes example charts for a person to look at, only
// when CHART_EXAMPLE_DIR names a directory.
func TestWriteExample(t *testing.T) {
	dir := os.Getenv("CHART_EXAMPLE_DIR")
	if dir == "" {
		t.Skip("set CHART_EXAMPLE_DIR to write example charts")
	}
	for name, c := range map[string]chart.LineChart{
		"chart-example.svg":            latencyChart(),
		"chart-example-throughput.svg": throughputChart(),
	} {
		b, err := c.SVG()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func ExampleLineChart_SVG() {
	// Percentiles 50..99.99 of a run, latency in ms.
	var pts []chart.Point
	for _, pl := range [][2]float64{{50, 0.8}, {90, 1.4}, {99, 3.1}, {99.9, 7.5}, {99.99, 21}} {
		pts = append(pts, chart.Point{X: chart.PercentileX(pl[0]), Y: pl[1]})
	}
	c := chart.LineChart{
		Title:  "Publish latency",
		X:      chart.PercentileAxis("percentile"),
		Y:      chart.Axis{Label: "latency (ms)", Log: true},
		Series: []chart.Series{{Name: "magnetar", Points: pts}},
	}
	svg, err := c.SVG()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(bytes.HasPrefix(svg, []byte("<svg ")))
	// Output: true
}
