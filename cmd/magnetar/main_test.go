package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestVersionAndUnknown(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "magnetar ") {
		t.Fatalf("version: code %d out %q", code, out.String())
	}
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: code %d err %q", code, errOut.String())
	}
}

func TestPerfDiskJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"perf", "disk", "--json", "--dir", t.TempDir(), "--sizes", "4k", "--modes", "append",
		"--duration", "30ms", "--read-file", "2m"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut.String())
	}
	var rep struct {
		Results []struct {
			Backend, Test string
			OpsPerSec     float64 `json:"ops_per_sec"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Backend+"/"+r.Test] = r.OpsPerSec > 0
	}
	for _, k := range []string{"uring/write+datasync", "std/write+datasync", "uring/datasync", "std/seqread"} {
		if !seen[k] {
			t.Fatalf("missing or empty %s in %v", k, seen)
		}
	}
}

func TestPerfDiskBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"perf", "disk", "--sizes", "4q"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `bad size "4q"`) {
		t.Fatalf("code %d err %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"perf", "disk", "--backends", "spdk", "--dir", t.TempDir()}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), `unknown io backend "spdk"`) {
		t.Fatalf("code %d err %q", code, errOut.String())
	}
}
