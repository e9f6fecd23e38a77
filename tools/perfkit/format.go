package perfkit

import (
	"fmt"
	"io"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

// RateHeader names the columns RateColumns fills, after a tool's own
// leading columns and the entry size.
const RateHeader = "  entry  entries/s    MiB/s   p50us   p95us   p99us  p999us p9999us    maxus"

// RateColumns renders the entry size, throughput and latency columns of a
// point's row, ending at the bar that starts the tool's own columns.
func RateColumns(size int, entriesPerSec, mibPerSec float64, l Latency) string {
	return fmt.Sprintf("%6s %10.0f %8.1f %7d %7d %7d %7d %7d %8d |", perfdisk.SizeName(size),
		entriesPerSec, mibPerSec, l.P50, l.P95, l.P99, l.P999, l.P9999, l.Max)
}

// FormatNotes writes what was skipped or not measured and why.
func FormatNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
