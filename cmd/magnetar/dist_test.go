package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make dist's script packages the binary, every configuration file, the
// systemd units and the docs; the units pass systemd-analyze verify (where
// it is installed) with the packaged binary, and the packaged binary runs.
func TestDistTarball(t *testing.T) {
	skipProcessesIfShort(t)
	out := t.TempDir()
	script := exec.Command("bash", "../../scripts/dist.sh", os.Args[0], "v-test", out)
	msg, err := script.CombinedOutput()
	if err != nil {
		t.Fatalf("dist.sh: %v\n%s", err, msg)
	}
	tarball := strings.TrimSpace(string(msg))
	if err := exec.Command("tar", "-C", out, "-xzf", tarball).Run(); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(out, "magnetar-v-test")
	for _, f := range []string{"bin/magnetar", "VERSION", "README.md", "TUNING.md", "docs/ARCHITECTURE.md",
		"conf/broker.conf", "conf/bookkeeper.conf", "conf/proxy.conf", "conf/standalone.conf", "conf/client.conf",
		"conf/systemd/magnetar-bookie.service", "conf/systemd/magnetar-broker.service",
		"conf/systemd/magnetar-proxy.service", "conf/systemd/magnetar-standalone.service",
		"conf/grafana/magnetar-overview.json", "conf/prometheus/alerts.yml", "conf/prometheus/prometheus.yml",
		"docs/console.md", "docs/console/overview.png"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("tarball lacks %s: %v", f, err)
		}
	}
	bin := filepath.Join(root, "bin", "magnetar")
	version := exec.Command(bin, "version")
	version.Env = append(os.Environ(), "MAGNETAR_TEST_RUN_MAIN=1")
	if got, err := version.Output(); err != nil || !strings.HasPrefix(string(got), "magnetar ") {
		t.Errorf("packaged binary: %q, %v", got, err)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: units not verified")
		return
	}
	units, _ := filepath.Glob(filepath.Join(root, "conf/systemd/*.service"))
	verify := []string{"verify"}
	for _, u := range units {
		raw, _ := os.ReadFile(u)
		fixed := filepath.Join(t.TempDir(), filepath.Base(u))
		if err := os.WriteFile(fixed, []byte(strings.ReplaceAll(string(raw), "/opt/magnetar/bin/magnetar", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		verify = append(verify, fixed)
	}
	if msg, err := exec.Command(analyze, verify...).CombinedOutput(); err != nil || len(strings.TrimSpace(string(msg))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, msg)
	}
}
