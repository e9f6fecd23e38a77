// Package promcheck checks the Grafana dashboards (conf/grafana) and the
// Prometheus alerting rules (conf/prometheus) against Magnetar itself:
//
//   - TestPromtoolRules: promtool check rules, promtool test rules (each
//     alert fires on synthetic series: alerts_test.yml) and promtool check
//     config on the example scrape configuration;
//   - TestDashboardsWellFormed: every dashboard uses the DS_PROMETHEUS
//     data source variable, defines every variable it uses, and names only
//     metrics the Go code declares (no Prometheus needed);
//   - TestDashboardsAndAlertsAgainstPrometheus: a real Prometheus scrapes a
//     running cluster (bookie, broker and proxy processes on etcd, a
//     standalone replicating with it) under a client load, with the rules
//     loaded; every panel query returns data, every variable has values,
//     every rule evaluates, and every metric a query or rule names exists.
//
// Debian's prometheus package provides prometheus and promtool
// (scripts/prometheus.sh install). Without them the tests skip, unless
// MAGNETAR_REQUIRE_PROMETHEUS is set (make test sets it): then they fail.
package promcheck

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// requireEnv, when set, turns a missing prometheus or promtool into a
// failure.
const requireEnv = "MAGNETAR_REQUIRE_PROMETHEUS"

// prometheusTools returns the paths of prometheus and promtool, skipping
// the test when they are missing and requireEnv is not set.
func prometheusTools(t *testing.T) (prometheus, promtool string) {
	t.Helper()
	prometheus, err1 := exec.LookPath("prometheus")
	promtool, err2 := exec.LookPath("promtool")
	if err1 == nil && err2 == nil {
		return prometheus, promtool
	}
	msg := "prometheus and promtool are not installed (scripts/prometheus.sh install, or make prometheus)"
	if os.Getenv(requireEnv) != "" {
		t.Fatalf("%s, and %s is set", msg, requireEnv)
	}
	t.Skipf("%s; set %s=1 to fail instead of skipping", msg, requireEnv)
	return "", ""
}

func confDir(t *testing.T, sub string) string {
	return filepath.Join(repoRoot(t), "conf", sub)
}

func TestPromtoolRules(t *testing.T) {
	_, promtool := prometheusTools(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = confDir(t, "prometheus")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// promInternal are series Prometheus writes itself, present only while an
// alert is pending or firing.
var promInternal = map[string]bool{"ALERTS": true, "ALERTS_FOR_STATE": true}

func TestDashboardsWellFormed(t *testing.T) {
	dashboards, err := readDashboards(confDir(t, "grafana"))
	if err != nil {
		t.Fatal(err)
	}
	declared := declaredSource(t)
	uids := map[string]string{}
	checkNames := func(where, expr string) {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %v: %s", where, err, expr)
			return
		}
		for _, n := range names {
			if !exported(n, declared) {
				t.Errorf("%s names metric %s, which no Magnetar code declares", where, n)
			}
		}
	}
	for _, file := range slices.Sorted(maps.Keys(dashboards)) {
		d := dashboards[file]
		if other, dup := uids[d.UID]; dup || d.UID == "" {
			t.Errorf("%s: uid %q empty or also %s's", file, d.UID, other)
		}
		uids[d.UID] = file
		hasDS := false
		for _, v := range d.Templating.List {
			if v.Name == "DS_PROMETHEUS" && v.Type == "datasource" && v.queryString() == "prometheus" {
				hasDS = true
			}
			if v.Type == "query" && !usesDS(v.Datasource) {
				t.Errorf("%s: variable %s does not use ${DS_PROMETHEUS}", file, v.Name)
			}
		}
		if !hasDS {
			t.Errorf("%s: no DS_PROMETHEUS variable of type datasource (query prometheus)", file)
		}
		ids := map[int]bool{}
		for _, p := range d.allPanels() {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", file, p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s / %q: no query", file, p.Title)
			}
			if !usesDS(p.Datasource) {
				t.Errorf("%s / %q: data source is not ${DS_PROMETHEUS}", file, p.Title)
			}
			for _, tg := range p.Targets {
				if !usesDS(tg.Datasource) {
					t.Errorf("%s / %q target %s: data source is not ${DS_PROMETHEUS}", file, p.Title, tg.RefID)
				}
			}
		}
		pqs, vqs, err := d.queries(file)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, q := range pqs {
			checkNames(fmt.Sprintf("%s / %q target %s", q.Dashboard, q.Panel, q.RefID), q.Query)
		}
		for _, v := range vqs {
			checkNames(fmt.Sprintf("%s: variable %s", v.Dashboard, v.Name), v.Expr)
		}
	}
	exprs, err := ruleExprs(filepath.Join(confDir(t, "prometheus"), "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) == 0 {
		t.Error("alerts.yml: no expr found")
	}
	for i, e := range exprs {
		checkNames(fmt.Sprintf("alerts.yml rule %d", i+1), e)
	}
}

