package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// node is a generic XML element, enough to walk the whole document.
type node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []node     `xml:",any"`
}

func (n node) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// walk calls f on n and its descendants, depth first, in document order.
func (n node) walk(f func(node)) {
	f(n)
	for _, c := range n.Nodes {
		c.walk(f)
	}
}

// parseSVG checks that b is one well-formed XML document with a single
// <svg> root, and returns its tree.
func parseSVG(t *testing.T, b []byte) node {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	roots, depth := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	var root node
	if err := xml.Unmarshal(b, &root); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if roots != 1 || root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("want one svg root, got %d roots, first %v", roots, root.XMLName)
	}
	return root
}

// Names that exercise escaping; all are valid XML text so they must come
// back unchanged after decoding.
func testNames() []string {
	return []string{
		"", "plain", `a<b>&"c"'d'`, "]]>", "<!-- x -->", "ünï©ødé µs", "tab\there", "&amp;",
	}
}

func randomChart(r *rand.Rand) LineChart {
	names := testNames()
	pick := func() string { return names[r.IntN(len(names))] }
	c := LineChart{Title: pick()}
	c.X = Axis{Label: pick(), Log: r.IntN(2) == 0}
	c.Y = Axis{Label: pick(), Log: r.IntN(2) == 0}
	if r.IntN(3) == 0 {
		c.X = PercentileAxis("percentile")
	}
	for i := range 1 + r.IntN(10) {
		s := Series{Name: fmt.Sprintf("%s #%d", pick(), i), Dashed: r.IntN(2) == 0}
		for range 1 + r.IntN(40) {
			s.Points = append(s.Points, Point{X: randomValue(r, c.X.Log), Y: randomValue(r, c.Y.Log)})
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// randomValue spans many magnitudes, with repeats so flat series occur.
func randomValue(r *rand.Rand, log bool) float64 {
	v := math.Pow(10, float64(r.IntN(13)-6)) * float64(1+r.IntN(9))
	if !log && r.IntN(3) == 0 {
		v = -v
	}
	if !log && r.IntN(5) == 0 {
		v = 0
	}
	return v
}

func TestSVGProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 150 {
		c := randomChart(r)
		b, err := c.SVG()
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		root := parseSVG(t, b)
		checkSeries(t, c, root)
		checkLegend(t, c, root, b)
	}
}

// checkSeries: one polyline per series, in order, with one coordinate
// pair per point, all inside the plot box (the range is automatic).
func checkSeries(t *testing.T, c LineChart, root node) {
	t.Helper()
	var lines []node
	var w, h float64
	root.walk(func(n node) {
		switch {
		case n.XMLName.Local == "polyline" && n.attr("class") == "series":
			lines = append(lines, n)
		case n.XMLName.Local == "svg" && n.attr("overflow") == "hidden":
			w, h = parseNum(t, n.attr("width")), parseNum(t, n.attr("height"))
		}
	})
	if len(lines) != len(c.Series) {
		t.Fatalf("%d polylines for %d series", len(lines), len(c.Series))
	}
	for i, l := range lines {
		pairs := strings.Fields(l.attr("points"))
		if len(pairs) != len(c.Series[i].Points) {
			t.Fatalf("series %d: %d points drawn, want %d", i, len(pairs), len(c.Series[i].Points))
		}
		for _, p := range pairs {
			x, y, _ := strings.Cut(p, ",")
			if xv, yv := parseNum(t, x), parseNum(t, y); xv < -0.01 || xv > w+0.01 || yv < -0.01 || yv > h+0.01 {
				t.Fatalf("series %d: point %s outside the %vx%v plot", i, p, w, h)
			}
		}
		if got := l.attr("stroke-dasharray") != ""; got != c.Series[i].Dashed {
			t.Errorf("series %d: dashed %v, want %v", i, got, c.Series[i].Dashed)
		}
	}
}

// checkLegend: the legend holds each name, escaped in the bytes and
// unchanged once decoded.
func checkLegend(t *testing.T, c LineChart, root node, b []byte) {
	t.Helper()
	var got []string
	root.walk(func(n node) {
		if n.XMLName.Local == "g" && n.attr("class") == "legend" {
			for _, c := range n.Nodes {
				if c.XMLName.Local == "text" {
					got = append(got, c.Text)
				}
			}
		}
	})
	var want []string
	for _, s := range c.Series {
		want = append(want, s.Name)
		if !bytes.Contains(b, []byte(">"+esc(s.Name)+"<")) {
			t.Errorf("escaped name %q not in output", esc(s.Name))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("legend %q, want %q", got, want)
	}
}

func parseNum(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		t.Fatalf("bad number %q: %v", s, err)
	}
	return v
}

func TestSVGDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		c := randomChart(r)
		a, err := c.SVG()
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.SVG()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatal("two renderings of one chart differ")
		}
	}
}

