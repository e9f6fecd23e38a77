package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Where the time went: for the slowest run of each scenario, the report
// lists what happened between the fault and the first acknowledgement
// after the longest gap: the harness's own steps (kill, restart, cut,
// heal), the servers' events an operator would look at (a bundle released
// or acquired, a ledger recovered, an ensemble changed, a session lost, a
// bookie turned read-only, a lookup held) and the client's attempts to
// reconnect the producer that waited longest. Issue 40 asks for it: it
// shows whether detection, re-placement, the lookup or the client's own
// backoff took the time.

// Moment is one line of a timeline.
type Moment struct {
	At    time.Time
	Where string // "chaos", a server (br2, bk3, proxy) or "client"
	What  string
	Count int // > 1: the same event repeated, first shown
}

// Gap is the longest time one producer of a run went without an
// acknowledgement.
type Gap struct {
	Topic    string
	From, To time.Time
}

// longestGapOf finds the run's longest gap over every topic (as
// Verdict.MaxUnavailable measures it).
func longestGapOf(res *Results) Gap {
	var g Gap
	var longest int64 = -1
	for _, t := range res.Topics {
		consider := func(from, to int64) {
			if to-from > longest {
				longest = to - from
				g = Gap{Topic: t.Spec.Name, From: time.UnixMilli(from), To: time.UnixMilli(to)}
			}
		}
		for i := 1; i < len(t.Acked); i++ {
			consider(t.Acked[i-1].At, t.Acked[i].At)
		}
		if n := len(t.Acked); n > 0 && res.StoppedAt > 0 {
			consider(t.Acked[n-1].At, res.StoppedAt)
		}
	}
	return g
}

// faultsFile holds a run's harness steps (Run.Logf), one per line:
// RFC 3339 time, a tab, the text.
const faultsFile = "faults.log"

func writeFaults(dir string, ms []Moment) error {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s\t%s\n", m.At.UTC().Format(time.RFC3339Nano), m.What)
	}
	return os.WriteFile(filepath.Join(dir, faultsFile), []byte(b.String()), 0o644)
}

func readFaults(dir string) ([]Moment, error) {
	raw, err := os.ReadFile(filepath.Join(dir, faultsFile))
	if err != nil {
		return nil, err
	}
	var out []Moment
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		at, text, ok := strings.Cut(line, "\t")
		t, err := time.Parse(time.RFC3339Nano, at)
		if !ok || err != nil {
			continue
		}
		out = append(out, Moment{At: t, Where: "chaos", What: text})
	}
	return out, nil
}

// interesting are the server events a timeline keeps at level INFO (WARN
// and ERROR lines are always kept); the rest of INFO is routine.
var interesting = []string{"bundle", "ledger recovered", "ensemble", "session", "read-only", "readonly",
	"leader", "replac", "fenc", "unload", "shut", "stopp", "coordinator", "lookup", "listening", "serving"}

const (
	maxMoments   = 40
	startMarker  = "==== chaos: start "
	injectMarker = "workload running; injecting"
)

