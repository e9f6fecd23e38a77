package broker

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// flatten lists a gathering's samples as "name{labels} value" lines,
// sorted, for comparing two ways of producing them.
func flatten(mfs map[string]*dto.MetricFamily) []string {
	var out []string
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(labels)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out = append(out, fmt.Sprintf("%s %s{%s} %v", name, mf.GetType(), strings.Join(labels, ","), v))
		}
	}
	slices.Sort(out)
	return out
}

func parseText(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse the text format: %v", err)
	}
	return mfs
}

// TestWriteTopicsMatchesCollector: the text writer writes the samples the
// collector gathers, family by family.
func TestWriteTopicsMatchesCollector(t *testing.T) {
	b, url := startBroker(t)
	c := newClient(t, url)
	for _, topic := range []string{"text-a", "text-b", "non-persistent://public/default/text-c"} {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		produce(t, c, topic, 5, false)
		receive(t, cons, 5, true)
	}
	m := NewMetrics(b)
	// The acknowledgements reach the broker after receive returns, and
	// moved a backlog between the collector's gather and the text (CI, 7
	// Dec): compare once they are all applied.
	eventually(t, "the acknowledgements applied", func() error {
		want, _, _ := collectorAndText(t, m)
		for _, s := range want {
			if strings.HasPrefix(s, "pulsar_msg_backlog ") && !strings.HasSuffix(s, "} 0") {
				return fmt.Errorf("backlog left: %s", s)
			}
		}
		return nil
	})
	want, got, _ := settledCollectorAndText(t, m)
	if len(want) < 3*10 {
		t.Fatalf("the collector gathered %d topic samples; want at least 10 for each of 3 topics", len(want))
	}
	if !slices.Equal(want, got) {
		t.Fatalf("text samples differ from the collector's:\ncollector %q\ntext      %q", want, got)
	}
}

// settledCollectorAndText is collectorAndText taken again, up to three
// times, while the two differ: a once-a-second pass (the rates) may land
// between the gather and the text. A difference that stays is the
// writer's.
func settledCollectorAndText(t *testing.T, m *Metrics) (collector, text []string, parsed map[string]*dto.MetricFamily) {
	t.Helper()
	for range 3 {
		if collector, text, parsed = collectorAndText(t, m); slices.Equal(collector, text) {
			break
		}
	}
	return collector, text, parsed
}

// collectorAndText gathers m's topic families through a registry and
// writes them with WriteTopics: both flattened, and the text parsed.
func collectorAndText(t *testing.T, m *Metrics) (collector, text []string, parsed map[string]*dto.MetricFamily) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fromCollector := map[string]*dto.MetricFamily{}
	for _, mf := range gathered {
		if strings.HasPrefix(mf.GetName(), "pulsar_") && !strings.HasPrefix(mf.GetName(), "pulsar_txn_") ||
			strings.HasPrefix(mf.GetName(), "pulsar_txn_tb_") {
			fromCollector[mf.GetName()] = mf
		}
	}
	var buf bytes.Buffer
	if err := m.WriteTopics(&buf); err != nil {
		t.Fatal(err)
	}
	parsed = parseText(t, &buf)
	return flatten(fromCollector), flatten(parsed), parsed
}

// TestAppendSampleAsExpfmt: a sample line and a family header, with
// labels and values drawn at random (quotes, backslashes, newlines,
// non-ASCII; infinities, NaN, integers, tiny and huge values), are the
// bytes expfmt's own encoder writes.
func TestAppendSampleAsExpfmt(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 39))
	alphabet := []string{"a", "Z", "0", "/", ":", "-", "\"", "\\", "\n", "é", "日", " ", "{", "}", "="}
	text := func() string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	values := []float64{0, 1, -1, 10, 1e21, 1.5e-7, 123456789, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, math.SmallestNonzeroFloat64}
	for i := range 2000 {
		s := topicSample{cluster: text(), namespace: text(), topic: text()}
		remote := ""
		if i%3 == 0 {
			remote = "r" + text()
		}
		v := values[rng.IntN(len(values))]
		if i%2 == 0 {
			v = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(30)-15))
		}
		def := topicSeries[rng.IntN(numTopicSeries)]
		def.help = text()
		got := appendFamilyHeader(nil, def)
		got = appendSample(got, def.name, topicLabelText(s), remote, v)

		labels := []*dto.LabelPair{{Name: ptr("cluster"), Value: ptr(s.cluster)}, {Name: ptr("namespace"), Value: ptr(s.namespace)},
			{Name: ptr("topic"), Value: ptr(s.topic)}}
		if remote != "" {
			labels = append(labels, &dto.LabelPair{Name: ptr("remote_cluster"), Value: ptr(remote)})
		}
		metric := &dto.Metric{Label: labels}
		mf := &dto.MetricFamily{Name: ptr(def.name), Help: ptr(def.help), Metric: []*dto.Metric{metric}}
		if def.typ == prometheus.CounterValue {
			mf.Type = dto.MetricType_COUNTER.Enum()
			metric.Counter = &dto.Counter{Value: ptr(v)}
		} else {
			mf.Type = dto.MetricType_GAUGE.Enum()
			metric.Gauge = &dto.Gauge{Value: ptr(v)}
		}
		var want bytes.Buffer
		if _, err := expfmt.MetricFamilyToText(&want, mf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("case %d:\nours   %q\nexpfmt %q", i, got, want.Bytes())
		}
	}
}

