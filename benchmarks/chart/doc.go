// Package chart draws line charts as standalone SVG documents for the
// benchmark report. It has no dependencies beyond the standard library so
// that the report can be built anywhere, and its output is a pure function
// of its input (same chart, same bytes) so that reports can be diffed.
//
// The main use is latency percentile curves in the HdrHistogram style: the
// x axis is PercentileAxis, on which 50%, 90%, 99%, 99.9%, ... are evenly
// spaced (x = 1/(1-p/100) on a log scale, see PercentileX), and the y axis
// is latency, usually on a log scale. Linear axes cover the rest, such as
// throughput over time.
//
// Layout of a chart (all sizes in SVG user units, i.e. pixels):
//
//	+--------------------------------------------------+
//	|                     Title                        |
//	|   +--------------------------------+             |
//	| y |  grid, series (clipped to the  |  -- legend  |
//	|   |  plot area by a nested <svg>)  |  -- legend  |
//	|   +--------------------------------+             |
//	|     x tick labels                                |
//	|                  x label                         |
//	+--------------------------------------------------+
//
// Non-obvious choices:
//   - Series are drawn inside a nested <svg> element, which clips to its
//     box without a clipPath id: ids would collide when several charts are
//     inlined in one HTML page.
//   - Text widths are estimated (charWidth per rune), not measured, so very
//     long labels or legend names may overflow the margins.
//   - Colours come from a fixed palette of eight colour-blind-friendly
//     colours (Okabe-Ito, with its yellow swapped for a darker olive that
//     stays visible on white); series nine and up reuse them, so mark such
//     series Dashed to tell them apart.
package chart