// Timeline builds the slowest gap's timeline from a kept run directory
// and the harness's steps: from the first fault step (or half a second
// before the gap when there is none) to the gap's end.
func Timeline(dir string, faults []Moment, gap Gap) []Moment {
	// Only the steps from the injection on are the fault's.
	for i, f := range faults {
		if f.What == injectMarker {
			faults = faults[i+1:]
			break
		}
	}
	from := gap.From.Add(-500 * time.Millisecond)
	if len(faults) > 0 {
		from = minTime(from, faults[0].At)
	}
	to := gap.To.Add(100 * time.Millisecond)
	var out []Moment
	for _, f := range faults {
		if !f.At.After(to) {
			out = append(out, f)
		}
	}
	// Servers and the client from a second before the gap: what happened
	// long before it (a fault's first minutes) did not hold the producer.
	evFrom := maxTime(from, gap.From.Add(-time.Second))
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, path := range logs {
		name := strings.TrimSuffix(filepath.Base(path), ".log")
		switch {
		case name == "workload":
			out = append(out, scanLog(path, "client", evFrom, to, clientFilter(gap.Topic))...)
		case strings.HasPrefix(name, "br"), strings.HasPrefix(name, "bk"), name == "proxy", strings.HasPrefix(name, "remote"):
			out = append(out, scanLog(path, name, evFrom, to, serverFilter)...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	out = dedupe(out)
	if len(out) > maxMoments {
		out = append(out[:maxMoments-1], Moment{At: out[len(out)-1].At, Where: "…",
			What: fmt.Sprintf("%d more lines (in %s)", len(out)-maxMoments+1, dir)})
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// logLine is a slog text line, parsed: its time, level, message and the
// rest of its attributes.
type logLine struct {
	at         time.Time
	level, msg string
	attrs      string
}

// parseLogLine parses `time=... level=... msg="..." k=v ...`.
func parseLogLine(s string) (logLine, bool) {
	rest, ok := strings.CutPrefix(s, "time=")
	if !ok {
		return logLine{}, false
	}
	ts, rest, _ := strings.Cut(rest, " ")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return logLine{}, false
	}
	rest, ok = strings.CutPrefix(rest, "level=")
	if !ok {
		return logLine{}, false
	}
	level, rest, _ := strings.Cut(rest, " ")
	rest, ok = strings.CutPrefix(rest, "msg=")
	if !ok {
		return logLine{}, false
	}
	var msg string
	if strings.HasPrefix(rest, `"`) {
		end := closingQuote(rest)
		msg, rest = strings.ReplaceAll(rest[1:end], `\"`, `"`), rest[min(end+1, len(rest)):]
	} else {
		msg, rest, _ = strings.Cut(rest, " ")
	}
	return logLine{at: at, level: level, msg: msg, attrs: strings.TrimSpace(rest)}, true
}

// closingQuote is the index of the quote ending the quoted string s
// starts with (len(s)-1 when unterminated).
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(s) - 1
}

func serverFilter(l logLine) bool {
	if strings.HasPrefix(l.msg, "trace:") {
		return false
	}
	if l.level == "WARN" || l.level == "ERROR" {
		return true
	}
	low := strings.ToLower(l.msg)
	for _, k := range interesting {
		if strings.Contains(low, k) {
			return true
		}
	}
	return false
}

// clientFilter keeps the Go client's lines about the waiting topic's
// producer.
func clientFilter(topic string) func(logLine) bool {
	return func(l logLine) bool {
		ofTopic := strings.Contains(l.attrs+" ", "topic="+topic+" ")
		return ofTopic && (strings.Contains(l.attrs, "producer") || strings.Contains(strings.ToLower(l.msg), "producer"))
	}
}

// scanLog reads one log's lines in [from, to] that keep passes, and the
// harness's process-start markers.
func scanLog(path, where string, from, to time.Time, keep func(logLine) bool) []Moment {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []Moment
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s := sc.Text()
		if rest, ok := strings.CutPrefix(s, startMarker); ok {
			if _, ts, ok := strings.Cut(rest, " "); ok {
				if at, err := time.Parse(time.RFC3339Nano, ts); err == nil && !at.Before(from) && !at.After(to) {
					out = append(out, Moment{At: at, Where: where, What: "process started"})
				}
			}
			continue
		}
		l, ok := parseLogLine(s)
		if !ok || l.at.Before(from) || l.at.After(to) || !keep(l) {
			continue
		}
		what := l.msg
		if l.level == "WARN" || l.level == "ERROR" {
			what = l.level + " " + what
		}
		if l.attrs != "" {
			what += " " + shorten(l.attrs, 160)
		}
		out = append(out, Moment{At: l.at, Where: where, What: what})
	}
	return out
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// dedupe folds repeats of one event from one place (the first stays, with
// a count): a client retrying every 100 ms would fill the timeline.
func dedupe(ms []Moment) []Moment {
	seen := map[string]int{}
	var out []Moment
	for _, m := range ms {
		key := m.Where + "\x00" + eventKey(m.What)
		if i, ok := seen[key]; ok && m.Where != "chaos" {
			out[i].Count++
			continue
		}
		m.Count = 1
		seen[key] = len(out)
		out = append(out, m)
	}
	return out
}

// eventKey is an event's message without attributes that change from one
// repeat to the next (request ids, addresses of new connections).
func eventKey(what string) string {
	if i := strings.IndexByte(what, '='); i > 0 {
		if j := strings.LastIndexByte(what[:i], ' '); j > 0 {
			return what[:j]
		}
	}
	return what
}

// Slowest is the timeline of a scenario's slowest run.
type Slowest struct {
	Seed        int64
	Unavailable time.Duration
	Gap         Gap
	Moments     []Moment
}

// writeTimeline renders one Slowest: offsets from the first line.
func writeTimeline(b *strings.Builder, name string, s *Slowest) {
	fmt.Fprintf(b, "\n### %s, seed %d: %.1f s on %s\n\n", name, s.Seed, s.Unavailable.Seconds(), s.Gap.Topic)
	if len(s.Moments) == 0 {
		b.WriteString("No events found (logs not kept).\n")
		return
	}
	ms := append([]Moment{
		{At: s.Gap.From, Where: "client", What: "last acknowledgement before the gap"},
		{At: s.Gap.To, Where: "client", What: "first acknowledgement after the gap"},
	}, s.Moments...)
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].At.Before(ms[j].At) })
	origin := s.Moments[0].At
	b.WriteString("```\n")
	for _, m := range ms {
		what := m.What
		if m.Count > 1 {
			what += fmt.Sprintf(" (x%d)", m.Count)
		}
		fmt.Fprintf(b, "%+7.2f s  %-7s %s\n", m.At.Sub(origin).Seconds(), m.Where, what)
	}
	b.WriteString("```\n")
}

