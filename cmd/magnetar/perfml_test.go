package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestPerfManagedLedgerJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"perf", "managedledger", "--dir", t.TempDir(), "--io-backend", "std", "--duration", "200ms",
		"--backlog-mb", "1", "--disk-duration", "-1s", "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rep struct {
		Append struct {
			Entries int64 `json:"entries"`
		} `json:"append"`
		CatchUp *struct {
			Entries int64 `json:"entries"`
		} `json:"catch_up_read"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Append.Entries == 0 || rep.CatchUp == nil || rep.CatchUp.Entries != 1024 {
		t.Fatalf("report %s", out.String())
	}
	if code := run([]string{"perf", "managedledger", "--nope"}, &out, &errOut); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
}
