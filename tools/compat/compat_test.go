package main

import (
	"bytes"
	"strings"
	"testing"
)

// A testify failure as go test -v prints it, between client log lines.
const testifyOutput = `=== RUN   TestClientVersion
time="2026-12-02T06:29:02Z" level=info msg="Created producer" topic="persistent://public/default/t"
    consumer_test.go:5662: 
        	Error Trace:	/mod/pulsar/consumer_test.go:5662
        	Error:      	Received unexpected error:
        	            	server error: ServiceNotReady: (0x1234abcd) not ready
        	Test:       	TestClientVersion
        	Messages:   	Failed to create producer
    consumer_test.go:5681: 
        	Error Trace:	/mod/pulsar/consumer_test.go:5681
        	Error:      	Should be true
        	Test:       	TestClientVersion
--- FAIL: TestClientVersion (0.02s)
FAIL
`

func TestFailureCause(t *testing.T) {
	src := func(file string, line int) string {
		if file == "consumer_test.go" && line == 12 {
			return "\tassert.True(t, ok)"
		}
		return ""
	}
	cases := []struct{ name, output, want string }{
		{"testify", testifyOutput,
			"consumer_test.go:5662: Received unexpected error: server error: ServiceNotReady: not ready (Failed to create producer)"},
		{"bare assertion quotes its source", "    consumer_test.go:12: \n        \tError Trace:\t/m/consumer_test.go:12\n        \tError:      \tShould be true\n        \tTest:       \tTestX\n",
			"consumer_test.go:12: Should be true: assert.True(t, ok)"},
		{"panic with its test frame", "=== RUN   TestX\npanic: runtime error: index out of range [0] with length 0\n\ngoroutine 7 [running]:\n/usr/lib/go/src/testing/testing.go:1 +0x1\n/mod/pulsar/consumer_test.go:1661 +0x2b\n",
			"panic: runtime error: index out of range [0] with length 0 at consumer_test.go:1661"},
		{"test timeout", "=== RUN   TestX\npanic: test timed out after 3m0s\n\trunning tests:\n\t\tTestX (3m0s)\n/mod/pulsar/x_test.go:9 +0x1\n",
			"panic: test timed out after 3m0s"},
		{"t.Fatal", "=== RUN   TestX\n    producer_test.go:88: producer was not created\n--- FAIL: TestX (1.00s)\n",
			"producer_test.go:88: producer was not created"},
		{"client error log", "=== RUN   TestX\ntime=\"t\" level=error msg=\"Failed to create producer\" error=\"server error\"\n--- FAIL: TestX (1.00s)\nFAIL\n",
			`client logged: Failed to create producer error="server error"`},
		{"nothing recognisable", "=== RUN   TestX\n--- FAIL: TestX (1.00s)\nFAIL\n", ""},
	}
	for _, c := range cases {
		if got := failureCause(c.output, src); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	long := "    x_test.go:1: " + strings.Repeat("é", 300)
	if got := failureCause(long, nil); len(got) > maxCause+3 || !strings.HasSuffix(got, "...") || !strings.HasPrefix(got, "x_test.go:1: é") {
		t.Errorf("long cause not cut to %d bytes on a rune boundary: %q", maxCause, got)
	}
}

func TestClassify(t *testing.T) {
	fail := outcome{ExitCode: 1, Output: "    x_test.go:3: boom\n--- FAIL: TestX (0.1s)\n"}
	cases := []struct {
		name                    string
		n                       needs
		o                       outcome
		result, category, cause string
	}{
		{"pass", needs{}, outcome{Output: "--- PASS: TestX (0.01s)\nPASS\n"}, resultPass, "", ""},
		{"skip", needs{}, outcome{Output: "=== RUN   TestX\n--- SKIP: TestX (0.00s)\n    x_test.go:9: needs a cluster\nPASS\n"},
			resultSkip, "", "x_test.go:9: needs a cluster"},
		{"broker", needs{}, fail, resultFail, categoryBroker, "x_test.go:3: boom"},
		{"security from source", needs{Security: true}, fail, resultFail, categorySecurity, "x_test.go:3: boom"},
		{"transactions win", needs{Security: true, Transactions: true}, fail, resultFail, categoryTransactions, "x_test.go:3: boom"},
		{"security from output", needs{}, outcome{ExitCode: 1, Output: "    x_test.go:3: boom\ntime=\"t\" level=error msg=\"Error: x509: certificate signed by unknown authority\"\n"},
			resultFail, categorySecurity, "x_test.go:3: boom"},
		{"authoritative is not auth", needs{}, outcome{ExitCode: 1, Output: "    x_test.go:3: lookup error: authoritative redirect\n"},
			resultFail, categoryBroker, "x_test.go:3: lookup error: authoritative redirect"},
		{"hung", needs{}, outcome{ExitCode: -1, TimedOut: true, Output: "=== RUN   TestX\n"}, resultFail, categoryBroker,
			"hung: killed by the harness after its timeout"},
		{"crash without a cause", needs{}, outcome{ExitCode: 2}, resultFail, categoryBroker,
			"exited with status 2 and no recognisable error line"},
	}
	for _, c := range cases {
		r := classify("TestX", c.n, c.o, nil)
		if r.Result != c.result || r.Category != c.category || r.Cause != c.cause {
			t.Errorf("%s: got %s/%s/%q, want %s/%s/%q", c.name, r.Result, r.Category, r.Cause, c.result, c.category, c.cause)
		}
	}
}

const suiteHelper = `package pulsar

import "github.com/testcontainers/testcontainers-go"

const caCertsPath = "../integration-tests/certs/cacert.pem"

func startContainer() { _ = testcontainers.ContainerRequest{} }
func tlsClient() string { return caCertsPath }
func plain() int { return 1 }
`

const suiteTests = `package pulsar

import "testing"

func TestPlain(t *testing.T)      { plain() }
func TestDocker(t *testing.T)     { startContainer() }
func TestViaHelper(t *testing.T)  { tlsClient() }
func TestLiteral(t *testing.T)    { _ = "pulsar+ssl://localhost:6651" }
func TestTxn_Commit(t *testing.T) { plain() }
func TestEnables(t *testing.T)    { _ = ClientOptions{EnableTransaction: true} }
func TestS3(t *testing.T)         { _ = "https://s3.amazonaws.com" }
`

const taggedTests = `//go:build clustered

package pulsar

import "testing"

func TestPlain(t *testing.T) { startContainer() }
`

func TestNeedsFromSource(t *testing.T) {
	src, err := parseSuite(map[string][]byte{
		"helper_for_test.go": []byte(suiteHelper), "a_test.go": []byte(suiteTests), "clustered_test.go": []byte(taggedTests),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]needs{
		"TestPlain":      {}, // the clustered file's TestPlain is behind a tag
		"TestDocker":     {Docker: true},
		"TestViaHelper":  {Security: true},
		"TestLiteral":    {Security: true},
		"TestTxn_Commit": {Transactions: true},
		"TestEnables":    {Transactions: true},
		"TestS3":         {}, // an https string that is not the service
	}
	for name, w := range want {
		if got := src.needsOf(name); got != w {
			t.Errorf("%s: got %+v, want %+v", name, got, w)
		}
	}
}

func TestRenderReport(t *testing.T) {
	info := runInfo{Suite: "pulsaradmin", About: "The admin library's tests", Package: "pulsaradmin/pkg/admin",
		ClientModule: clientModule, ClientVersion: "v0.19.0", Date: "2026-01-02", Machine: "linux/amd64, 2 CPUs",
		Command: "make compat", Listed: 4, PerTest: "3m0s", Events: []string{"setup `x` failed"}}
	results := []testResult{
		{Name: "TestZ", Result: resultFail, Category: categorySecurity, Cause: "a|b <nil> `c`"},
		{Name: "TestA", Result: resultPass},
		{Name: "TestM", Result: resultFail, Category: categoryBroker, Cause: "boom"},
		notRunnable("TestD"),
	}
	var b bytes.Buffer
	if err := renderReport(&b, info, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# Compatibility: github.com/apache/pulsar-client-go v0.19.0, pulsaradmin/pkg/admin\n\nThe admin library's tests, each",
		"- tests: all 4 of the suite\n",
		"- passed: 1\n- failed: 2 (broker behaviour 1, security 1)\n",
		"- not runnable here: 1 ",
		"- setup `x` failed\n",
		"| TestA | pass |  |  |\n| TestD | not runnable here | docker |",
		"| TestM | fail | broker behaviour | boom |\n| TestZ | fail | security | a\\|b &lt;nil> 'c' |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	var again bytes.Buffer
	_ = renderReport(&again, info, []testResult{results[3], results[1], results[0], results[2]})
	if again.String() != out {
		t.Error("the report depends on the order results came in")
	}
	info.Filter = "TestA|TestM"
	b.Reset()
	_ = renderReport(&b, info, results[1:3])
	if !strings.Contains(b.String(), "- subset: tests matching `TestA|TestM` (2 of the suite's 4)") {
		t.Errorf("a subset's report does not say so:\n%s", b.String())
	}
}

func TestSelectSuites(t *testing.T) {
	got, err := selectSuites("pulsaradmin, pulsar")
	if err != nil || len(got) != 2 || got[0].pkg != "pulsaradmin/pkg/admin" || got[1].report != "pulsar-client-go.md" {
		t.Fatalf("selectSuites = %+v, %v", got, err)
	}
	if _, err := selectSuites("pulsar,admin"); err == nil || !strings.Contains(err.Error(), `no suite "admin"`) {
		t.Fatalf("an unknown suite: %v", err)
	}
}

func TestSuiteConfAndUnusedKeys(t *testing.T) {
	conf := suiteConf([]byte("tlsCertificateFilePath=/pulsar/certs/broker-cert.pem\ntokenSecretKey=file:///pulsar/tokens/secret.key\n"), "/mod")
	want := "tlsCertificateFilePath=/mod/integration-tests/certs/broker-cert.pem\ntokenSecretKey=file:///mod/integration-tests/tokens/secret.key\n" +
		"basicAuthConf=/mod/integration-tests/conf/.htpasswd\n"
	if string(conf) != want {
		t.Errorf("got %q, want %q", conf, want)
	}
	log := `time=x level=WARN msg="config keys not used by this build" file=/t/standalone.conf keys=a,b,c` + "\n"
	if got := unusedKeys(log); got != "a, b, c" {
		t.Errorf("unusedKeys = %q", got)
	}
}
