package chaos

// The checker: what a run's Results must satisfy once the faults are
// healed and the workload drained.
//
//  1. Every acknowledged message is received by every subscription (all
//     were created before the first send) and by every reader: no loss.
//  2. Per-producer order on Exclusive and Failover, per key on
//     Key_Shared, and on readers: the first receipt of each sequence
//     comes after the first receipts of all lower ones that arrived.
//     (Redeliveries of something already received are skipped: at-least-
//     once delivery allows them. Shared gives no order.)
//  3. Where deduplication is on, no sequence is stored twice: all
//     receipts and the acknowledgement of a sequence carry one message id.
//  4. Nothing is received that was never sent, and payloads are intact
//     (producer, key and CRC match).
//  5. The two readers of a topic see the same message ids in the same
//     order (one is a prefix of the other).
//  6. The longest time with no acknowledgement on some topic: the longest
//     unavailability a producer saw.
//
// Linearizability of the metadata operations themselves is checked
// elsewhere, with porcupine, in the metadata store tests.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// maxProblems bounds the problems a Verdict lists.
const maxProblems = 20

// Verdict is what the checker found in one run.
type Verdict struct {
	Topics         int
	Acked          int
	Lost           int // acknowledged, missing from some subscription or reader
	Duplicated     int // stored twice where dedup is on
	DupNoDedup     int // stored twice where dedup is off (allowed; reported)
	Reordered      int
	Phantom        int // received but never sent, or corrupt
	ReaderMismatch int
	MaxUnavailable time.Duration
	// Gap is where MaxUnavailable was: the topic and its two acknowledgements.
	Gap Gap
	// The same split by the topics' quorums: where the write set has a
	// bookie to spare (Qw > Qa) and where it has none (Qw == Qa).
	UnavailableSpare, UnavailableNoSpare time.Duration
	// MaxUndelivered is the longest a subscription or reader went without
	// a delivery while it lacked an acknowledged message.
	MaxUndelivered time.Duration
	Recreated      int // consumers and readers the workload re-created in the drain (a Go client race)
	// The transaction pipeline (txn.go): transactions committed and
	// failed (aborted), and messages of aborted transactions delivered.
	TxnCommitted, TxnFailed int
	AbortedDelivered        int
	Drained                 bool
	Problems                []string
}

// OK reports whether the run kept every guarantee.
func (v *Verdict) OK() bool {
	return v.Lost == 0 && v.Duplicated == 0 && v.Reordered == 0 && v.Phantom == 0 && v.ReaderMismatch == 0 &&
		v.AbortedDelivered == 0
}

