package broker

// The per-topic series written straight into the Prometheus text format
// (0.0.4), as Pulsar writes its topic stats into its own buffer rather than
// through a metrics library. Through client_golang's registry, 10,000
// topics (23 families, some 200,000 samples) cost about 2 s of CPU per
// scrape: a const metric per sample, then the registry's sort of each
// family by label values and its encoder (TUNING.md, "A scrape of 10,000
// topics"). Here a scrape samples each topic once, sorts the topics once,
// and escapes each topic's labels once.

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// TopicsAsText makes Collect leave the per-topic series out, for a
// handler that writes them with WriteTopics (MetricsHandler): both at
// once would repeat every family.
func (m *Metrics) TopicsAsText() {
	m.mu.Lock()
	m.topicsAsText = true
	m.mu.Unlock()
}

// WriteTopics writes every loaded topic's series in the Prometheus text
// format (or each namespace's sums, MetricsByNamespace): the families of
// Collect's topic series, the same samples.
func (m *Metrics) WriteTopics(w io.Writer) error {
	samples := m.samples(time.Now())
	slices.SortFunc(samples, func(a, b topicSample) int {
		return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.topic, b.topic))
	})
	labels := make([]string, 0, len(samples))
	kept := samples[:0]
	for _, s := range samples {
		if !utf8.ValidString(s.cluster) || !utf8.ValidString(s.namespace) || !utf8.ValidString(s.topic) {
			// As the collector's const metrics refuse such a label.
			m.b.log.Warn("metric samples skipped: a label is not valid UTF-8", "topic", strconv.Quote(s.topic))
			continue
		}
		kept = append(kept, s)
		labels = append(labels, topicLabelText(s))
	}
	tw := &textWriter{w: bufio.NewWriterSize(w, 64<<10)}
	if m.byNamespace {
		for j, s := range kept {
			tw.sample(nsTopicsCount, labels[j], "", float64(s.topics))
		}
	}
	topics, repl := m.series()
	for i, def := range topics {
		for j, s := range kept {
			if s.has[i] {
				tw.sample(def, labels[j], "", s.values[i])
			}
		}
	}
	for i, def := range repl {
		for j, s := range kept {
			for _, r := range s.repl {
				tw.sample(def, labels[j], r.remote, r.values[i])
			}
		}
	}
	return tw.w.Flush() // bufio keeps the first write error
}

// textWriter writes samples family by family: a family's HELP and TYPE
// go before its first sample.
type textWriter struct {
	w      *bufio.Writer
	family string // the family whose header is written
	line   []byte
}

func (tw *textWriter) sample(def series, labels, remote string, v float64) {
	tw.line = tw.line[:0]
	if tw.family != def.name {
		tw.line = appendFamilyHeader(tw.line, def)
		tw.family = def.name
	}
	tw.line = appendSample(tw.line, def.name, labels, remote, v)
	_, _ = tw.w.Write(tw.line) // an error stays in w for Flush
}

// topicLabelText is s's labels as they go between the braces (no topic
// in a namespace's sum).
func topicLabelText(s topicSample) string {
	var b []byte
	b = appendLabel(b, "cluster", s.cluster)
	b = append(b, ',')
	b = appendLabel(b, "namespace", s.namespace)
	if s.topics == 0 {
		b = append(b, ',')
		b = appendLabel(b, "topic", s.topic)
	}
	return string(b)
}

func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, '=', '"')
	b = appendEscaped(b, value, true)
	return append(b, '"')
}

// appendEscaped appends s escaped as the text format wants it: a label
// value (quoted) escapes backslashes, newlines and double quotes, a HELP
// text the first two.
func appendEscaped(b []byte, s string, quoted bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quoted:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendFamilyHeader(b []byte, def series) []byte {
	b = append(b, "# HELP "...)
	b = append(b, def.name...)
	b = append(b, ' ')
	b = appendEscaped(b, def.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, def.name...)
	if def.typ == prometheus.CounterValue {
		return append(b, " counter\n"...)
	}
	return append(b, " gauge\n"...)
}

// appendSample appends one sample line; remote, when set, is the
// remote_cluster label of a replication series.
func appendSample(b []byte, name, labels, remote string, v float64) []byte {
	b = append(b, name...)
	b = append(b, '{')
	b = append(b, labels...)
	if remote != "" {
		b = append(b, ',')
		b = appendLabel(b, "remote_cluster", remote)
	}
	b = append(b, '}', ' ')
	switch {
	case math.IsInf(v, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(v, -1):
		b = append(b, "-Inf"...)
	case math.IsNaN(v):
		b = append(b, "NaN"...)
	default:
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, '\n')
}

// MetricsHandler serves /metrics: what g gathers (m among it, set to
// TopicsAsText), then m's topic series. Gzipped when the scraper accepts
// it (Prometheus does), at the fastest level: 10,000 topics are some 16
// MiB of text.
func MetricsHandler(g prometheus.Gatherer, m *Metrics) http.Handler {
	m.TopicsAsText()
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	gzipped, err := gzhttp.NewWrapper(gzhttp.CompressionLevel(gzip.BestSpeed))
	if err != nil {
		panic(fmt.Sprintf("gzhttp options: %v", err)) // constant options: a bug
	}
	return gzipped(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := g.Gather()
		if err != nil {
			http.Error(w, fmt.Sprintf("gather metrics: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				return // the scraper went away
			}
		}
		_ = m.WriteTopics(w) // an error here is the scraper gone
	}))
}
