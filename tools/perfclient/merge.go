package perfclient

import (
	"errors"
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

// MergeReports sums the reports of client processes that ran at once
// against one system (a load spread over processes): counts, rates and
// topics add up; the latencies are those of the summed histograms, so
// the merged p99 is the p99 of every message, not a mean of p99s. Each
// report must carry its histograms (every report of this version does).
// The window is the longest of the reports' windows; the timeline is the
// first report's.
func MergeReports(reps []Report) (Report, error) {
	if len(reps) == 0 {
		return Report{}, errors.New("merge reports: none")
	}
	out := reps[0]
	out.PublishHistogram, out.E2EHistogram = "", ""
	pub, e2e := perfdisk.NewHist(), perfdisk.NewHist()
	for i, r := range reps {
		if err := mergeHist(pub, r.PublishHistogram, r.Published > 0 && r.PublishLatency != nil); err != nil {
			return Report{}, fmt.Errorf("merge reports: report %d: publish: %w", i, err)
		}
		if err := mergeHist(e2e, r.E2EHistogram, r.Consumed > 0 && r.E2ELatency != nil); err != nil {
			return Report{}, fmt.Errorf("merge reports: report %d: end to end: %w", i, err)
		}
		if i == 0 {
			continue
		}
		out.Topics += r.Topics
		out.TargetRate += r.TargetRate
		out.Seconds = max(out.Seconds, r.Seconds)
		out.CPUCores += r.CPUCores
		out.Published += r.Published
		out.PublishErr += r.PublishErr
		out.PublishPS += r.PublishPS
		out.PublishMiB += r.PublishMiB
		out.Consumed += r.Consumed
		out.ConsumePS += r.ConsumePS
		out.ConsumeMiB += r.ConsumeMiB
		out.Txn = mergeTxn(out.Txn, r.Txn)
	}
	out.PublishLatency, out.PublishCurve = summarise(pub)
	out.PublishHistogram = encodeHist(pub)
	out.E2ELatency, out.E2ECurve = summarise(e2e)
	out.E2EHistogram = encodeHist(e2e)
	return out, nil
}

// mergeHist adds the encoded histogram enc into h; a report that measured
// latencies (want) and has no histogram cannot be summed exactly.
func mergeHist(h *hdrhistogram.Histogram, enc string, want bool) error {
	if enc == "" {
		if want {
			return errors.New("the report has latencies but no histogram (a client older than MergeReports)")
		}
		return nil
	}
	from, err := hdrhistogram.Decode([]byte(enc))
	if err != nil {
		return fmt.Errorf("decode histogram: %w", err)
	}
	if dropped := h.Merge(from); dropped > 0 {
		return fmt.Errorf("%d values outside the histogram's range", dropped)
	}
	return nil
}
