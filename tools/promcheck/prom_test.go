package promcheck

// Prometheus's HTTP API (/api/v1), as much as the checks need, and the
// Grafana dashboards' queries with their template variables substituted.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// promAPI queries one Prometheus server.
type promAPI struct{ base string }

// sample is one series of an instant query's vector result.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// number is the sample's value ("NaN" included).
func (s sample) number() float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// get calls path with params and decodes the data field into out.
func (p promAPI) get(ctx context.Context, path string, params url.Values, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %s: %.200s", path, resp.Status, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

// query runs an instant query and returns its vector (a scalar result
// comes back as one series without labels).
func (p promAPI) query(ctx context.Context, q string) ([]sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var v []sample
		err := json.Unmarshal(data.Result, &v)
		return v, err
	case "scalar":
		var s [2]any
		err := json.Unmarshal(data.Result, &s)
		return []sample{{Metric: map[string]string{}, Value: s}}, err
	}
	return nil, fmt.Errorf("query %q: result type %s, want an instant vector", q, data.ResultType)
}

// scalar runs q and returns its single value, NaN when the result is empty.
func (p promAPI) scalar(ctx context.Context, q string) (float64, error) {
	v, err := p.query(ctx, q)
	if err != nil || len(v) == 0 {
		return math.NaN(), err
	}
	return v[0].number(), nil
}

// rule is one loaded rule as /api/v1/rules reports it.
type rule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Type      string `json:"type"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	// LastEvaluation is the zero time until the rule was evaluated once.
	LastEvaluation time.Time `json:"lastEvaluation"`
	Group          string    `json:"-"`
}

func (p promAPI) rules(ctx context.Context) ([]rule, error) {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get(ctx, "/api/v1/rules", url.Values{}, &data); err != nil {
		return nil, err
	}
	var out []rule
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			r.Group = g.Name
			out = append(out, r)
		}
	}
	return out, nil
}

// panelQuery is one target of one dashboard panel.
type panelQuery struct {
	Dashboard, Panel, RefID string
	Expr                    string // as written, with the template variables
	Query                   string // the variables substituted
}

func (q panelQuery) String() string {
	return fmt.Sprintf("%s / %q target %s: %s", q.Dashboard, q.Panel, q.RefID, q.Query)
}

// varQuery is a template variable's label_values(selector, label) query.
type varQuery struct {
	Dashboard, Name  string
	Selector, Label  string
	Definition, Expr string // Expr: the selector substituted
}

// dashboard is the part of Grafana's dashboard JSON the checks read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		RefID      string          `json:"refId"`
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"` // a string, or {"query": "..."} in newer Grafana
	Datasource json.RawMessage `json:"datasource"`
	Current    struct {
		Value any `json:"value"`
	} `json:"current"`
}

// queryString is the variable's query text.
func (v variable) queryString() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// allPanels flattens rows: a collapsed row holds its panels.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// readDashboards reads every *.json under dir.
func readDashboards(dir string) (map[string]dashboard, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboards under %s", dir)
	}
	out := map[string]dashboard{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out, nil
}

// builtins are Grafana's own variables, as the checks substitute them: a
// rate window of a minute holds plenty of samples at the test's 1 s scrape
// interval.
var builtins = map[string]string{"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}

var varRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)`)

// substitutions maps each variable of d to what the checks put in its
// place: ".*" for query variables (every dashboard matches them with =~,
// and .* is their All value), the current value of custom and constant
// ones.
func (d dashboard) substitutions() map[string]string {
	subst := maps.Clone(builtins)
	for _, v := range d.Templating.List {
		switch v.Type {
		case "custom", "constant", "interval", "textbox":
			subst[v.Name] = fmt.Sprint(v.Current.Value)
		default:
			subst[v.Name] = ".*"
		}
	}
	return subst
}

// substitute replaces every variable reference in expr; an unknown
// variable is an error.
func substitute(expr string, subst map[string]string) (string, error) {
	var unknown []string
	out := varRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2]
		v, ok := subst[name]
		if !ok {
			unknown = append(unknown, ref)
			return ref
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown template variables %v", unknown)
	}
	return out, nil
}

// queries lists every panel target and variable query of d, substituted.
func (d dashboard) queries(file string) ([]panelQuery, []varQuery, error) {
	subst := d.substitutions()
	var pqs []panelQuery
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			q, err := substitute(tg.Expr, subst)
			if err != nil {
				return nil, nil, fmt.Errorf("%s / %q target %s: %w", file, p.Title, tg.RefID, err)
			}
			pqs = append(pqs, panelQuery{Dashboard: file, Panel: p.Title, RefID: tg.RefID, Expr: tg.Expr, Query: q})
		}
	}
	var vqs []varQuery
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		def := v.queryString()
		sel, label, ok := labelValues(def)
		if !ok {
			return nil, nil, fmt.Errorf("%s: variable %s: query %q is not label_values(selector, label)", file, v.Name, def)
		}
		expr, err := substitute(sel, subst)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: variable %s: %w", file, v.Name, err)
		}
		vqs = append(vqs, varQuery{Dashboard: file, Name: v.Name, Selector: sel, Label: label, Definition: def, Expr: expr})
	}
	return pqs, vqs, nil
}

var labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*$`)

// labelValues splits Grafana's label_values(selector, label).
func labelValues(q string) (selector, label string, ok bool) {
	m := labelValuesRE.FindStringSubmatch(q)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// alertNames are the alert names of a rules file, read with a pattern
// (no YAML parser in go.mod): what Prometheus must report as loaded.
func alertNames(rulesFile string) ([]string, error) {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*-\s*alert:\s*(\S+)\s*$`).FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// hasNumber reports whether some sample of v is a number (not NaN): a
// panel whose every value is NaN (a quantile of a histogram without
// observations) draws nothing.
func hasNumber(v []sample) bool {
	for _, s := range v {
		if !math.IsNaN(s.number()) {
			return true
		}
	}
	return false
}

// names lists the label values of v under label, for messages.
func names(v []sample, label string) string {
	var out []string
	for _, s := range v {
		out = append(out, s.Metric[label])
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}
