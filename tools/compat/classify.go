package main

// Classification of one test's run: its result, the category a failure
// waits on, and a one-line cause read from its output. Pure functions of
// the test's needs and its log.

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Results.
const (
	resultPass        = "pass"
	resultFail        = "fail"
	resultSkip        = "skip" // the test skipped itself
	resultNotRunnable = "not runnable here"
)

// Categories a failure (or a test not run) waits on.
const (
	categoryDocker       = "docker"
	categorySecurity     = "security"
	categoryTransactions = "transactions"
	categoryBroker       = "broker behaviour"
)

// outcome is how one test's process ended.
type outcome struct {
	ExitCode int    // the process's exit status; -1 if it did not exit by itself
	TimedOut bool   // killed by the harness after its per-test timeout
	Killed   string // why the harness stopped it otherwise (interrupt), or ""
	Output   string // everything it wrote
}

// testResult is one row of the report.
type testResult struct {
	Name     string  `json:"name"`
	Result   string  `json:"result"`
	Category string  `json:"category,omitempty"`
	Cause    string  `json:"cause,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
}

// notRunnable is the row of a test the harness does not run.
func notRunnable(name string) testResult {
	return testResult{Name: name, Result: resultNotRunnable, Category: categoryDocker,
		Cause: "starts its own Pulsar in docker (testcontainers)"}
}

// classify turns a finished test's outcome into its row.
// srcLine, if not nil, returns a line of a suite file (to quote the
// assertion behind a bare "Should be true").
func classify(name string, n needs, o outcome, srcLine func(file string, line int) string) testResult {
	r := testResult{Name: name}
	switch {
	case o.ExitCode == 0 && !o.TimedOut && o.Killed == "":
		r.Result = resultPass
		if skippedItself(name, o.Output) {
			r.Result, r.Cause = resultSkip, skipReason(name, o.Output)
		}
		return r
	case o.Killed != "":
		r.Cause = o.Killed
	case o.TimedOut:
		r.Cause = "hung: killed by the harness after its timeout"
		if c := failureCause(o.Output, srcLine); c != "" {
			r.Cause += "; " + c
		}
	default:
		r.Cause = failureCause(o.Output, srcLine)
		if r.Cause == "" {
			r.Cause = "exited with status " + strconv.Itoa(o.ExitCode) + " and no recognisable error line"
		}
	}
	r.Result = resultFail
	r.Category = category(n, o.Output, r.Cause)
	return r
}

var securityOutput = regexp.MustCompile(`(?i)x509|\btls\b|tls:|\bssl\b|certificate|unauthori[sz]ed|authenticat|authoriz|\b401\b|\b403\b`)

// category is what a failure waits on: transactions, security (from the
// source or from what the output says), or the broker's behaviour.
func category(n needs, output, cause string) string {
	switch {
	case n.Transactions:
		return categoryTransactions
	case n.Security || securityOutput.MatchString(cause):
		return categorySecurity
	}
	for _, line := range strings.Split(output, "\n") {
		if strings.Contains(line, "rror") && securityOutput.MatchString(line) {
			return categorySecurity
		}
	}
	return categoryBroker
}

func skippedItself(name, output string) bool {
	return strings.Contains(output, "--- SKIP: "+name+" ") && !strings.Contains(output, "--- PASS: "+name+" ")
}

func skipReason(name, output string) string {
	lines := strings.Split(output, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "--- SKIP: "+name+" ") && i+1 < len(lines) {
			return shorten(strings.TrimSpace(lines[i+1]))
		}
	}
	return ""
}

var (
	testLogLine   = regexp.MustCompile(`^\s+([A-Za-z0-9_]+_test\.go:\d+): (.*)$`)
	testifyField  = regexp.MustCompile(`^\s+([A-Z][A-Za-z ]+):\s*\t(.*)$`)
	testifyMore   = regexp.MustCompile(`^\s+\t\s*\t(.*)$`)
	panicLine     = regexp.MustCompile(`^panic: (.*)`)
	errorLogLine  = regexp.MustCompile(`level=(error|fatal)\b.*?msg="([^"]*)"(.*)`)
	errorWordLine = regexp.MustCompile(`\b(Error|error|FAIL|timed out)\b`)
)