// usesDS reports whether a panel's, target's or variable's datasource is
// {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}.
func usesDS(raw []byte) bool {
	s := string(raw)
	return strings.Contains(s, `"uid":"${DS_PROMETHEUS}"`) || strings.Contains(s, `"uid": "${DS_PROMETHEUS}"`)
}

// declaredSource is the text of every non-test Go file that serves
// metrics (not tools/, benchmarks/ or docs/).
func declaredSource(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == "tools", rel == "benchmarks", rel == "docs", rel == "bin", strings.HasPrefix(d.Name(), "."), d.Name() == "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.Write(src)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// exported reports whether metric name n is declared in src as a string
// literal (a histogram's series by its base name), comes from client_golang's
// Go and process collectors, or is Prometheus's own.
func exported(n, src string) bool {
	if n == "up" || promInternal[n] || strings.HasPrefix(n, "go_") || strings.HasPrefix(n, "process_") {
		return true
	}
	for _, suffix := range []string{"", "_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(n, suffix); ok && strings.Contains(src, `"`+base+`"`) {
			return true
		}
	}
	return false
}

// ruleExprs reads the expr values of a rules file: one line, or a block
// (>-, |) of the lines indented deeper than the key. Enough for alerts.yml
// without a YAML parser in go.mod; Prometheus reads the file itself in
// TestDashboardsAndAlertsAgainstPrometheus.
func ruleExprs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key := regexp.MustCompile(`^(\s*)expr:\s*(.*)$`)
	lines := strings.Split(string(b), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		m := key.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, rest := len(m[1]), strings.TrimSpace(m[2])
		if rest != "" && !strings.HasPrefix(rest, ">") && !strings.HasPrefix(rest, "|") {
			out = append(out, strings.Trim(rest, `'"`))
			continue
		}
		var block []string
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
				break
			}
			block = append(block, strings.TrimSpace(next))
			i++
		}
		out = append(out, strings.Join(block, "\n"))
	}
	return out, nil
}

func TestDashboardsAndAlertsAgainstPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bookie, broker, proxy, standalone, etcd and Prometheus processes: skipped under -short")
	}
	prometheus, _ := prometheusTools(t)
	began := time.Now()
	dashboards, err := readDashboards(confDir(t, "grafana"))
	if err != nil {
		t.Fatal(err)
	}
	rulesFile := filepath.Join(confDir(t, "prometheus"), "alerts.yml")
	s := newSystem(t, magnetarBinary(t))
	s.startMagnetar()
	s.startPrometheus(prometheus, rulesFile)
	t.Logf("cluster and Prometheus up after %.1f s", time.Since(began).Seconds())

	ctx := context.Background()
	direct, viaProxy, inB := s.client(s.brokerA), s.client(s.proxy), s.client(s.brokerB)
	l := s.steady(viaProxy, direct, inB)
	s.coldReads(ctx, direct)
	// Three more scrapes of every target and evaluations of every rule
	// after the last of the load's one-off events.
	after := time.Now().Add(3 * time.Second)
	s.waitFor("scrapes and rule evaluations after the load", 30*time.Second, func() (bool, string) {
		oldest, err := s.prom.scalar(ctx, `min(timestamp(up{job=~"magnetar-.*"}))`)
		if err != nil {
			return false, err.Error()
		}
		if oldest < float64(after.UnixMilli())/1000 {
			return false, fmt.Sprintf("oldest scrape at %.1f, want after %d", oldest, after.Unix())
		}
		rules, err := s.prom.rules(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rules {
			if r.LastEvaluation.Before(after) {
				return false, fmt.Sprintf("rule %s last evaluated %s", r.Name, r.LastEvaluation)
			}
		}
		return true, ""
	})
	t.Logf("load and scrapes done after %.1f s", time.Since(began).Seconds())

	used := map[string][]string{} // metric name -> where it is used
	checkPanels(ctx, t, s.prom, dashboards, used)
	checkRules(ctx, t, s.prom, rulesFile, used)
	for _, n := range slices.Sorted(maps.Keys(used)) {
		if promInternal[n] {
			continue
		}
		v, err := s.prom.query(ctx, fmt.Sprintf(`count({__name__=%q})`, n))
		if err != nil {
			t.Errorf("metric %s: %v", n, err)
		} else if len(v) == 0 {
			t.Errorf("metric %s, named by %s, is exported by no target", n, strings.Join(used[n], "; "))
		}
	}
	sent, err := l.stop()
	if err != nil {
		t.Errorf("client load: %v", err)
	}
	t.Logf("%d queries of %d dashboards, %d metric names, %d messages sent; %.1f s in all",
		countQueries(dashboards), len(dashboards), len(used), sent, time.Since(began).Seconds())
}