// TestMetricsHandler: /metrics carries the registry's families and the
// topics' once each (a family written twice does not parse), plain and
// gzipped.
func TestMetricsHandler(t *testing.T) {
	b, url := startBroker(t)
	c := newClient(t, url)
	produce(t, c, "served", 3, false)
	m := NewMetrics(b)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, prometheus.NewGoCollector())
	srv := httptest.NewServer(MetricsHandler(reg, m))
	defer srv.Close()
	for accept, zipped := range map[string]bool{"": false, "gzip": true, "gzip;q=0": false, "deflate, gzip;q=0.5": true} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept-Encoding", accept)
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = resp.Body
		if got := resp.Header.Get("Content-Encoding"); (got == "gzip") != zipped {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q, want gzip %v", accept, got, zipped)
		}
		if zipped {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		mfs := parseText(t, body)
		resp.Body.Close()
		for _, name := range []string{"go_goroutines", "pulsar_in_messages_total", "magnetar_broker_recovered_panics_total"} {
			if mfs[name] == nil {
				t.Fatalf("Accept-Encoding %q: no %s family", accept, name)
			}
		}
		in := mfs["pulsar_in_messages_total"].GetMetric()
		if len(in) != 1 || in[0].GetCounter().GetValue() != 3 {
			t.Fatalf("Accept-Encoding %q: pulsar_in_messages_total %v; want one series of 3", accept, in)
		}
	}
}

// TestMetricsByNamespace: with exposeTopicLevelMetricsInPrometheus=false the
// topic families are summed per namespace, with no topic label, the same by
// the collector and by the text writer, and pulsar_topics_count counts the
// namespace's topics.
func TestMetricsByNamespace(t *testing.T) {
	b, url := startBroker(t)
	c := newClient(t, url)
	produce(t, c, "ns-sum-a", 4, false)
	produce(t, c, "ns-sum-b", 6, false)
	m := NewMetrics(b)
	m.byNamespace = true
	want, got, fromText := settledCollectorAndText(t, m)
	if !slices.Equal(want, got) {
		t.Fatalf("text samples differ from the collector's:\ncollector %q\ntext      %q", want, got)
	}
	for name, want := range map[string]float64{"pulsar_in_messages_total": 10, "pulsar_topics_count": 2, "pulsar_producers_count": 0} {
		series := fromText[name].GetMetric()
		if len(series) != 1 {
			t.Fatalf("%s: %d series, want one for public/default", name, len(series))
		}
		var labels []string
		for _, l := range series[0].GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		if v := series[0].GetCounter().GetValue() + series[0].GetGauge().GetValue(); v != want ||
			!slices.Equal(labels, []string{"cluster=test", "namespace=public/default"}) {
			t.Fatalf("%s %v = %v, want %v for cluster test, namespace public/default", name, labels, v, want)
		}
	}
}

// TestSumByNamespace: sums add up per namespace, a quota and a
// replication delay are the largest, and a family is in a sum when one
// of the namespace's topics has it.
func TestSumByNamespace(t *testing.T) {
	a := topicSample{cluster: "c", namespace: "t/x", topic: "persistent://t/x/a",
		repl: []replSample{{remote: "r", values: [numReplSeries]float64{rRateOut: 1, rDelay: 5}}}}
	a.set(sInTotal, 3)
	a.set(sBacklogQuota, 100)
	bb := topicSample{cluster: "c", namespace: "t/x", topic: "persistent://t/x/b",
		repl: []replSample{{remote: "r", values: [numReplSeries]float64{rRateOut: 2, rDelay: 7}}}}
	bb.set(sInTotal, 4)
	bb.set(sBacklogQuota, 50)
	bb.set(sCompactSucceeded, 1)
	other := topicSample{cluster: "c", namespace: "t/y", topic: "persistent://t/y/a"}
	other.set(sInTotal, 9)
	got := sumByNamespace([]topicSample{a, bb, other})
	if len(got) != 2 || got[0].namespace != "t/x" || got[0].topics != 2 || got[1].topics != 1 {
		t.Fatalf("sums %+v", got)
	}
	x := got[0]
	if x.values[sInTotal] != 7 || x.values[sBacklogQuota] != 100 || !x.has[sCompactSucceeded] || x.has[sOffloaded] ||
		len(x.repl) != 1 || x.repl[0].values[rRateOut] != 3 || x.repl[0].values[rDelay] != 7 {
		t.Fatalf("t/x sum %+v", x)
	}
	if got[1].values[sInTotal] != 9 || got[1].has[sCompactSucceeded] {
		t.Fatalf("t/y sum %+v", got[1])
	}
}