// failureCause is one short line saying why a test failed, chosen in
// order: the first testify assertion (its Error and where), a panic
// (test timeouts are panics), the first t.Error/t.Fatal line, the client's
// first error log, then any line naming an error.
func failureCause(output string, srcLine func(file string, line int) string) string {
	lines := strings.Split(strings.ReplaceAll(output, "\r", ""), "\n")
	for _, find := range []func([]string) string{testifyCause, panicCause, testLogCause, errorLogCause, anyErrorLine} {
		if c := find(lines); c != "" {
			return shorten(pointer.ReplaceAllString(quoteSource(c, srcLine), ""))
		}
	}
	return ""
}

var (
	pointer   = regexp.MustCompile(`\(0x[0-9a-f]+\)`)
	bareCause = regexp.MustCompile(`^([A-Za-z0-9_]+_test\.go):(\d+): (Should be (true|false|empty|nil)|Condition never satisfied|Should NOT be empty.*|Expected value not to be nil\.)$`)
)

// quoteSource appends the assertion's source line to a cause that says
// nothing by itself ("x_test.go:12: Should be true").
func quoteSource(cause string, srcLine func(file string, line int) string) string {
	m := bareCause.FindStringSubmatch(cause)
	if m == nil || srcLine == nil {
		return cause
	}
	n, _ := strconv.Atoi(m[2])
	if src := strings.TrimSpace(srcLine(m[1], n)); src != "" {
		return cause + ": " + src
	}
	return cause
}

// testifyCause reads the first testify failure block:
//
//	producer_test.go:105:
//	    	Error Trace:	/path/producer_test.go:105
//	    	Error:      	Received unexpected error:
//	    	            	connection refused
//	    	Test:       	TestX
func testifyCause(lines []string) string {
	where := ""
	for i, l := range lines {
		m := testifyField.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		switch strings.TrimSpace(m[1]) {
		case "Error Trace":
			where = filepath.Base(strings.TrimSpace(m[2]))
		case "Error":
			msg := strings.TrimSpace(m[2])
			for _, more := range lines[i+1:] {
				mm := testifyMore.FindStringSubmatch(more)
				if mm == nil {
					break
				}
				msg += " " + strings.TrimSpace(mm[1])
			}
			msg += testifyMessages(lines[i+1:])
			if where != "" {
				return where + ": " + msg
			}
			return msg
		}
	}
	return ""
}

// testifyMessages is the block's "Messages:" field, if it comes before
// the next failure block.
func testifyMessages(lines []string) string {
	for _, l := range lines {
		m := testifyField.FindStringSubmatch(l)
		if m == nil {
			if testifyMore.MatchString(l) {
				continue
			}
			return ""
		}
		switch strings.TrimSpace(m[1]) {
		case "Messages":
			return " (" + strings.TrimSpace(m[2]) + ")"
		case "Error Trace", "Error":
			return ""
		}
	}
	return ""
}

func panicCause(lines []string) string {
	for i, l := range lines {
		if m := panicLine.FindStringSubmatch(l); m != nil {
			msg := "panic: " + m[1]
			// A timeout's panic names the running tests next: keep its first line.
			if strings.HasPrefix(m[1], "test timed out") {
				return msg
			}
			if loc := panicLocation(lines[i+1:]); loc != "" {
				msg += " at " + loc
			}
			return msg
		}
	}
	return ""
}

// panicLocation is the first *_test.go frame of a panic's stack.
func panicLocation(lines []string) string {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if strings.Contains(l, "_test.go:") && strings.HasPrefix(l, "/") {
			loc, _, _ := strings.Cut(filepath.Base(l), " ")
			return loc
		}
	}
	return ""
}

func testLogCause(lines []string) string {
	for i, l := range lines {
		m := testLogLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		msg := strings.TrimSpace(m[2])
		if msg == "" && i+1 < len(lines) { // a multi-line message starts on the next line
			msg = strings.TrimSpace(lines[i+1])
		}
		if msg != "" && !strings.HasPrefix(msg, "Error Trace:") {
			return m[1] + ": " + msg
		}
	}
	return ""
}

func errorLogCause(lines []string) string {
	for _, l := range lines {
		if m := errorLogLine.FindStringSubmatch(l); m != nil {
			return "client logged: " + m[2] + strings.TrimRight(m[3], " ")
		}
	}
	return ""
}

func anyErrorLine(lines []string) string {
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if errorWordLine.MatchString(t) && !strings.HasPrefix(t, "--- FAIL") && t != "FAIL" {
			return t
		}
	}
	return ""
}

// maxCause bounds a cause to what reads on one table row.
const maxCause = 220

func shorten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxCause {
		cut := maxCause
		for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
