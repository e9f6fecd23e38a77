package promcheck

// A small PromQL tokenizer: enough to list the metric names an expression
// selects, so that a rule or panel naming a metric no process exports is
// caught even when an `or` or `unless` hides it from the query's result.
// The full parser (github.com/prometheus/prometheus/promql/parser) would
// bring the whole Prometheus module into go.mod for this one job.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// promqlWords are identifiers that are never metric names: aggregation
// operators (they may be followed by by/without before their parenthesis),
// binary operators and modifiers, and the number literals.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

// labelListWords take a parenthesised list of label names.
var labelListWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// metricNames returns the metric names expr selects, sorted and without
// repeats: identifiers outside strings, label matchers and durations that
// are not followed by '(' (functions) and are not PromQL's own words, and
// the values of __name__ equality matchers.
func metricNames(expr string) ([]string, error) {
	var names []string
	s := []rune(expr)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, _, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, name, err := matchers(s, i)
			if err != nil {
				return nil, err
			}
			if name != "" {
				names = append(names, name)
			}
			i = end
		case c == '[':
			end := indexFrom(s, i, ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ at %d", i)
			}
			i = end + 1
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
			i = skipNumber(s, i)
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentPart(s[j]) {
				j++
			}
			word := string(s[i:j])
			next := skipSpace(s, j)
			switch {
			case labelListWords[word] && next < len(s) && s[next] == '(':
				end := indexFrom(s, next, ')')
				if end < 0 {
					return nil, fmt.Errorf("unclosed label list after %s", word)
				}
				j = end + 1
			case promqlWords[strings.ToLower(word)]:
			case next < len(s) && s[next] == '(':
				// a function
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// matchers skips the label matchers opening at s[i] == '{' and returns the
// index after the closing brace and the value of a __name__="..." matcher.
func matchers(s []rune, i int) (end int, name string, err error) {
	i++
	lastLabel, lastOp := "", ""
	for i < len(s) {
		c := s[i]
		switch {
		case c == '}':
			return i + 1, name, nil
		case c == '"' || c == '\'' || c == '`':
			e, val, err := skipString(s, i)
			if err != nil {
				return 0, "", err
			}
			if lastLabel == "__name__" && lastOp == "=" {
				name = val
			}
			i = e
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentPart(s[j]) {
				j++
			}
			lastLabel, lastOp = string(s[i:j]), ""
			i = j
		case c == '=' || c == '!' || c == '~':
			lastOp += string(c)
			i++
		default:
			i++
		}
	}
	return 0, "", fmt.Errorf("unclosed {")
}

// skipString returns the index after the string literal opening at s[i],
// and its value (escapes kept as written, enough for metric names).
func skipString(s []rune, i int) (int, string, error) {
	q := s[i]
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`' && j+1 < len(s):
			b.WriteRune(s[j+1])
			j++
		case s[j] == q:
			return j + 1, b.String(), nil
		default:
			b.WriteRune(s[j])
		}
	}
	return 0, "", fmt.Errorf("unclosed string at %d", i)
}

// skipNumber skips a number or duration (1, 0.5, 1e-3, 0x1f, 5m30s).
func skipNumber(s []rune, i int) int {
	for i < len(s) {
		c := s[i]
		switch {
		case isIdentPart(c) || c == '.':
			i++
		case (c == '+' || c == '-') && (s[i-1] == 'e' || s[i-1] == 'E') && i+1 < len(s) && isDigit(s[i+1]):
			i++
		default:
			return i
		}
	}
	return i
}

func indexFrom(s []rune, i int, r rune) int {
	for ; i < len(s); i++ {
		if s[i] == r {
			return i
		}
	}
	return -1
}

func skipSpace(s []rune, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func isDigit(c rune) bool { return c >= '0' && c <= '9' }

func isIdentStart(c rune) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentPart(c rune) bool { return isIdentStart(c) || isDigit(c) }

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`bookie_SERVER_STATUS == 0`, []string{"bookie_SERVER_STATUS"}},
		{`up{job=~"magnetar-.*"} == 0`, []string{"up"}},
		{`increase(magnetar_broker_recovered_panics_total[10m]) > 0`, []string{"magnetar_broker_recovered_panics_total"}},
		{`histogram_quantile(0.99,
		    sum by (cluster, instance, le) (rate(x_bucket{stage="receipt"}[5m]))) > 0.1
		  and on (cluster, instance)
		    sum by (cluster, instance) (rate(x_count{stage="receipt"}[5m])) > 1`, []string{"x_bucket", "x_count"}},
		{`group by (job, cluster, instance) (a) unless on (job, instance) b and on (job) (count by (job) (b) > 0)`,
			[]string{"a", "b"}},
		{`sum(rate(a[1m])) by (le) / ignoring(le) group_left sum(b)`, []string{"a", "b"}},
		{`topk(10, sum without (instance) (c)) or vector(0)`, []string{"c"}},
		{`count({__name__="d", job="x"}) + count({__name__=~"e.*"})`, []string{"d"}},
		{`f offset 5m + g @ start() - 1e-3 * Inf + NaN`, []string{"f", "g"}},
		{`label_replace(h, "dst", "$1", "src", "(.*)") # a comment naming i`, []string{"h"}},
		{`rate(j[5m:30s]) > bool 2`, []string{"j"}},
		{`k{a="}"} + l{b='{'}`, []string{"k", "l"}},
		{`max_over_time(m[1h]) and on() count(n)`, []string{"m", "n"}},
	} {
		got, err := metricNames(tc.expr)
		if err != nil {
			t.Errorf("metricNames(%q): %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`a{b="c"`, `a[5m`, `a{b="c}`, `sum by (a`} {
		if _, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q): no error", bad)
		}
	}
}
