// Package tracewait reads a Go execution trace (/debug/pprof/trace, or a
// flight-recorder dump) and says how long goroutines waited to run once
// they could: for each kind of goroutine (the function it started in), the
// delays from runnable (created, unblocked, preempted) to running. It
// backs `magnetar trace waits`.
//
// Why not `go tool trace -pprof=sched`: that profile attributes delays to
// the stack a goroutine was readied at, and the wait that matters on the
// publish path is often a new goroutine's wait for its first run (the
// in-process bookie call, a ledger's delivery goroutine), which is easiest
// read by the goroutine's start function. Focus shows, for one kind, where
// its time went between runs (blocked in a system call, on a channel, ...)
// by state and stack.
package tracewait

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/exp/trace"
)

// Waits are the delays of one kind of goroutine, in milliseconds.
type Waits struct {
	Kind   string    // the function the goroutines started in
	Delays []float64 // runnable -> running, sorted
	Sum    float64   // of Delays
	Runs   []float64 // running spans, sorted
}

func newWaits(kind string, delays, runs []float64) Waits {
	slices.Sort(delays)
	slices.Sort(runs)
	sum := 0.0
	for _, d := range delays {
		sum += d
	}
	return Waits{Kind: kind, Delays: delays, Sum: sum, Runs: runs}
}

// Report is what a trace says about waits.
type Report struct {
	Span  float64 // milliseconds from the first event to the last
	Kinds []Waits // by total delay, largest first
	// Focus is, for goroutines whose kind contains the focus string, the
	// time between runs by "state @ stack" (sorted by total, largest
	// first); empty without a focus.
	Focus []Waits
}

type goroutine struct {
	kind     string
	readyAt  trace.Time // when it last became runnable (0: not runnable)
	runAt    trace.Time // when it last started running
	leftAt   trace.Time // focus: when it last stopped running
	leftWhy  string     // focus: the state and stack it stopped in
	focussed bool
}

// Analyze reads a trace. focus, if not empty, selects goroutine kinds
// (substring of the start function) whose time between runs is broken down.
func Analyze(r io.Reader, focus string) (Report, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return Report{}, fmt.Errorf("read trace: %w", err)
	}
	a := analysis{gs: map[trace.GoID]*goroutine{}, delays: map[string][]float64{}, runs: map[string][]float64{},
		between: map[string][]float64{}, focus: focus}
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Report{}, fmt.Errorf("read trace: %w", err)
		}
		a.event(ev)
	}
	return a.report(), nil
}

type analysis struct {
	gs                    map[trace.GoID]*goroutine
	delays, runs, between map[string][]float64
	focus                 string
	first, last           trace.Time
}

func (a *analysis) event(ev trace.Event) {
	if a.first == 0 {
		a.first = ev.Time()
	}
	a.last = ev.Time()
	if ev.Kind() != trace.EventStateTransition {
		return
	}
	st := ev.StateTransition()
	if st.Resource.Kind != trace.ResourceGoroutine {
		return
	}
	from, to := st.Goroutine()
	g := a.goroutine(st.Resource.Goroutine(), st.Stack)
	now := ev.Time()
	if g.focussed && from != trace.GoRunning && g.leftAt != 0 {
		key := from.String() + " @ " + g.leftWhy
		a.between[key] = append(a.between[key], ms(now-g.leftAt))
		g.leftAt = 0
	}
	switch {
	case to == trace.GoRunnable:
		g.readyAt = now
	case to == trace.GoRunning:
		if g.readyAt != 0 {
			a.delays[g.kind] = append(a.delays[g.kind], ms(now-g.readyAt))
		}
		g.readyAt, g.runAt = 0, now
	}
	if from == trace.GoRunning {
		if g.runAt != 0 {
			a.runs[g.kind] = append(a.runs[g.kind], ms(now-g.runAt))
		}
		if g.focussed {
			g.leftAt, g.leftWhy = now, frames(st.Stack, 3)+" "+st.Reason
		}
	}
}

// goroutine returns id's state, naming its kind by the outermost frame of
// the first stack seen with one (at creation: the start function).
func (a *analysis) goroutine(id trace.GoID, stack trace.Stack) *goroutine {
	g := a.gs[id]
	if g == nil {
		g = &goroutine{}
		a.gs[id] = g
	}
	if g.kind == "" {
		if k := outermost(stack); k != "" {
			g.kind = k
			g.focussed = a.focus != "" && strings.Contains(k, a.focus)
		}
	}
	return g
}

func (a *analysis) report() Report {
	rep := Report{Span: ms(a.last - a.first)}
	for kind, d := range a.delays {
		name := kind
		if name == "" {
			name = "(unknown start)"
		}
		rep.Kinds = append(rep.Kinds, newWaits(name, d, a.runs[kind]))
	}
	for where, d := range a.between {
		rep.Focus = append(rep.Focus, newWaits(where, d, nil))
	}
	bySum := func(x, y Waits) int { return cmp.Compare(y.Sum, x.Sum) }
	slices.SortFunc(rep.Kinds, bySum)
	slices.SortFunc(rep.Focus, bySum)
	return rep
}

func ms(d trace.Time) float64 { return float64(d) / 1e6 }

func outermost(s trace.Stack) string {
	name := ""
	for f := range s.Frames() {
		name = f.Func
	}
	return name
}

func frames(s trace.Stack, n int) string {
	var out []string
	for f := range s.Frames() {
		if len(out) == n {
			break
		}
		out = append(out, f.Func)
	}
	return strings.Join(out, " < ")
}

// Quantile is the q-quantile (0..1) of sorted values (0 when empty).
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

// Format prints the report: at most top kinds (and focus rows).
func Format(w io.Writer, rep Report, top int) {
	fmt.Fprintf(w, "trace span %.0f ms; runnable -> running delays by goroutine start function (ms)\n", rep.Span)
	fmt.Fprintf(w, "%8s %10s %8s %8s %8s %8s %9s  %s\n", "n", "sum", "p50", "p90", "p99", "max", "run p99", "started in")
	for i, k := range rep.Kinds {
		if i == top {
			break
		}
		fmt.Fprintf(w, "%8d %10.1f %8.3f %8.3f %8.3f %8.3f %9.3f  %s\n", len(k.Delays), k.Sum, Quantile(k.Delays, .5),
			Quantile(k.Delays, .9), Quantile(k.Delays, .99), Quantile(k.Delays, 1), Quantile(k.Runs, .99), k.Kind)
	}
	if len(rep.Focus) == 0 {
		return
	}
	fmt.Fprintf(w, "\nfocus: time between runs by state and where it stopped (ms)\n")
	fmt.Fprintf(w, "%8s %10s %8s %8s %8s  %s\n", "n", "sum", "p50", "p99", "max", "state @ stack")
	for i, f := range rep.Focus {
		if i == top {
			break
		}
		fmt.Fprintf(w, "%8d %10.1f %8.3f %8.3f %8.3f  %s\n", len(f.Delays), f.Sum, Quantile(f.Delays, .5),
			Quantile(f.Delays, .99), Quantile(f.Delays, 1), f.Kind)
	}
}
