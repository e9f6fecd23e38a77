package chaos

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Row aggregates a scenario's runs.
type Row struct {
	Scenario       *Scenario
	Runs, Failed   int
	Acked          int
	Lost           int
	Duplicated     int
	DupNoDedup     int
	Reordered      int
	Phantom        int
	ReaderMismatch int
	MaxUnavailable time.Duration
	// Each run's unavailability by quorum class and its longest wait for a
	// delivery, for the availability table's p50 and max.
	Spare, NoSpare, Undelivered []time.Duration
	Recreated                   int
	// The transaction pipeline's (txn-pipeline): transactions committed
	// and failed, aborted messages delivered.
	TxnCommitted, TxnFailed, AbortedDelivered int
	Seeds                                     []int64
	FailedSeeds                               []int64
}

// Report is a whole chaos invocation.
type Report struct {
	Started  time.Time
	Took     time.Duration
	Commit   string
	Command  string
	LogsDir  string
	Budget   string // why runs stopped early, if they did
	Runs     []*Run
	Failures []string // "scenario seed: what, logs in dir"
	Slow     []string // runs that kept every guarantee but were unavailable longer than SlowRun
	// Slowest is each scenario's slowest run's timeline (NoteSlowest).
	Slowest map[string]*Slowest
	// Parts is how many saved parts the report was merged from (0: it
	// is one invocation's; LoadParts).
	Parts int
}

// Slower reports whether r is its scenario's slowest run so far.
func (rep *Report) Slower(r *Run) bool {
	v := r.Verdict
	cur := rep.Slowest[r.Scenario.Name]
	return v.Gap.Topic != "" && (cur == nil || v.MaxUnavailable > cur.Unavailable)
}

// NoteSlowest keeps r's timeline when r is its scenario's slowest run so
// far; it reads r's logs, so it runs before they are removed.
func (rep *Report) NoteSlowest(r *Run) {
	if !rep.Slower(r) {
		return
	}
	v := r.Verdict
	if rep.Slowest == nil {
		rep.Slowest = map[string]*Slowest{}
	}
	rep.Slowest[r.Scenario.Name] = &Slowest{Seed: r.Seed, Unavailable: v.MaxUnavailable, Gap: v.Gap,
		Moments: Timeline(r.Dir, r.steps, v.Gap)}
}

// SlowRun: a run with a longer unavailability keeps its logs and is listed.
const SlowRun = 30 * time.Second

// Add records a finished run.
func (rep *Report) Add(r *Run) {
	rep.Runs = append(rep.Runs, r)
	if !r.Failed() && r.Verdict.MaxUnavailable > SlowRun {
		rep.Slow = append(rep.Slow, fmt.Sprintf("%s seed %d: %.1f s (logs: %s)", r.Scenario.Name, r.Seed, r.Verdict.MaxUnavailable.Seconds(), r.Dir))
	}
	if r.Failed() {
		what := "guarantee broken: " + strings.Join(r.Verdict.Problems, "; ")
		if r.Err != nil {
			what = r.Err.Error()
			if i := strings.IndexByte(what, '\n'); i > 0 {
				what = what[:i]
			}
		}
		rep.Failures = append(rep.Failures, fmt.Sprintf("%s seed %d: %s (logs: %s)", r.Scenario.Name, r.Seed, what, r.Dir))
	}
}

// Rows aggregates the runs per scenario, in Scenarios order.
func (rep *Report) Rows() []*Row {
	by := map[string]*Row{}
	for _, r := range rep.Runs {
		row := by[r.Scenario.Name]
		if row == nil {
			row = &Row{Scenario: r.Scenario}
			by[r.Scenario.Name] = row
		}
		v := r.Verdict
		row.Runs++
		row.Seeds = append(row.Seeds, r.Seed)
		if r.Failed() {
			row.Failed++
			row.FailedSeeds = append(row.FailedSeeds, r.Seed)
		}
		row.Acked += v.Acked
		row.Lost += v.Lost
		row.Duplicated += v.Duplicated
		row.DupNoDedup += v.DupNoDedup
		row.Reordered += v.Reordered
		row.Phantom += v.Phantom
		row.ReaderMismatch += v.ReaderMismatch
		row.MaxUnavailable = max(row.MaxUnavailable, v.MaxUnavailable)
		row.Spare = append(row.Spare, v.UnavailableSpare)
		row.NoSpare = append(row.NoSpare, v.UnavailableNoSpare)
		row.Undelivered = append(row.Undelivered, v.MaxUndelivered)
		row.Recreated += v.Recreated
		row.TxnCommitted += v.TxnCommitted
		row.TxnFailed += v.TxnFailed
		row.AbortedDelivered += v.AbortedDelivered
	}
	var out []*Row
	for _, s := range Scenarios {
		if row := by[s.Name]; row != nil {
			out = append(out, row)
		}
	}
	return out
}

