package main

// The transactions section (issue 39): "transactional publish throughput
// and p99 (transactions of 1, 10 and 100 messages) beside plain publish in
// the same run; goal at least 0.7 x plain throughput with 100-message
// transactions". One durable standalone with transactionCoordinatorEnabled
// and txnCoordinators coordinators (the cluster default of
// initialize-cluster-metadata; the Go client serves each coordinator's
// requests one at a time, so one coordinator would measure the client);
// txnClients processes of txnProducers producers, 1 KiB, batching on,
// unthrottled, each
// transaction committed in the background while the next fills (as
// pulsar-perf). Plain and 100-message runs alternate; a transactional
// message's latency runs to its commit.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

const (
	// The transactions section's load (6 Dec: the settings that gave
	// transactions their best ratio to plain publishing on this machine):
	// 64 coordinators, since the Go client sends each coordinator's
	// requests one at a time and a commit holds its coordinator's queue;
	// 4 client processes of 2 producers, so no one client process's
	// handlers bound the rate.
	txnCoordinators = 64
	txnProducers    = 2
	txnClients      = 4 // client processes per run, each with txnProducers producers
	// txnRounds: plain and transactional runs alternate this many times,
	// and the target compares medians: this machine's speed drifts by
	// 20% between minutes (7 Dec: 100-message runs of one build at
	// 115-169K msg/s), and a median of two is their mean.
	txnRounds = 3
	// txnOpenAhead: transactions a producer of the pipelined runs opens
	// ahead (perf --txn-open-ahead): 16 gave 0.63 x plain, 32 0.65 x.
	txnOpenAhead = 32
	// txnMaxPending: each producer's window in the section, plain and
	// transactional alike, large enough that neither kind is bound by it.
	// A transactional message holds its place until its commit returns
	// (perf counts it there), and a lane has at most window/100 commits
	// outstanding (perf's maxCommits, 64 at most): at 2000, 20 commits of
	// 100-120 ms bound a lane at about 18,000 msg/s, and the pipelined
	// runs gave 121-140K msg/s with the machine not all busy, while plain
	// publishing, bound by the journal's disk, gave the same at 2000 and
	// at 6400 (217K / 207K msg/s, 7 Dec, by hand). At 6400 (64 commits)
	// the pipelined runs gave 151-162K. With 10,000 each, the commit
	// markers queued behind 80,000 messages.
	txnMaxPending = 6400
	// targetTxnVsPlain: 100-message transactions over plain publish.
	targetTxnVsPlain = 0.7
)

// TxnResult is the transactions section's runs.
type TxnResult struct {
	Ran    bool   `json:"ran"`
	Setup  string `json:"setup"`
	Plain  []Run  `json:"plain"`
	Txn100 []Run  `json:"txn100"`
	// Txn100Ahead: 100-message transactions, each producer opening
	// OpenAhead ahead (pipelined).
	Txn100Ahead []Run  `json:"txn100Ahead,omitempty"`
	OpenAhead   int    `json:"openAhead,omitempty"`
	Txn10       []Run  `json:"txn10"`
	Txn1        []Run  `json:"txn1"`
	Skipped     string `json:"skipped,omitempty"`
}

