package netlab

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCutAndHeal builds two hosts, checks they talk, cuts the link (a dial
// times out), heals it, and removes everything.
func TestCutAndHeal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds network namespaces: skipped under -short")
	}
	if err := Available(); err != nil {
		t.Skip(err)
	}
	lab, err := New("mgt")
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	a, err := lab.AddHost("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := lab.AddHost("b")
	if err != nil {
		t.Fatal(err)
	}
	srv := b.Command("python3", "-m", "http.server", "--bind", b.Addr, "8000")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	dial := func() error {
		c, err := net.DialTimeout("tcp", b.Addr+":8000", time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for dial() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the root namespace cannot reach host b")
		}
		time.Sleep(100 * time.Millisecond)
	}
	reach := func(from *Host) bool {
		return from.Command("bash", "-c", "timeout 2 bash -c 'exec 3<>/dev/tcp/"+b.Addr+"/8000'").Run() == nil
	}
	if !reach(a) {
		t.Fatal("a cannot reach b before the cut")
	}
	if err := lab.Cut("a", "b"); err != nil {
		t.Fatal(err)
	}
	if reach(a) {
		t.Fatal("a reaches b through a cut link")
	}
	if dial() != nil {
		t.Fatal("the root namespace lost b: only a-b was cut")
	}
	if got := lab.Cuts(); len(got) != 1 || got[0] != "a-b" {
		t.Fatalf("cuts %v", got)
	}
	if err := lab.HealAll(); err != nil {
		t.Fatal(err)
	}
	if !reach(a) {
		t.Fatal("a cannot reach b after healing")
	}
	lab.Close()
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), a.NS) {
		t.Fatalf("namespace left after Close: %s", out)
	}
}