// seedList prints seeds compactly: 1-20 or 1,4,9.
func seedList(seeds []int64) string {
	if len(seeds) == 0 {
		return "-"
	}
	s := append([]int64{}, seeds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, fmt.Sprint(s[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Markdown renders docs/chaos/REPORT.md.
func (rep *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Chaos report\n\n")
	if rep.Parts > 0 {
		fmt.Fprintf(&b, "Merged by `make chaos-merge` from %d part(s), each written by `%s` (tools/chaos): %s; %d runs in %s in all.\n",
			rep.Parts, rep.Command, rep.Commit, len(rep.Runs), rep.Took.Round(time.Second))
	} else {
		fmt.Fprintf(&b, "Written by `%s` (tools/chaos) on %s at commit %s; %d runs in %s.\n",
			rep.Command, rep.Started.UTC().Format("2006-01-02 15:04 MST"), rep.Commit, len(rep.Runs), rep.Took.Round(time.Second))
	}
	if rep.Budget != "" {
		fmt.Fprintf(&b, "%s\n", rep.Budget)
	}
	b.WriteString(`
Cluster: a 3-node ZooKeeper ensemble, 4 bookies, 3 brokers and the proxy, each process in its own network
namespace on a test bridge (198.18.0.0/24, internal/netlab); links are cut with blackhole routes. Sessions
are 4 s. Topics: 3 in public/chaos-d (E=3, Qw=3, Qa=2, deduplication on) and 3 in public/chaos-n (E=3, Qw=2,
Qa=2, deduplication off); per namespace 2 through the brokers, 1 through the proxy. Each topic has one
producer (a send every 20 ms, sequence ids set), Exclusive, Failover, Shared and Key_Shared subscriptions
(1, 2, 2, 2 consumers, acknowledging) created before the first send, and 2 readers from the earliest message.
After the fault, everything is healed, every topic must make progress again, the producers stop and the
consumers drain; then the checker (tools/chaos/check.go) verifies: every acknowledged message reached every
subscription and reader (lost), per-producer order on Exclusive/Failover/readers and per key on Key_Shared
(reordered), no sequence stored twice where deduplication is on (duplicated), nothing received that was
never sent or corrupt (phantom), both readers saw the same ids in the same order (reader mismatch).
Unavailability is the longest time any producer went without an acknowledgement. "Consumers re-created" counts
consumers and readers the workload closed and created again in the drain after 10 s with nothing received while
they lacked acknowledged messages: the Go client (v0.19) registers a consumer's handler only after the SUBSCRIBE
answer, so a CLOSE_CONSUMER sent right after it (a bundle unloaded at that moment) is dropped and the consumer
waits for ever; a re-created one resumes from its subscription's mark-delete position (a reader from its last
message), so the checker still proves the broker kept everything. The geo scenarios (cut-remote, kill-remote)
add a second cluster, c2 (one standalone on its own host, registered with c1 in both configuration stores),
and 2 more topics in public/chaos-g (E=3, Qw=3, Qa=2, deduplication on in both clusters) replicated from c1 to
c2, where an Exclusive subscription made before the first send must receive every message acknowledged in
c1, in order, stored once in c2. Linearizability of the metadata operations is checked separately, with
porcupine, in the metadata store tests.

| scenario | runs | failed | acknowledged | lost | duplicated (dedup) | reordered | phantom | reader mismatch | dup. without dedup (allowed) | consumers re-created | longest unavailability | seeds |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
`)
	for _, row := range rep.Rows() {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.1f s | %s |\n", row.Scenario.Name, row.Runs, row.Failed,
			row.Acked, row.Lost, row.Duplicated, row.Reordered, row.Phantom, row.ReaderMismatch, row.DupNoDedup,
			row.Recreated, row.MaxUnavailable.Seconds(), seedList(row.Seeds))
	}
	writeTxnRows(&b, rep.Rows())
	writeAvailability(&b, rep.Rows())
	writeTimelines(&b, rep.Slowest)
	b.WriteString("\n## Scenarios\n\n")
	for _, row := range rep.Rows() {
		fmt.Fprintf(&b, "- **%s**: %s\n", row.Scenario.Name, row.Scenario.Doc)
	}
	b.WriteString("\n## Failing runs\n\n")
	if len(rep.Failures) == 0 {
		b.WriteString("None.\n")
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	fmt.Fprintf(&b, "\n## Runs unavailable for over %s\n\n", SlowRun)
	if len(rep.Slow) == 0 {
		b.WriteString("None.\n")
	}
	for _, f := range rep.Slow {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	fmt.Fprintf(&b, "\nReproduce one: `make chaos CHAOS_SCENARIOS=<scenario> CHAOS_FIRST_SEED=<seed> CHAOS_SEEDS=1`. "+
		"Logs of failing runs (the run's workload log and results, every server's log) are kept under %s.\n", rep.LogsDir)
	return b.String()
}

// writeAvailability adds, per scenario, the p50 and max over its runs of
// each run's longest unavailability, split by the topics' quorums, and of
// the longest a subscription or reader waited for an acknowledged message.
func writeAvailability(b *strings.Builder, rows []*Row) {
	b.WriteString("\n## Availability\n\nPer scenario, over its runs: the longest time a producer went without an " +
		"acknowledgement on topics whose write set has a bookie to spare (public/chaos-d, Qw=3 > Qa=2) and on topics " +
		"where it has none (public/chaos-n, Qw=Qa=2), and the longest time a subscription or reader went without a " +
		"delivery while an acknowledged message was still to come to it; p50 is the median run's figure. Bound: issue " +
		"40's limit for the two producer figures (Qw > Qa / Qw = Qa), where it sets one, and whether every run kept it.\n\n" +
		"| scenario | unavailable, Qw > Qa: p50 | max | unavailable, Qw = Qa: p50 | max | without a delivery: p50 | max | bound |\n" +
		"|---|---|---|---|---|---|---|---|\n")
	for _, row := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Scenario.Name,
			secs(quantile(row.Spare, 0.5)), secs(quantile(row.Spare, 1)), secs(quantile(row.NoSpare, 0.5)),
			secs(quantile(row.NoSpare, 1)), secs(quantile(row.Undelivered, 0.5)), secs(quantile(row.Undelivered, 1)),
			boundCell(row))
	}
}

// boundCell is the scenario's bound and whether its runs kept it.
func boundCell(row *Row) string {
	bd := row.Scenario.Bound
	if bd == nil {
		return "-"
	}
	kept := "kept"
	if quantile(row.Spare, 1) > bd.Spare || quantile(row.NoSpare, 1) > bd.NoSpare {
		kept = "**exceeded**"
	}
	return fmt.Sprintf("%.0f / %.0f s: %s", bd.Spare.Seconds(), bd.NoSpare.Seconds(), kept)
}

// quantile is the q-quantile of ds by the nearest rank (0 for none).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// writeTxnRows adds the transaction pipeline's figures (txn.go) for the
// scenarios that ran it.
func writeTxnRows(b *strings.Builder, rows []*Row) {
	header := false
	for _, row := range rows {
		if !row.Scenario.Txn {
			continue
		}
		if !header {
			b.WriteString("\nTransactions (txn.go): a Shared subscription of the first deduplicated topic A is copied to B and C, " +
				"a batch of up to 10 messages per transaction (sends to B and C and the acknowledgements on A). After the drain " +
				"a reader reads B and C whole: each message A's producer had acknowledged must be there exactly once (missing: " +
				"lost; twice: duplicated), and every message the live consumers of B and C received must be that very message " +
				"(an aborted transaction's message delivered would not be).\n\n" +
				"| scenario | transactions committed | failed (aborted) | aborted messages delivered |\n|---|---|---|---|\n")
			header = true
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d |\n", row.Scenario.Name, row.TxnCommitted, row.TxnFailed, row.AbortedDelivered)
	}
}