// runTxn measures plain and transactional publishing on one standalone.
func (r *runner) runTxn(ctx context.Context) error {
	d := &r.res.Txn
	dir := filepath.Join(r.o.work, "txn")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := filepath.Join(dir, "standalone-txn.conf")
	keys := []string{"transactionCoordinatorEnabled=true"}
	journalOn := "the work directory's disk"
	if r.o.txnJournalDevice {
		journal, unmount, err := r.zramJournal("txn-journal-mnt", "transactions, journal device")
		if err != nil {
			d.Skipped = err.Error()
			return nil
		}
		defer unmount()
		keys = append(keys, "journalDirectories="+journal)
		journalOn = "/dev/" + zramDevice + " (RAM-backed, standing for a journal device of its own; --txn-journal-device)"
	}
	if err := withKeys(r.o.config, conf, keys...); err != nil {
		return err
	}
	t, err := r.startStandaloneConf(conf, filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	defer t.servers[0].stop()
	if err := scaleCoordinators(ctx, t.admin, r.o.txnCoordinators); err != nil {
		return err
	}
	d.Ran = true
	d.Setup = fmt.Sprintf("one durable standalone (journal on %s), transactionCoordinatorEnabled, %d coordinators; %d client processes of %d "+
		"producers each (the same for plain and transactional runs), 1 KiB, batching on, unthrottled; each transaction "+
		"committed in the background while the next fills; a transactional message's latency runs to its commit; plain "+
		"and 100-message runs alternated; in the pipelined runs each producer opens %d transactions ahead (perf "+
		"--txn-open-ahead) instead of one at a time, each holding a batched producer of its own from its first message on; a "+
		"transactional producer is a lane of producers so that no batch holds two transactions' messages (the Go client tags a "+
		"batch with its first message's transaction: tools/perfclient/txn.go), and a transaction's messages go as one batch "+
		"when it is filled", journalOn, r.o.txnCoordinators, r.o.txnClients, r.o.txnProducers, r.o.txnOpenAhead)
	d.OpenAhead = r.o.txnOpenAhead
	run := func(label, topic string, size, ahead int) (Run, error) {
		// The same load for plain and transactional runs, spread over
		// txnClients processes (--txn-clients): one producer waits for each of its
		// transactions' round trips, so one client process would measure
		// the client (issue 37's rule: show the client is not the limit).
		return r.perfSpread(ctx, t, label, "produce", max(1, r.o.txnClients), func(i int) []string {
			args := append(maxArgs(topic), "--producers", itoa(r.o.txnProducers), "--max-pending", itoa(r.o.txnMaxPending))
			if size > 0 {
				args = append(args, "--num-message-per-transaction", itoa(size))
			}
			if ahead > 0 {
				args = append(args, "--txn-open-ahead", itoa(ahead))
			}
			return args
		})
	}
	for i := range txnRounds {
		p, err := run(fmt.Sprintf("plain #%d", i+1), fmt.Sprintf("txn-plain-%d", i), 0, 0)
		if err != nil {
			return err
		}
		d.Plain = append(d.Plain, p)
		x, err := run(fmt.Sprintf("100 per transaction #%d", i+1), fmt.Sprintf("txn-100-%d", i), 100, 0)
		if err != nil {
			return err
		}
		d.Txn100 = append(d.Txn100, x)
		if d.OpenAhead > 0 {
			x, err := run(fmt.Sprintf("100 per transaction, %d opened ahead #%d", d.OpenAhead, i+1), fmt.Sprintf("txn-100-ahead-%d", i), 100, d.OpenAhead)
			if err != nil {
				return err
			}
			d.Txn100Ahead = append(d.Txn100Ahead, x)
		}
	}
	for _, c := range []struct {
		size int
		runs *[]Run
	}{{10, &d.Txn10}, {1, &d.Txn1}} {
		x, err := run(fmt.Sprintf("%d per transaction", c.size), fmt.Sprintf("txn-%d", c.size), c.size, 0)
		if err != nil {
			return err
		}
		*c.runs = append(*c.runs, x)
	}
	return nil
}

// scaleCoordinators sets the standalone's number of coordinators.
func scaleCoordinators(ctx context.Context, admin string, n int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, admin+"/admin/v3/transactions/transactionCoordinator/replicas",
		strings.NewReader(itoa(n)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("scale transaction coordinators: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("scale transaction coordinators: %s %s", resp.Status, b)
	}
	return nil
}

// writeTxn is the transactions section of the report.
func writeTxn(w io.Writer, res *Results) {
	d := res.Txn
	if !d.Ran {
		skippedSection(w, "Transactions", d.Skipped)
		return
	}
	fmt.Fprintf(w, "## Transactions: publish in transactions of 1, 10 and 100 messages vs plain\n\n%s.\n\n", d.Setup)
	fmt.Fprintf(w, "A producer waits for each transaction's new and first send (the Go client adds the partition to the "+
		"transaction in the first send and waits for the coordinator) before it fills it; the commit runs in the background.\n\n")
	fmt.Fprintf(w, "| messages per transaction | run | msg/s | transactions/s | publish p50 | p99 | p99.9 | server cores | "+
		"per transaction, mean ms: new / first send / other sends / commit |\n|---|---|---|---|---|---|---|---|---|\n")
	row := func(name string, per int, runs []Run) {
		for i, run := range runs {
			rep, l := run.Report, lat(run.Report.PublishLatency)
			tps := "—"
			if per > 0 {
				tps = fmt.Sprintf("%.0f", rep.PublishPS/float64(per))
			}
			phases := "—"
			if t := rep.Txn; t != nil {
				phases = fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", t.NewUs/1e3, t.FirstSendUs/1e3, t.RestUs/1e3, t.CommitUs/1e3)
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %s | %.2f | %s |\n", name, i+1, rep.PublishPS, tps,
				us(l.P50), us(l.P99), us(l.P999), run.ServerCores, phases)
		}
	}
	row("plain", 0, d.Plain)
	row("100", 100, d.Txn100)
	row(fmt.Sprintf("100, %d opened ahead", d.OpenAhead), 100, d.Txn100Ahead)
	row("10", 10, d.Txn10)
	row("1", 1, d.Txn1)
	if plain, txn := medianPS(d.Plain), medianPS(d.Txn100); plain > 0 && txn > 0 {
		fmt.Fprintf(w, "\nMedians: plain %.0f msg/s, 100-message transactions %.0f msg/s: **%s ×** plain", plain, txn,
			txnRatioText(txn/plain))
		if ahead := medianPS(d.Txn100Ahead); ahead > 0 {
			fmt.Fprintf(w, "; %d opened ahead %.0f msg/s: **%s ×** plain", d.OpenAhead, ahead, txnRatioText(ahead/plain))
		}
		fmt.Fprint(w, ".\n\n")
	} else {
		fmt.Fprintf(w, "\nNot all runs finished: %s\n\n", d.Skipped)
	}
}

// txnTargetRows are the transactions targets, one-at-a-time and opened
// ahead (none when the section was not selected and did not run).
func txnTargetRows(res *Results, selected bool) []targetRow {
	d := res.Txn
	var rows []targetRow
	one := txnTargetRow(fmt.Sprintf("publish in 100-message transactions, one at a time per producer, ≥ %.1f × plain (medians, same standalone)",
		targetTxnVsPlain), d.Plain, d.Txn100, selected)
	if one != nil {
		one.why = fmt.Sprintf("the server used %.2f cores on average with transactions and %.2f plain; a producer waits for "+
			"each transaction's opening and its first send (the Go client adds the partition to the transaction there, "+
			"a coordinator log write) before it fills it: %s", meanCores(d.Txn100), meanCores(d.Plain), phasesOf(d.Txn100))
		rows = append(rows, *one)
	}
	if d.OpenAhead > 0 {
		ahead := txnTargetRow(fmt.Sprintf("publish in 100-message transactions, %d opened ahead per producer, ≥ %.1f × plain (medians, same standalone)",
			d.OpenAhead, targetTxnVsPlain), d.Plain, d.Txn100Ahead, selected)
		if ahead != nil {
			ahead.why = fmt.Sprintf("the server used %.2f cores on average with transactions and %.2f plain: %s",
				meanCores(d.Txn100Ahead), meanCores(d.Plain), phasesOf(d.Txn100Ahead))
			rows = append(rows, *ahead)
		}
	}
	return rows
}

// txnTargetRow compares the median of txn with plain's (nil when neither
// ran nor was selected).
func txnTargetRow(name string, plain, txn []Run, selected bool) *targetRow {
	p, x := medianPS(plain), medianPS(txn)
	if p <= 0 || x <= 0 {
		if selected {
			return &targetRow{name: name}
		}
		return nil
	}
	ratio := x / p
	return &targetRow{name: name, measured: fmt.Sprintf("%.0f vs %.0f msg/s", x, p), ratio: txnRatioText(ratio),
		met: ratio >= targetTxnVsPlain, ran: true}
}

// phasesOf says where a producer's time per transaction went, over runs.
func phasesOf(runs []Run) string {
	var parts []string
	for _, r := range runs {
		if t := r.Report.Txn; t != nil {
			parts = append(parts, fmt.Sprintf("new %.2f, first send %.2f, other sends %.2f, commit %.2f ms",
				t.NewUs/1e3, t.FirstSendUs/1e3, t.RestUs/1e3, t.CommitUs/1e3))
		}
	}
	if len(parts) == 0 {
		return "no phases measured"
	}
	return "mean per transaction " + strings.Join(parts, "; ")
}

// txnRatioText is a ratio to plain, with a third decimal when two would
// round a miss up to the target (0.699 is not 0.70).
func txnRatioText(r float64) string {
	if two := fmt.Sprintf("%.2f", r); r >= targetTxnVsPlain || two != fmt.Sprintf("%.2f", targetTxnVsPlain) {
		return two
	}
	return fmt.Sprintf("%.3f", r)
}
