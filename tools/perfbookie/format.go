package perfbookie

import (
	"fmt"
	"io"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

const pointHeader = "op   clients" + perfkit.RateHeader + " | KiB/sync disk blk disk MiB/s  frac"

// Format writes the report for people: what was measured where, the
// disk's limits, one row per point, the cold read, and the notes.
func Format(w io.Writer, rep *Report) {
	fmt.Fprintln(w, FormatHeader(rep))
	fmt.Fprintln(w, pointHeader)
	for i := range rep.Adds {
		fmt.Fprintln(w, FormatPoint(rep.Adds[i]))
		if i < len(rep.Reads) {
			fmt.Fprintln(w, FormatPoint(rep.Reads[i]))
		}
	}
	if rep.Cold != nil {
		fmt.Fprintln(w, FormatCold(rep.Cold))
	}
	FormatNotes(w, rep)
}

// FormatNotes writes what was not measured and why.
func FormatNotes(w io.Writer, rep *Report) {
	perfkit.FormatNotes(w, rep.Notes)
}

// FormatHeader describes the run and the disk's limits in a few lines.
func FormatHeader(rep *Report) string {
	s := fmt.Sprintf("bookie %s", rep.Target)
	if rep.Storage != "" {
		s += fmt.Sprintf(" (%s storage, ledgers under %s)", rep.Storage, rep.LedgerDir)
	}
	s += fmt.Sprintf(", %s backend, journal dir %s; %s per point after %s warm-up, %d outstanding per client, GOMAXPROCS %d",
		rep.Backend, rep.JournalDir, rep.Duration, rep.Warmup, rep.Outstanding, rep.GOMAXPROCS)
	if d := rep.Disk; d != nil {
		s += fmt.Sprintf("\ndisk: one datasync p50 %d p99 %d us; sequential read of %s from a cold page cache %.1f MiB/s",
			perfkit.Lat(d.Datasync).P50, perfkit.Lat(d.Datasync).P99, perfdisk.SizeName(int(d.SeqRead.Ops)*d.SeqRead.BlockSize), d.SeqRead.MiBPerSec)
	}
	return s
}

// FormatPoint renders one point as a table row. Adds end with their group
// size and the disk's write+datasync at it; reads with their window.
func FormatPoint(p Point) string {
	row := fmt.Sprintf("%-4s %7d ", p.Op, p.Clients) + perfkit.RateColumns(p.EntrySize, p.EntriesPerSec, p.MiBPerSec, p.LatencyUS)
	switch {
	case p.Op == "read":
		return row + fmt.Sprintf(" cache hits: last %d entries per client", p.ReadWindow)
	case p.Disk == nil && p.JournalSyncs > 0:
		return row + fmt.Sprintf(" %8.1f        -          -     -", p.BytesPerSync/1024)
	case p.Disk == nil:
		return row + "        -        -          -     -"
	}
	perSync := "       -"
	if p.JournalSyncs > 0 {
		perSync = fmt.Sprintf("%8.1f", p.BytesPerSync/1024)
	}
	return row + fmt.Sprintf(" %s %8s %10.1f %4.0f%%", perSync, perfdisk.SizeName(p.DiskBlock), p.Disk.MiBPerSec, 100*p.DiskFraction)
}

// FormatCold renders the cold read in a few lines.
func FormatCold(c *ColdRead) string {
	l := c.Read.LatencyUS
	s := fmt.Sprintf("cold read: %d ledgers x %d entries of %s (%s), written at %.1f MiB/s, bookie restarted in %.2fs\n",
		c.Ledgers, c.Entries/int64(max(c.Ledgers, 1)), perfdisk.SizeName(c.EntrySize), perfdisk.SizeName(int(c.Bytes)),
		c.WriteMiBPerSec, c.RestartSeconds)
	s += fmt.Sprintf("  read back in order, %d outstanding per ledger: %.1f MiB/s, %.0f entries/s, latency us p50 %d p95 %d p99 %d p999 %d p9999 %d max %d",
		c.Read.Outstanding, c.Read.MiBPerSec, c.Read.EntriesPerSec, l.P50, l.P95, l.P99, l.P999, l.P9999, l.Max)
	if c.DiskFraction > 0 {
		s += fmt.Sprintf("\n  %.0f%% of the disk's cold sequential read", 100*c.DiskFraction)
	}
	if c.PageCacheDropped {
		s += "\n  the bookie's files were evicted from the page cache before reading"
	} else {
		s += "\n  " + c.PageCacheNote
	}
	return s
}
