package perfjournal

import (
	"fmt"
	"io"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

const pointHeader = "backend pipe reuse wait   sync entry  writers  entries/s    MiB/s   p50us   p99us  p999us   maxus" +
	" ent/sync KiB/sync | disk blk disk MiB/s  frac"

// Format writes the report for people: the baselines, one row per point,
// then the targets.
func Format(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "journal under %s (%d MiB free), %s per point after %s warm-up, disk cases %s, files %d MiB, GOMAXPROCS %d\n",
		rep.Dir, rep.FreeBytes>>20, rep.Duration, rep.Warmup, rep.DiskDuration, rep.MaxFileSize>>20, rep.GOMAXPROCS)
	for _, b := range rep.Baselines {
		fmt.Fprintln(w, FormatBaseline(b))
	}
	fmt.Fprintln(w, pointHeader)
	for _, p := range rep.Points {
		fmt.Fprintln(w, FormatPoint(p))
	}
	FormatTargets(w, rep)
}

// FormatBaseline renders a backend's disk figures as one line.
func FormatBaseline(b Baseline) string {
	s := fmt.Sprintf("%s disk: 4KiB write+datasync %.0f/s (p50 %d p99 %d us)", b.Backend,
		b.PerEntry.OpsPerSec, perfkit.Lat(b.PerEntry).P50, perfkit.Lat(b.PerEntry).P99)
	if o := b.PerEntryOverwrite; o != nil {
		s += fmt.Sprintf(", into an allocated file %.0f/s", o.OpsPerSec)
	}
	return s + fmt.Sprintf("; one datasync p50 %d p99 %d us", perfkit.Lat(b.Datasync).P50, perfkit.Lat(b.Datasync).P99)
}

// FormatPoint renders one point as a table row.
func FormatPoint(p Point) string {
	wait := (time.Duration(p.MaxGroupWaitUS) * time.Microsecond).String()
	row := fmt.Sprintf("%-7s %-4s %-5s %-6s %-4s %-6s %7d %10.0f %8.1f %7d %7d %7d %7d %8.1f %8.1f |", p.Backend,
		onOff(p.Pipeline), onOff(p.ReuseFiles), wait, onOff(!p.SkipSync), perfdisk.SizeName(p.EntrySize), p.Writers,
		p.EntriesPerSec, p.MiBPerSec, p.LatencyUS.P50, p.LatencyUS.P99, p.LatencyUS.P999, p.LatencyUS.Max,
		p.EntriesPerSync, p.BytesPerSync/1024)
	if p.Disk == nil {
		return row + "        -          -     -"
	}
	return row + fmt.Sprintf(" %8s %10.1f %4.0f%%", perfdisk.SizeName(p.DiskBlock), p.Disk.MiBPerSec, 100*p.BandwidthFraction)
}

// FormatTargets writes the three checks for each 1 KiB x 64-writer
// point.
func FormatTargets(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "\ntargets at %s entries x %d writers: rate >= %dx one datasync per entry, payload >= %.0f%% of"+
		" write+datasync bandwidth at the group size, add p99 <= %dx one datasync's p99\n",
		perfdisk.SizeName(TargetEntrySize), TargetWriters, TargetRateRatio, 100*TargetBandwidth, TargetP99Ratio)
	if len(rep.Targets) == 0 {
		fmt.Fprintln(w, "  (not measured: the run has no 1 KiB x 64-writer point with syncdata on)")
		return
	}
	for _, t := range rep.Targets {
		fmt.Fprintf(w, "  %-5s %s\n", t.Backend, t.Variant.Label())
		one := ""
		if t.OneWriterRate > 0 {
			one = fmt.Sprintf("; %.1fx the journal with 1 writer (%.0f/s)", t.OneWriterRatio, t.OneWriterRate)
		}
		fmt.Fprintf(w, "    rate       %5.1fx  %s  %.0f/s vs %.0f/s at 4KiB write+datasync%s\n",
			t.RateRatio, verdict(t.RateMet), t.EntriesPerSec, t.PerEntryRate, one)
		fmt.Fprintf(w, "    bandwidth  %5.0f%%  %s\n", 100*t.BandwidthFraction, verdict(t.BandwidthMet))
		fmt.Fprintf(w, "    p99        %5.2fx  %s  add p99 %d us vs datasync p99 %d us\n",
			t.P99Ratio, verdict(t.LatencyMet), t.P99US, t.DatasyncP99US)
	}
}

func verdict(met bool) string {
	if met {
		return "met   "
	}
	return "MISSED"
}
