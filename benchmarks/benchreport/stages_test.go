package main

import (
	"math"
	"strings"
	"testing"
)

func TestStageDeltaAndQuantiles(t *testing.T) {
	inf := math.Inf(1)
	before := map[string]*stageHist{"receipt": {buckets: map[float64]float64{0.001: 10, 0.002: 10, inf: 10}, sum: 0.005, count: 10}}
	// 100 more adds: 50 under 1 ms, 49 in (1, 2] ms, 1 past 2 ms.
	after := map[string]*stageHist{"receipt": {buckets: map[float64]float64{0.001: 60, 0.002: 109, inf: 110}, sum: 0.155, count: 110},
		"journal_write": {buckets: map[float64]float64{0.001: 5, inf: 5}, sum: 0.001, count: 5}}
	got := stageDelta(before, after)
	if len(got) != 2 || got[0].Stage != "journal_write" || got[1].Stage != "receipt" {
		t.Fatalf("stages %+v, want journal_write then receipt (path order)", got)
	}
	r := got[1]
	if r.Count != 100 || math.Abs(r.MeanMS-1.5) > 1e-9 {
		t.Errorf("count %v mean %v ms, want 100 and 1.5", r.Count, r.MeanMS)
	}
	if math.Abs(r.P50MS-1.0) > 1e-9 || r.P99MS <= 1.9 || r.P99MS > 2.0 || r.P999MS != 2.0 {
		t.Errorf("p50 %v p99 %v p99.9 %v ms", r.P50MS, r.P99MS, r.P999MS)
	}
	var b strings.Builder
	res := &Results{}
	res.Standalone.Fixed = []Run{{Percent: 50, Stages: got}}
	writeStages(&b, res)
	if !strings.Contains(b.String(), "| receipt | 100 | 1.50 ms | 1.00 ms |") {
		t.Errorf("rendered:\n%s", b.String())
	}
}
