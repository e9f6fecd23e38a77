package perfclient

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

// reportOf is a publish report over the given latencies (µs), with its
// histogram, as a client process prints it.
func reportOf(lat []int64, seconds float64) Report {
	h := perfdisk.NewHist()
	for _, v := range lat {
		_ = h.RecordValue(v)
	}
	rep := Report{Topics: 1, Published: int64(len(lat)), Seconds: seconds, PublishPS: float64(len(lat)) / seconds}
	rep.PublishLatency, rep.PublishCurve = summarise(h)
	rep.PublishHistogram = encodeHist(h)
	return rep
}

// The merged p99 is the p99 of every message of every process: here one
// process saw a slow tail and the other none, and the mean of their p99s
// would be far from the truth.
func TestMergeReportsSumsHistograms(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b, all []int64
	for range 9000 {
		v := 1000 + rng.Int64N(1000)
		a = append(a, v)
	}
	for range 1000 {
		v := 50_000 + rng.Int64N(10_000)
		b = append(b, v)
	}
	all = append(append(all, a...), b...)
	got, err := MergeReports([]Report{reportOf(a, 10), reportOf(b, 10)})
	if err != nil {
		t.Fatal(err)
	}
	want := reportOf(all, 10)
	if *got.PublishLatency != *want.PublishLatency {
		t.Fatalf("merged latency %+v, want %+v", *got.PublishLatency, *want.PublishLatency)
	}
	if got.Published != 10000 || got.Topics != 2 || got.PublishPS != 1000 {
		t.Fatalf("merged counts: published %d topics %d rate %.0f", got.Published, got.Topics, got.PublishPS)
	}
	if got.E2ELatency != nil || got.E2EHistogram != "" {
		t.Fatalf("no consumer ran, merged e2e %+v", got.E2ELatency)
	}
}

func TestMergeReportsRefusesReportsWithoutHistograms(t *testing.T) {
	old := reportOf([]int64{5, 6, 7}, 1)
	old.PublishHistogram = ""
	if _, err := MergeReports([]Report{reportOf([]int64{1, 2}, 1), old}); err == nil ||
		!strings.Contains(err.Error(), "no histogram") {
		t.Fatalf("merge of a report without its histogram: %v", err)
	}
	bad := reportOf([]int64{5}, 1)
	bad.PublishHistogram = "not base64!"
	if _, err := MergeReports([]Report{bad}); err == nil || !strings.Contains(err.Error(), "decode") {
		t.Fatalf("merge of a corrupt histogram: %v", err)
	}
	if _, err := MergeReports(nil); err == nil {
		t.Fatal("merge of nothing succeeded")
	}
}
