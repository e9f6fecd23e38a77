package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/tools/tracewait/tracewaittest"
)

func TestTraceWaitsCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.out")
	tracewaittest.WriteTrace(t, file)
	var out, errOut bytes.Buffer
	if code := run([]string{"trace", "waits", "--top", "3", file}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "started in") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"trace"}, 2, "usage"},
		{[]string{"trace", "waits"}, 2, "one trace file"},
		{[]string{"trace", "waits", filepath.Join(t.TempDir(), "none")}, 1, "no such file"},
		{[]string{"trace", "waits", "procs.go"}, 1, "not a Go execution trace"},
	} {
		errOut.Reset()
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.says) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut.String(), c.code, c.says)
		}
	}
}
