package chart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Colours of the frame, grid and text.
const (
	inkColor   = "#333333"
	majorColor = "#d4d4d4"
	minorColor = "#eeeeee"
	dashArray  = "6 4"
)

// seriesColor returns the colour of series i: the Okabe-Ito palette,
// which stays distinct under the common colour-vision deficiencies, with
// its yellow replaced by olive because yellow vanishes on white. A
// function rather than a package variable so it cannot be changed.
func seriesColor(i int) string {
	palette := [...]string{
		"#0072B2", "#D55E00", "#009E73", "#CC79A7",
		"#E69F00", "#56B4E9", "#000000", "#999933",
	}
	return palette[i%len(palette)]
}

// svgWriter accumulates the document. Writes to a bytes.Buffer cannot
// fail, so its methods return no errors.
type svgWriter struct{ b bytes.Buffer }

func (w *svgWriter) printf(format string, args ...any) { fmt.Fprintf(&w.b, format, args...) }

func render(c LineChart, l layout) []byte {
	var w svgWriter
	w.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %[1]s %[2]s"`+
		` font-family="sans-serif" font-size="%d">`+"\n", num(l.w), num(l.h), fontSize)
	w.printf("<title>%s</title>\n", esc(c.Title))
	w.printf(`<rect width="%s" height="%s" fill="#ffffff"/>`+"\n", num(l.w), num(l.h))
	w.title(c.Title, l)
	w.grid(l)
	w.axes(c, l)
	w.series(c.Series, l)
	w.legend(c.Series, l)
	w.printf("</svg>\n")
	return w.b.Bytes()
}

func (w *svgWriter) title(t string, l layout) {
	if t == "" {
		return
	}
	w.printf(`<text x="%s" y="28" text-anchor="middle" font-size="%d" font-weight="bold" fill="%s">%s</text>`+"\n",
		num(l.w/2), titleSize, inkColor, esc(t))
}

// grid draws minor then major grid lines, so majors are drawn on top.
func (w *svgWriter) grid(l layout) {
	w.printf(`<g class="grid" stroke-width="1">` + "\n")
	x0, x1 := num(l.left), num(l.left+l.plotW)
	y0, y1 := num(l.top), num(l.top+l.plotH)
	for _, v := range l.x.minor {
		w.line(num(l.px(v)), y0, num(l.px(v)), y1, minorColor)
	}
	for _, v := range l.y.minor {
		w.line(x0, num(l.py(v)), x1, num(l.py(v)), minorColor)
	}
	for _, t := range l.x.major {
		w.line(num(l.px(t.v)), y0, num(l.px(t.v)), y1, majorColor)
	}
	for _, t := range l.y.major {
		w.line(x0, num(l.py(t.v)), x1, num(l.py(t.v)), majorColor)
	}
	w.printf("</g>\n")
}

func (w *svgWriter) line(x1, y1, x2, y2, color string) {
	w.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", x1, y1, x2, y2, color)
}

// axes draws the plot frame, tick marks, tick labels and axis labels.
func (w *svgWriter) axes(c LineChart, l layout) {
	w.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="%s"/>`+"\n",
		num(l.left), num(l.top), num(l.plotW), num(l.plotH), inkColor)
	w.printf(`<g class="ticks" fill="%s">`+"\n", inkColor)
	w.xTicks(l)
	for _, t := range l.y.major {
		y := l.py(t.v)
		w.line(num(l.left-tickLen), num(y), num(l.left), num(y), inkColor)
		w.printf(`<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n",
			num(l.left-tickLen-4), num(y+fontSize/3), esc(t.label))
	}
	w.printf("</g>\n")
	w.axisLabels(c, l)
}

// xTicks draws the x tick marks and labels, skipping a label that would
// overlap the one before it (explicit ticks on a narrow chart); its grid
// line and tick mark still show where it is.
func (w *svgWriter) xTicks(l layout) {
	bottom := l.top + l.plotH
	lastEnd := math.Inf(-1)
	for _, t := range l.x.major {
		x := l.px(t.v)
		w.line(num(x), num(bottom), num(x), num(bottom+tickLen), inkColor)
		half := float64(utf8.RuneCountInString(t.label)) * charWidth / 2
		if x-half < lastEnd+charWidth {
			continue
		}
		lastEnd = x + half
		w.printf(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n",
			num(x), num(bottom+tickLen+fontSize+2), esc(t.label))
	}
}

func (w *svgWriter) axisLabels(c LineChart, l layout) {
	if c.X.Label != "" {
		w.printf(`<text x="%s" y="%s" text-anchor="middle" fill="%s">%s</text>`+"\n",
			num(l.left+l.plotW/2), num(l.h-10), inkColor, esc(c.X.Label))
	}
	if c.Y.Label != "" {
		w.printf(`<text transform="translate(%d %s) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n",
			fontSize+6, num(l.top+l.plotH/2), inkColor, esc(c.Y.Label))
	}
}

// series draws each series as one polyline inside a nested <svg> the size
// of the plot box: nested viewports clip their content, which keeps lines
// outside a fixed Min/Max off the margins without a clipPath id.
func (w *svgWriter) series(ss []Series, l layout) {
	w.printf(`<svg x="%s" y="%s" width="%s" height="%s" overflow="hidden">`+"\n",
		num(l.left), num(l.top), num(l.plotW), num(l.plotH))
	for i, s := range ss {
		w.polyline(i, s, l)
	}
	w.printf("</svg>\n")
}

func (w *svgWriter) polyline(i int, s Series, l layout) {
	var pts strings.Builder
	for j, p := range s.Points {
		if j > 0 {
			pts.WriteByte(' ')
		}
		pts.WriteString(num(l.px(p.X) - l.left))
		pts.WriteByte(',')
		pts.WriteString(num(l.py(p.Y) - l.top))
	}
	w.printf(`<polyline class="series" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s points="%s">`,
		seriesColor(i), dash(s.Dashed), pts.String())
	w.printf("<title>%s</title></polyline>\n", esc(s.Name))
	if len(s.Points) == 1 { // a one-point polyline draws nothing
		w.printf(`<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n",
			num(l.px(s.Points[0].X)-l.left), num(l.py(s.Points[0].Y)-l.top), seriesColor(i))
	}
}

// legend lists the named series to the right of the plot, top-aligned.
func (w *svgWriter) legend(ss []Series, l layout) {
	w.printf(`<g class="legend" fill="%s">`+"\n", inkColor)
	x := l.left + l.plotW + 16
	row := 0
	for i, s := range ss {
		if s.Name == "" {
			continue
		}
		y := l.top + 8 + float64(row*legendRow)
		w.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>`+"\n",
			num(x), num(y), num(x+swatchLen), num(y), seriesColor(i), dash(s.Dashed))
		w.printf(`<text x="%s" y="%s">%s</text>`+"\n", num(x+swatchLen+6), num(y+fontSize/3), esc(s.Name))
		row++
	}
	w.printf("</g>\n")
}

func dash(dashed bool) string {
	if dashed {
		return ` stroke-dasharray="` + dashArray + `"`
	}
	return ""
}

// num prints a coordinate with two decimals, dropping trailing zeros to
// keep the output small; fixed precision keeps it deterministic.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// esc escapes text for XML character data and attribute values; invalid
// XML characters become U+FFFD.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // strings.Builder writes cannot fail
	return b.String()
}
