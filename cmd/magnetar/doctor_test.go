package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/internal/testdisk"
)

// magnetar doctor on this machine: every check runs and answers, the
// metadata store is reached, the journal is measured; ledgers on tmpfs
// fail the run (they would not survive a reboot).
func TestDoctor(t *testing.T) {
	dir := t.TempDir()
	journal, ledgers := filepath.Join(dir, "journal"), filepath.Join(dir, "ledgers")
	args := []string{"doctor", "--journal-dirs", journal, "--ledger-dirs", ledgers,
		"--metadata-store", "local:" + filepath.Join(dir, "md"), "--disk-test", "200ms", "--output", "json"}
	var out, errOut bytes.Buffer
	run(args, &out, &errOut)
	var findings []struct{ Check, Status, Detail, Advice string }
	if err := json.Unmarshal(out.Bytes(), &findings); err != nil {
		t.Fatalf("not JSON: %v\n%s%s", err, out.String(), errOut.String())
	}
	seen := map[string]string{}
	for _, f := range findings {
		seen[strings.Fields(f.Check)[0]] = f.Status
		if f.Status != "ok" && f.Advice == "" && !strings.Contains(f.Detail, "cannot") && !strings.Contains(f.Detail, "not measured") {
			t.Errorf("%s is %s without advice: %s", f.Check, f.Status, f.Detail)
		}
	}
	for _, check := range []string{"open", "locked", "io_uring", "clock", "journal", "ledgers", "metadata"} {
		if _, ok := seen[check]; !ok {
			t.Errorf("no %q finding in %s", check, out.String())
		}
	}
	if seen["metadata"] != "ok" {
		t.Errorf("local metadata store: %s", out.String())
	}

	tmp := testdisk.MountTmpfs(t, "16m")
	out.Reset()
	code := run([]string{"doctor", "--ledger-dirs", tmp, "--disk-test", "0"}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "FAIL  ledgers "+tmp+": on tmpfs") {
		t.Fatalf("ledgers on tmpfs: exit %d\n%s", code, out.String())
	}
}

// A bookkeeper.conf's metadataServiceUri in Pulsar's metadata-store: form
// is checked as the bookie would open it.
func TestDoctorTakesBookieMetadataServiceURI(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "bookkeeper.conf")
	writeFile(t, conf, "metadataServiceUri=metadata-store:local:"+filepath.Join(dir, "md")+"\n")
	var out, errOut bytes.Buffer
	run([]string{"doctor", "--config", conf, "--disk-test", "0"}, &out, &errOut)
	if !strings.Contains(out.String(), "metadata store: local:"+filepath.Join(dir, "md")+": connected") {
		t.Fatalf("metadata-store:local: not checked as local:\n%s%s", out.String(), errOut.String())
	}
}