// TimelineMinimum: scenarios whose slowest run was unavailable for less
// get no timeline in the report.
const TimelineMinimum = time.Second

// writeTimelines is the report's "Where the time went" section.
func writeTimelines(b *strings.Builder, slowest map[string]*Slowest) {
	var names []string
	for _, s := range Scenarios {
		if sl := slowest[s.Name]; sl != nil && sl.Unavailable >= TimelineMinimum {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Where the time went\n\nFor each scenario's slowest run (%s or more): the harness's steps (chaos), the servers' "+
		"events an operator would look at (WARN and ERROR lines, bundles, ledgers, ensembles, sessions, leaders) and the "+
		"Go client's lines about the producer that waited longest, from the fault to the first acknowledgement after the "+
		"gap; repeats are folded (xN). Times are seconds from the first line.\n", TimelineMinimum)
	for _, n := range names {
		writeTimeline(b, n, slowest[n])
	}
}

// timelineOfDir rebuilds a kept run's Slowest from its directory (the
// -chaos.timelines mode): its results, its faults.log, or else the
// harness's lines for it in testLog.
func timelineOfDir(dir string, seed int64, testLog map[string][]Moment) (*Slowest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return nil, err
	}
	var res Results
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	gap := longestGapOf(&res)
	faults, err := readFaults(dir)
	if err != nil {
		faults = testLog[filepath.Base(dir)]
	}
	return &Slowest{Seed: seed, Unavailable: gap.To.Sub(gap.From), Gap: gap, Moments: Timeline(dir, faults, gap)}, nil
}

// parseTestLog reads the harness's steps from a `go test -v` log of an
// earlier invocation (lines "chaos_test.go:NN: 15:04:05.000 [scenario seed
// N] text"), for runs kept before faults.log existed; day gives the date
// the clock times fall on (UTC). Keys are run directory names.
func parseTestLog(path string, day time.Time) (map[string][]Moment, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]Moment{}
	for _, line := range strings.Split(string(raw), "\n") {
		_, rest, ok := strings.Cut(line, ".go:")
		if !ok {
			continue
		}
		_, rest, _ = strings.Cut(rest, ": ")
		clock, rest, _ := strings.Cut(rest, " [")
		tag, text, ok := strings.Cut(rest, "] ")
		name, seed, ok2 := strings.Cut(tag, " seed ")
		c, err := time.Parse("15:04:05.000", clock)
		if !ok || !ok2 || err != nil {
			continue
		}
		at := time.Date(day.Year(), day.Month(), day.Day(), c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), time.UTC)
		key := name + "-" + seed
		out[key] = append(out[key], Moment{At: at, Where: "chaos", What: text})
	}
	return out, nil
}

// Timelines builds the "Where the time went" section from a directory of
// kept runs (named scenario-seed), taking each scenario's slowest.
func Timelines(runsDir, testLog string) (string, error) {
	dirs, err := os.ReadDir(runsDir)
	if err != nil {
		return "", err
	}
	slowest := map[string]*Slowest{}
	var logSteps map[string][]Moment
	for _, d := range dirs {
		i := strings.LastIndexByte(d.Name(), '-')
		if !d.IsDir() || i < 0 {
			continue
		}
		var seed int64
		if _, err := fmt.Sscan(d.Name()[i+1:], &seed); err != nil {
			continue
		}
		dir := filepath.Join(runsDir, d.Name())
		raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			continue // a run that did not get as far as results
		}
		var res Results
		if err := json.Unmarshal(raw, &res); err != nil {
			return "", fmt.Errorf("%s: %w", dir, err)
		}
		gap := longestGapOf(&res)
		name := d.Name()[:i]
		if cur := slowest[name]; cur != nil && cur.Unavailable >= gap.To.Sub(gap.From) {
			continue
		}
		if logSteps == nil && testLog != "" {
			if logSteps, err = parseTestLog(testLog, time.UnixMilli(res.StartedAt).UTC()); err != nil {
				return "", err
			}
		}
		sl, err := timelineOfDir(dir, seed, logSteps)
		if err != nil {
			return "", err
		}
		slowest[name] = sl
	}
	var b strings.Builder
	writeTimelines(&b, slowest)
	return b.String(), nil
}