func (v *Verdict) problem(format string, args ...any) {
	if len(v.Problems) < maxProblems {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// Check checks one run's results.
func Check(res *Results) Verdict {
	v := Verdict{Topics: len(res.Topics), Drained: res.Drained, Gap: longestGapOf(res)}
	for _, t := range res.Topics {
		for _, e := range t.Errors {
			v.problem("%s: %s", t.Spec.Name, e)
		}
		v.Acked += len(t.Acked)
		v.Recreated += t.Recreated
		checkLoss(&v, t)
		checkDuplicates(&v, t)
		checkOrder(&v, t)
		checkPhantoms(&v, t)
		checkReaders(&v, t)
		gap := longestGap(t, res.StoppedAt)
		v.MaxUnavailable = max(v.MaxUnavailable, gap)
		switch {
		case t.Spec.Qw > t.Spec.Qa:
			v.UnavailableSpare = max(v.UnavailableSpare, gap)
		case t.Spec.Qw > 0:
			v.UnavailableNoSpare = max(v.UnavailableNoSpare, gap)
		}
		_, ls := lists(t)
		for _, l := range ls {
			v.MaxUndelivered = max(v.MaxUndelivered, longestUndelivered(t.Acked, l))
		}
	}
	if res.Txn != nil {
		var source *TopicRecord
		for _, t := range res.Topics {
			if t.Spec.Name == res.Txn.Spec.Source {
				source = t
			}
		}
		if source == nil {
			v.problem("transactions: source %s not among the topics", res.Txn.Spec.Source)
		}
		checkTxn(&v, res.Txn, source)
	}
	return v
}

// lists names every receipt list of a topic: subscriptions (the one in
// the cluster it replicates to too), then readers.
func lists(t *TopicRecord) (names []string, out [][]Receipt) {
	for _, s := range subscriptionsOf(t.Spec) {
		names = append(names, s.Name)
		out = append(out, t.Subs[s.Name])
	}
	for i, r := range t.Readers {
		names = append(names, fmt.Sprintf("reader-%d", i))
		out = append(out, r)
	}
	return names, out
}

func checkLoss(v *Verdict, t *TopicRecord) {
	names, ls := lists(t)
	got := make([]map[int64]bool, len(ls))
	for i, l := range ls {
		got[i] = map[int64]bool{}
		for _, r := range l {
			got[i][r.Seq] = true
		}
	}
	for _, a := range t.Acked {
		for i := range ls {
			if !got[i][a.Seq] {
				v.Lost++
				v.problem("%s: acknowledged sequence %d (id %s) never reached %s", t.Spec.Name, a.Seq, a.ID, names[i])
				break
			}
		}
	}
}

// checkDuplicates counts sequences stored at more than one position: in
// the topic's own cluster (the producer's receipts, its subscriptions and
// readers), and separately in the cluster it replicates to, whose
// positions are its own.
func checkDuplicates(v *Verdict, t *TopicRecord) {
	local := map[int64]map[string]bool{}
	for _, a := range t.Acked {
		if !strings.HasPrefix(a.ID, "-1:-1:") { // a receipt for a resend deduplicated: no position of its own
			addID(local, a.Seq, a.ID)
		}
	}
	names, ls := lists(t)
	for i, l := range ls {
		if names[i] == GeoSubscription {
			continue
		}
		for _, r := range l {
			if r.Bad == "" {
				addID(local, r.Seq, r.ID)
			}
		}
	}
	countDuplicates(v, t, "", local)
	if t.Spec.Remote == "" {
		return
	}
	remote := map[int64]map[string]bool{}
	for _, r := range t.Subs[GeoSubscription] {
		if r.Bad == "" {
			addID(remote, r.Seq, r.ID)
		}
	}
	countDuplicates(v, t, " in "+RemoteCluster, remote)
}

func addID(ids map[int64]map[string]bool, seq int64, id string) {
	if ids[seq] == nil {
		ids[seq] = map[string]bool{}
	}
	ids[seq][id] = true
}

// countDuplicates counts the sequences of ids stored more than once.
func countDuplicates(v *Verdict, t *TopicRecord, where string, ids map[int64]map[string]bool) {
	seqs := make([]int64, 0, len(ids))
	for s := range ids {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, s := range seqs {
		if len(ids[s]) < 2 {
			continue
		}
		if t.Spec.Dedup {
			v.Duplicated++
			v.problem("%s (dedup on)%s: sequence %d stored %d times: %v", t.Spec.Name, where, s, len(ids[s]), keys(ids[s]))
		} else {
			v.DupNoDedup++
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ordered counts first receipts that arrive after a higher sequence of the
// same stream (group keys a receipt to its ordered stream).
func ordered(v *Verdict, where string, l []Receipt, group func(Receipt) string) {
	seen := map[int64]bool{}
	last := map[string]int64{}
	for _, r := range l {
		if r.Bad != "" || seen[r.Seq] {
			continue
		}
		seen[r.Seq] = true
		g := group(r)
		if prev, ok := last[g]; ok && r.Seq < prev {
			v.Reordered++
			v.problem("%s: sequence %d first received after %d", where, r.Seq, prev)
			continue
		}
		last[g] = r.Seq
	}
}

func checkOrder(v *Verdict, t *TopicRecord) {
	one := func(Receipt) string { return "" }
	ordered(v, t.Spec.Name+" exclusive", t.Subs["exclusive"], one)
	ordered(v, t.Spec.Name+" failover", t.Subs["failover"], one)
	ordered(v, t.Spec.Name+" key_shared", t.Subs["key_shared"], func(r Receipt) string { return r.Key })
	if t.Spec.Remote != "" {
		ordered(v, t.Spec.Name+" "+GeoSubscription+" in "+RemoteCluster, t.Subs[GeoSubscription], one)
	}
	for i, r := range t.Readers {
		ordered(v, fmt.Sprintf("%s reader-%d", t.Spec.Name, i), r, one)
	}
}

func checkPhantoms(v *Verdict, t *TopicRecord) {
	names, ls := lists(t)
	for i, l := range ls {
		for _, r := range l {
			switch {
			case r.Bad != "":
				v.Phantom++
				v.problem("%s %s: bad message %s: %s", t.Spec.Name, names[i], r.ID, r.Bad)
			case r.Seq < 0 || r.Seq >= t.Sent:
				v.Phantom++
				v.problem("%s %s: sequence %d received, only 0..%d sent", t.Spec.Name, names[i], r.Seq, t.Sent-1)
			}
		}
	}
}

// firstIDs is a receipt list's message ids in order of first arrival.
func firstIDs(l []Receipt) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range l {
		if !seen[r.ID] {
			seen[r.ID] = true
			out = append(out, r.ID)
		}
	}
	return out
}

func checkReaders(v *Verdict, t *TopicRecord) {
	if len(t.Readers) < 2 {
		return
	}
	a := firstIDs(t.Readers[0])
	for i := 1; i < len(t.Readers); i++ {
		b := firstIDs(t.Readers[i])
		for j := range min(len(a), len(b)) {
			if a[j] != b[j] {
				v.ReaderMismatch++
				v.problem("%s: reader-0 and reader-%d differ at message %d: %s vs %s", t.Spec.Name, i, j, a[j], b[j])
				break
			}
		}
	}
}

// longestGap is the longest time between acknowledgements of a topic's
// producer, including from its last one to the workload's stop.
// longestUndelivered is the longest time between two consecutive
// receipts of one subscription or reader that began with a backlog: more
// messages acknowledged by then than it had received. Receipts without a
// time (a workload older than the field) count nothing.
func longestUndelivered(acked []Ack, receipts []Receipt) time.Duration {
	ackTimes := make([]int64, len(acked))
	for i, a := range acked {
		ackTimes[i] = a.At
	}
	slices.Sort(ackTimes)
	var longest int64
	seen := map[int64]bool{}
	for i := 1; i < len(receipts); i++ {
		seen[receipts[i-1].Seq] = true // redeliveries count once
		prev, next := receipts[i-1].At, receipts[i].At
		if prev == 0 || next <= prev {
			continue
		}
		ackedByThen, _ := slices.BinarySearch(ackTimes, prev+1)
		if ackedByThen > len(seen) { // something acknowledged by then was still to come
			longest = max(longest, next-prev)
		}
	}
	return time.Duration(longest) * time.Millisecond
}

func longestGap(t *TopicRecord, stoppedAt int64) time.Duration {
	var gap int64
	for i := 1; i < len(t.Acked); i++ {
		gap = max(gap, t.Acked[i].At-t.Acked[i-1].At)
	}
	if n := len(t.Acked); n > 0 && stoppedAt > 0 {
		gap = max(gap, stoppedAt-t.Acked[n-1].At)
	}
	return time.Duration(gap) * time.Millisecond
}
