package perfjournal

// The journal issue's targets, checked at 1 KiB entries with 64 writers.
const (
	TargetEntrySize = 1 << 10
	TargetWriters   = 64
	// TargetRateRatio: entries/s at least this many times the rate of one
	// datasync per entry.
	TargetRateRatio = 50
	// TargetBandwidth: payload MiB/s at least this fraction of the disk's
	// write+datasync MiB/s at the same group size.
	TargetBandwidth = 0.70
	// TargetP99Ratio: add p99 at most this many times one datasync's p99.
	TargetP99Ratio = 2
)

// Target is the three checks for one backend and variant.
type Target struct {
	Backend string `json:"backend"`
	Variant
	EntriesPerSec float64 `json:"entries_per_sec"`
	// PerEntryRate is perfdisk's 4 KiB write+datasync rate (into an
	// allocated file for reuse=on); RateRatio is EntriesPerSec over it.
	PerEntryRate float64 `json:"per_entry_rate"`
	RateRatio    float64 `json:"rate_ratio"`
	RateMet      bool    `json:"rate_met"`
	// OneWriterRate is the same journal variant with one writer, the other
	// reading of "one datasync per entry" (0 when not measured).
	OneWriterRate     float64 `json:"one_writer_rate,omitempty"`
	OneWriterRatio    float64 `json:"one_writer_ratio,omitempty"`
	BandwidthFraction float64 `json:"bandwidth_fraction"`
	BandwidthMet      bool    `json:"bandwidth_met"`
	P99US             int64   `json:"add_p99_us"`
	DatasyncP99US     int64   `json:"datasync_p99_us"`
	P99Ratio          float64 `json:"p99_ratio"`
	LatencyMet        bool    `json:"latency_met"`
}

// targets checks every 1 KiB x 64-writer point against its backend's
// baseline. Points with SkipSync are left out: the targets are about
// durable acknowledgements, which those are not.
func targets(rep *Report) []Target {
	var out []Target
	for _, p := range rep.Points {
		if p.EntrySize != TargetEntrySize || p.Writers != TargetWriters || p.SkipSync {
			continue
		}
		b, ok := baselineOf(rep, p.Backend)
		if !ok {
			continue
		}
		out = append(out, targetOf(rep, p, b))
	}
	return out
}

func targetOf(rep *Report, p Point, b Baseline) Target {
	t := Target{Backend: p.Backend, Variant: p.Variant, EntriesPerSec: p.EntriesPerSec,
		BandwidthFraction: p.BandwidthFraction, P99US: p.LatencyUS.P99}
	perEntry := b.PerEntry
	if p.ReuseFiles && b.PerEntryOverwrite != nil {
		perEntry = *b.PerEntryOverwrite
	}
	t.PerEntryRate = perEntry.OpsPerSec
	t.RateRatio = ratio(p.EntriesPerSec, t.PerEntryRate)
	t.RateMet = t.RateRatio >= TargetRateRatio
	if one, ok := findPoint(rep, p.Backend, p.Variant, p.EntrySize, 1); ok {
		t.OneWriterRate = one.EntriesPerSec
		t.OneWriterRatio = ratio(p.EntriesPerSec, one.EntriesPerSec)
	}
	t.BandwidthMet = t.BandwidthFraction >= TargetBandwidth
	if b.Datasync.LatencyUS != nil {
		t.DatasyncP99US = b.Datasync.LatencyUS.P99
	}
	t.P99Ratio = ratio(float64(t.P99US), float64(t.DatasyncP99US))
	t.LatencyMet = t.P99Ratio > 0 && t.P99Ratio <= TargetP99Ratio
	return t
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func baselineOf(rep *Report, backend string) (Baseline, bool) {
	for _, b := range rep.Baselines {
		if b.Backend == backend {
			return b, true
		}
	}
	return Baseline{}, false
}

func findPoint(rep *Report, backend string, v Variant, size, writers int) (Point, bool) {
	for _, p := range rep.Points {
		if p.Backend == backend && p.Variant == v && p.EntrySize == size && p.Writers == writers {
			return p, true
		}
	}
	return Point{}, false
}