func TestSVGFixedRangeClips(t *testing.T) {
	c := LineChart{
		Y:      Axis{Min: 0, Max: 10},
		Series: []Series{{Name: "over", Points: []Point{{0, 5}, {1, 50}, {2, -7}}}},
	}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	root := parseSVG(t, b)
	var labels []string
	root.walk(func(n node) {
		if n.XMLName.Local == "g" && n.attr("class") == "ticks" {
			for _, c := range n.Nodes {
				if c.XMLName.Local == "text" {
					labels = append(labels, c.Text)
				}
			}
		}
	})
	// x labels first (0..2), then y labels that stay within 0..10.
	if got := strings.Join(labels, " "); !strings.HasSuffix(got, "0 2 4 6 8 10") {
		t.Errorf("tick labels %q, want y ticks 0..10 by 2", got)
	}
}

func TestSVGErrors(t *testing.T) {
	ok := []Series{{Name: "s", Points: []Point{{1, 1}, {2, 2}}}}
	pts := func(p ...Point) []Series { return []Series{{Name: "bad one", Points: p}} }
	logY := Axis{Log: true}
	many := make([]Series, maxSeries+1)
	for i := range many {
		many[i] = ok[0]
	}
	cases := []struct {
		name string
		c    LineChart
		want error
	}{
		{"no series", LineChart{}, ErrNoSeries},
		{"no points", LineChart{Series: pts()}, ErrEmptySeries},
		{"NaN x", LineChart{Series: pts(Point{math.NaN(), 1})}, ErrNonFinite},
		{"Inf y", LineChart{Series: pts(Point{1, math.Inf(1)})}, ErrNonFinite},
		{"-Inf y", LineChart{Series: pts(Point{1, math.Inf(-1)})}, ErrNonFinite},
		{"zero on log y", LineChart{Y: logY, Series: pts(Point{1, 0})}, ErrNonPositive},
		{"negative on log y", LineChart{Y: logY, Series: pts(Point{1, 2}, Point{2, -1})}, ErrNonPositive},
		{"zero on log x", LineChart{X: Axis{Log: true}, Series: pts(Point{0, 1})}, ErrNonPositive},
		{"log min zero", LineChart{Y: Axis{Log: true, Max: 10}, Series: ok}, ErrNonPositive},
		{"min above max", LineChart{Y: Axis{Min: 5, Max: 1}, Series: ok}, ErrBadRange},
		{"NaN max", LineChart{Y: Axis{Max: math.NaN()}, Series: ok}, ErrNonFinite},
		{"huge", LineChart{Series: pts(Point{math.MaxFloat64, 1})}, ErrOutOfRange},
		{"subnormal", LineChart{Series: pts(Point{1, 5e-324})}, ErrOutOfRange},
		{"tiny", LineChart{Series: pts(Point{1e-101, 1})}, ErrOutOfRange},
		{"NaN tick", LineChart{X: Axis{Ticks: []float64{math.NaN()}}, Series: ok}, ErrNonFinite},
		{"NaN percentile", LineChart{X: PercentileAxis(""), Series: pts(Point{PercentileX(math.NaN()), 1})}, ErrNonFinite},
		{"too narrow", LineChart{Width: 10, Series: ok}, ErrBadSize},
		{"negative height", LineChart{Height: -1, Series: ok}, ErrBadSize},
		{"too many series", LineChart{Series: many}, ErrTooLarge},
		{"legend leaves no plot", LineChart{Width: minWidth, Series: []Series{{Name: strings.Repeat("n", 60), Points: ok[0].Points}}}, ErrBadSize},
	}
	for _, tc := range cases {
		b, err := tc.c.SVG()
		if !errors.Is(err, tc.want) || b != nil {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestSVGErrorNamesSeries(t *testing.T) {
	c := LineChart{Title: "lat", Y: Axis{Log: true}, Series: []Series{
		{Name: "good", Points: []Point{{1, 1}}},
		{Name: "bad", Points: []Point{{1, 1}, {2, 0}}},
	}}
	_, err := c.SVG()
	want := `chart "lat": series 1 ("bad"): point 1: y 0: ` + ErrNonPositive.Error()
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestSinglePointSeriesGetsMarker(t *testing.T) {
	c := LineChart{Series: []Series{{Name: "one", Points: []Point{{3, 4}}}}}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	circles := 0
	parseSVG(t, b).walk(func(n node) {
		if n.XMLName.Local == "circle" {
			circles++
		}
	})
	if circles != 1 {
		t.Errorf("%d markers, want 1", circles)
	}
}

// TestXLabelsDoNotOverlap: on a narrow chart the percentile labels are
// too wide to all fit, so some are skipped rather than drawn on top of
// each other.
func TestXLabelsDoNotOverlap(t *testing.T) {
	var pts []Point
	for _, p := range []float64{0, 50, 90, 99, 99.9, 99.99, 99.999, 100} {
		pts = append(pts, Point{PercentileX(p), 1 + p})
	}
	c := LineChart{Width: minWidth, X: PercentileAxis("p"), Series: []Series{{Name: "s", Points: pts}}}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	lastEnd, n := math.Inf(-1), 0
	parseSVG(t, b).walk(func(nd node) {
		if nd.XMLName.Local != "text" || nd.attr("text-anchor") != "middle" || !strings.HasSuffix(nd.Text, "%") {
			return
		}
		x, half := parseNum(t, nd.attr("x")), float64(len(nd.Text))*charWidth/2
		if x-half < lastEnd {
			t.Errorf("label %q at %v overlaps the previous one", nd.Text, x)
		}
		lastEnd, n = x+half, n+1
	})
	if n < 2 || n == 7 {
		t.Errorf("%d of 7 percentile labels drawn, want some but not all", n)
	}
}

// TestSVGExtremeValues: values at the accepted limits still give finite
// coordinates and terminate.
func TestSVGExtremeValues(t *testing.T) {
	edges := []float64{minMagnitude, maxMagnitude, 1, math.Nextafter(1, 2), math.Nextafter(minMagnitude, 1), 3, 3.0000001}
	r := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		c := LineChart{X: Axis{Log: r.IntN(2) == 0}, Y: Axis{Log: r.IntN(2) == 0}}
		var pts []Point
		for range 1 + r.IntN(3) {
			x, y := edges[r.IntN(len(edges))], edges[r.IntN(len(edges))]
			if !c.X.Log && r.IntN(2) == 0 {
				x = -x
			}
			pts = append(pts, Point{x, y})
		}
		c.Series = []Series{{Name: "edge", Points: pts}}
		b, err := c.SVG()
		if err != nil {
			t.Fatalf("%+v: %v", pts, err)
		}
		if bytes.Contains(b, []byte("NaN")) || bytes.Contains(b, []byte("Inf")) {
			t.Fatalf("%+v: non-finite coordinate in\n%s", pts, b)
		}
		checkSeries(t, c, parseSVG(t, b))
	}
}