// checkPanels runs every panel target and variable query of every
// dashboard, and records the metric names they use.
func checkPanels(ctx context.Context, t *testing.T, api promAPI, dashboards map[string]dashboard, used map[string][]string) {
	t.Helper()
	use := func(where, expr string) {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
		for _, n := range names {
			used[n] = append(used[n], where)
		}
	}
	for _, file := range slices.Sorted(maps.Keys(dashboards)) {
		pqs, vqs, err := dashboards[file].queries(file)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, q := range pqs {
			use(fmt.Sprintf("%s / %q", q.Dashboard, q.Panel), q.Query)
			v, err := api.query(ctx, q.Query)
			switch {
			case err != nil:
				t.Errorf("%s: %v", q, err)
			case len(v) == 0:
				t.Errorf("%s: no data", q)
			case !hasNumber(v):
				t.Errorf("%s: only NaN (%d series)", q, len(v))
			}
		}
		for _, vq := range vqs {
			use(fmt.Sprintf("%s: variable %s", vq.Dashboard, vq.Name), vq.Expr)
			v, err := api.query(ctx, fmt.Sprintf("count by (%s) (%s)", vq.Label, vq.Expr))
			if err != nil {
				t.Errorf("%s: variable %s (%s): %v", vq.Dashboard, vq.Name, vq.Definition, err)
			} else if names(v, vq.Label) == "" {
				t.Errorf("%s: variable %s (%s): no values", vq.Dashboard, vq.Name, vq.Definition)
			}
		}
	}
}

// checkRules requires Prometheus to have loaded every alert of rulesFile,
// each evaluating without error, and records the metric names they use.
func checkRules(ctx context.Context, t *testing.T, api promAPI, rulesFile string, used map[string][]string) {
	t.Helper()
	rules, err := api.rules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := alertNames(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, r := range rules {
		where := fmt.Sprintf("rule %s (group %s)", r.Name, r.Group)
		loaded = append(loaded, r.Name)
		if r.Health != "ok" || r.LastError != "" {
			t.Errorf("%s: health %q, last error %q", where, r.Health, r.LastError)
		}
		names, err := metricNames(r.Query)
		if err != nil {
			t.Errorf("%s: %v: %s", where, err, r.Query)
		}
		if len(names) == 0 {
			t.Errorf("%s: names no metric: %s", where, r.Query)
		}
		for _, n := range names {
			used[n] = append(used[n], where)
		}
	}
	slices.Sort(loaded)
	if loaded = slices.Compact(loaded); !slices.Equal(loaded, want) {
		t.Errorf("Prometheus loaded alerts %v, alerts.yml has %v", loaded, want)
	}
}

func countQueries(dashboards map[string]dashboard) int {
	n := 0
	for _, d := range dashboards {
		for _, p := range d.allPanels() {
			n += len(p.Targets)
		}
	}
	return n
}
