package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/magnetar-io/magnetar/benchmarks/chart"
	"github.com/magnetar-io/magnetar/tools/perfclient"
)

// chartFile is one chart written next to REPORT.md.
type chartFile struct {
	File, Title string
}

// writeCharts draws the report's charts; charts without data are left out.
func writeCharts(dir string, res *Results) ([]chartFile, error) {
	var out []chartFile
	for _, c := range []struct {
		file  string
		chart chart.LineChart
	}{
		{"publish-latency.svg", latencyChart("Publish latency at the same fixed rate (1 KiB)", res, publishCurve)},
		{"e2e-latency.svg", latencyChart("End-to-end latency at the same fixed rate (1 KiB)", res, e2eCurve)},
		{"fixed-rates.svg", fixedRatesChart(res)},
		{"throughput.svg", throughputChart(res)},
	} {
		if len(c.chart.Series) == 0 {
			continue
		}
		svg, err := c.chart.SVG()
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", c.file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), svg, 0o644); err != nil {
			return nil, err
		}
		out = append(out, chartFile{File: c.file, Title: c.chart.Title})
	}
	return out, nil
}

func publishCurve(r perfclient.Report) []perfclient.CurvePoint { return r.PublishCurve }
func e2eCurve(r perfclient.Report) []perfclient.CurvePoint     { return r.E2ECurve }

// latencyChart puts the 50% runs of every system on one percentile chart.
func latencyChart(title string, res *Results, curve func(perfclient.Report) []perfclient.CurvePoint) chart.LineChart {
	c := chart.LineChart{Title: title, X: chart.PercentileAxis("percentile"), Y: chart.Axis{Label: "latency (ms)", Log: true}}
	add := func(name string, run *Run, dashed bool) {
		if run == nil {
			return
		}
		if pts := curvePoints(curve(run.Report)); len(pts) > 0 {
			c.Series = append(c.Series, chart.Series{Name: name, Points: pts, Dashed: dashed})
		}
	}
	add(fmt.Sprintf("Magnetar standalone, %s msg/s", rateText(res.Standalone.fixedAt(50))), res.Standalone.fixedAt(50), false)
	add(fmt.Sprintf("Magnetar cluster E3/Qw2/Qa2, %s msg/s", rateText(res.Cluster.fixedAt(50))), res.Cluster.fixedAt(50), false)
	add(fmt.Sprintf("NATS JetStream default sync, %s msg/s", rateText(res.NATS.DefaultFixed)), res.NATS.DefaultFixed, true)
	return c
}

// fixedRatesChart is Magnetar standalone's publish and e2e latency at
// each fixed rate.
func fixedRatesChart(res *Results) chart.LineChart {
	c := chart.LineChart{Title: "Magnetar standalone latency at 10%, 50% and 80% of its maximum (1 KiB)",
		X: chart.PercentileAxis("percentile"), Y: chart.Axis{Label: "latency (ms)", Log: true}}
	for _, run := range res.Standalone.Fixed {
		if pts := curvePoints(run.Report.PublishCurve); len(pts) > 0 {
			c.Series = append(c.Series, chart.Series{Name: fmt.Sprintf("publish at %d%%", run.Percent), Points: pts})
		}
		if pts := curvePoints(run.Report.E2ECurve); len(pts) > 0 {
			c.Series = append(c.Series, chart.Series{Name: fmt.Sprintf("end to end at %d%%", run.Percent), Points: pts, Dashed: true})
		}
	}
	return c
}

// throughputChart is the acknowledged publish rate over time of each
// unthrottled 1 KiB run.
func throughputChart(res *Results) chart.LineChart {
	c := chart.LineChart{Title: "Unthrottled durable publish of 1 KiB messages over time",
		X: chart.Axis{Label: "seconds"}, Y: chart.Axis{Label: "messages/s"}}
	add := func(name string, run *Run) {
		if run == nil {
			return
		}
		var pts []chart.Point
		for _, iv := range run.Report.Timeline {
			pts = append(pts, chart.Point{X: iv.At, Y: iv.PublishPS})
		}
		if len(pts) > 0 {
			c.Series = append(c.Series, chart.Series{Name: name, Points: pts})
		}
	}
	add("Magnetar standalone", res.Standalone.maxOf(1024))
	add("Magnetar cluster E3/Qw2/Qa2", res.Cluster.maxOf(1024))
	add("NATS JetStream default sync", res.NATS.Default)
	add("NATS JetStream sync always", res.NATS.Always)
	return c
}

// curvePoints converts a latency curve to milliseconds; zero latencies
// (below the histogram's resolution) are drawn at 1 µs so a log axis can
// show them.
func curvePoints(curve []perfclient.CurvePoint) []chart.Point {
	var pts []chart.Point
	for _, p := range curve {
		pts = append(pts, chart.Point{X: chart.PercentileX(p.Percentile), Y: float64(max(p.Micros, 1)) / 1000})
	}
	return pts
}

func rateText(run *Run) string {
	if run == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", run.Report.TargetRate)
}
