package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/internal/netlab"
)

// The deploy guide's test (make deploy-guide-test, part of make test-long):
// docs/deploy.md run literally on four "hosts", network namespaces of a
// netlab. Each host also gets its own mount namespace in which /etc, /opt
// and /var are overlays of this machine's (so useradd, /etc/magnetar and
// /var/lib/zookeeper are per host and vanish afterwards) and /mnt is a
// directory standing in for the disks. /etc/hosts names host1..host4.
//
// A ```sh block runs where its first line says (# on every host, # on
// host1, host2, # on the build machine), one host at a time, as
// bash -euo pipefail after the Settings block (with HOST and MYID set for
// the host) and a few stand-ins for what cannot run here: systemctl (runs
// the installed unit's ExecStartPre and ExecStart lines with its User and
// limits, in the background), mkfs.* and mount (directories stand in for
// disks; the mount point must exist), apt-get install (checks the package
// is installed: make zookeeper installs ZooKeeper) and sudo -u (setpriv).
var deployGuide = flag.Bool("deployguide", false, "run docs/deploy.md on network-namespace hosts (needs root; make deploy-guide-test)")

// guideBlock is one ```sh block of the guide.
type guideBlock struct {
	section string   // the heading above it
	line    int      // of the opening fence
	where   string   // the "# on ..." text
	hosts   []string // host names, or ["build"]
	code    string
}

var guideOnRE = regexp.MustCompile(`^# on (every host|the build machine|host\d(?:, host\d)*)\b`)

// parseGuide returns the guide's sh blocks; every one must say where it runs.
func parseGuide(text string) ([]guideBlock, error) {
	var blocks []guideBlock
	var cur *guideBlock
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case cur == nil && line == "```sh":
			cur = &guideBlock{section: section, line: n}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil && cur.where == "":
			m := guideOnRE.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("docs/deploy.md:%d: a sh block must start with \"# on every host\", \"# on host1, host2\" or \"# on the build machine\", not %q", n, line)
			}
			cur.where = line
			switch m[1] {
			case "every host":
				cur.hosts = []string{"host1", "host2", "host3"}
			case "the build machine":
				cur.hosts = []string{"build"}
			default:
				cur.hosts = strings.Split(m[1], ", ")
			}
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("docs/deploy.md:%d: sh block not closed", cur.line)
	}
	return blocks, sc.Err()
}

// guideShims stand in for what cannot run in a namespace on this machine.
// They are the test's, not the guide's: the guide stays what a user types.
const guideShims = `
mkfs.xfs() { echo "(test: mkfs.xfs $* skipped: a directory stands in for the disk)"; }
mkfs.ext4() { echo "(test: mkfs.ext4 $* skipped: a directory stands in for the disk)"; }
mount() {
  [[ $# -eq 2 && -d $2 ]] || { echo "mount $*: the test wants DEVICE DIR with DIR existing" >&2; return 32; }
  echo "(test: $2 stands in for $1)"
}
apt-get() {
  [[ ${1:-} == install ]] || { echo "(test: apt-get $* skipped)"; return 0; }
  shift; local p
  for p; do
    [[ $p == -* ]] && continue
    dpkg -s "$p" >/dev/null 2>&1 || { echo "apt-get install $p: not installed on this machine (make zookeeper installs ZooKeeper)" >&2; return 1; }
  done
}
sudo() {
  [[ ${1:-} == -u ]] || { "$@"; return; }
  local u=$2; shift 2
  setpriv --reuid "$u" --regid "$u" --init-groups env "$@"
}
_unit_file() {
  local f=/etc/systemd/system/${1%.service}.service
  [[ -f $f ]] || { echo "systemctl: no unit $f (was it installed?)" >&2; return 1; }
  echo "$f"
}
_unit_start() {
  local u=${1%.service} f pidf
  f=$(_unit_file "$u") || return 1
  pidf=$GUIDE_STATE/$u.pid
  if [[ -f $pidf ]] && kill -0 "$(cat "$pidf")" 2>/dev/null; then return 0; fi
  (
    cd /  # as systemd does
    user=$(sed -n 's/^User=//p' "$f")
    nofile=$(sed -n 's/^LimitNOFILE=//p' "$f")
    memlock=$(sed -n 's/^LimitMEMLOCK=//p' "$f")
    if [[ -n $nofile ]] && ! ulimit -n "$nofile" 2>/dev/null; then
      echo "(test: LimitNOFILE=$nofile cannot be applied here: this machine's hard limit is $(ulimit -Hn))"
    fi
    if [[ $memlock == infinity ]] && ! ulimit -l unlimited 2>/dev/null; then
      echo "(test: LimitMEMLOCK=infinity cannot be applied here: this machine's hard limit is $(ulimit -Hl))"
    fi
    run=()
    [[ -n $user ]] && run=(setpriv --reuid "$user" --regid "$user" --init-groups)
    while IFS= read -r pre; do
      echo "(test: $u ExecStartPre: $pre)"
      "${run[@]}" $pre >>"$GUIDE_STATE/$u.log" 2>&1 || { echo "$u: ExecStartPre failed: $pre" >&2; tail -40 "$GUIDE_STATE/$u.log" >&2; exit 1; }
    done < <(sed -n 's/^ExecStartPre=//p' "$f")
    start=$(sed -n 's/^ExecStart=//p' "$f")
    echo "(test: $u ExecStart: $start)"
    setsid "${run[@]}" $start >>"$GUIDE_STATE/$u.log" 2>&1 </dev/null &
    echo $! >"$pidf"
  )
}
_unit_stop() {
  local u=${1%.service} pidf pid i
  pidf=$GUIDE_STATE/$u.pid
  [[ -f $pidf ]] || return 0
  pid=$(cat "$pidf")
  echo "(test: $u stop: SIGTERM $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidf"
}
systemctl() {
  local op=${1:-} now=0 u
  shift || true
  [[ ${1:-} == --now ]] && { now=1; shift; }
  case $op in
    daemon-reload) echo "(test: systemctl daemon-reload: nothing to do)" ;;
    enable) if ((now)); then for u; do _unit_start "$u" || return 1; done; fi ;;
    disable) if ((now)); then for u; do _unit_stop "$u"; done; fi ;;
    start) for u; do _unit_start "$u" || return 1; done ;;
    stop) for u; do _unit_stop "$u"; done ;;
    restart) for u; do _unit_stop "$u"; _unit_start "$u" || return 1; done ;;
    *) echo "systemctl $op: not supported by the test's stand-in" >&2; return 1 ;;
  esac
}
`

// guideHost is one host of the lab: its network namespace, its mount
// namespace (bound to a file) and its directories.
type guideHost struct {
	name  string
	host  *netlab.Host
	dir   string // its overlays' upper directories, /mnt, state
	mntNS string // the bind-mounted mount namespace file
}

type guideLab struct {
	t        *testing.T
	lab      *netlab.Lab
	dir      string
	nsDir    string
	repo     string
	settings string
	hosts    map[string]*guideHost
	order    []string
}

func TestDeployGuide(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(repo, "docs/deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseGuide(string(text))
	if err != nil {
		t.Fatal(err) // every make test checks the guide's annotations
	}
	if !*deployGuide {
		t.Skip("runs docs/deploy.md on network namespaces: make deploy-guide-test (make test-long)")
	}
	// Prerequisites the project installs itself fail the test, not skip it.
	if err := netlab.Available(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/bin/zkServer.sh"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("ZooKeeper is missing (%v): make zookeeper installs it", err)
		}
	}
	for _, p := range []string{"setpriv", "nsenter", "unshare", "curl", "java"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("the guide's test needs %s: %v", p, err)
		}
	}
	// The build machine's blocks write dist/magnetar-guide*: none may be
	// left from an earlier run.
	stale, _ := filepath.Glob(filepath.Join(repo, "dist", "magnetar-guide*"))
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	g := newGuideLab(t, repo)
	bySection := map[string][]guideBlock{}
	var sections []string
	for _, b := range blocks {
		if _, ok := bySection[b.section]; !ok {
			sections = append(sections, b.section)
		}
		bySection[b.section] = append(bySection[b.section], b)
	}
	if s := bySection["Settings"]; len(s) != 1 {
		t.Fatalf("the guide needs one sh block under \"## Settings\", found %d", len(s))
	}
	g.settings = bySection["Settings"][0].code
	start := time.Now()
	for _, sec := range sections {
		if sec == "Settings" {
			continue
		}
		if sec == "Adding a bookie" {
			// "On the new host run sections 1, 3 and 4."
			for _, prefix := range []string{"1. ", "3. ", "4. "} {
				for _, s := range sections {
					if !strings.HasPrefix(s, prefix) {
						continue
					}
					for _, b := range bySection[s] {
						if b.hosts[0] != "build" {
							g.run(b, []string{"host4"})
						}
					}
				}
			}
		}
		for _, b := range bySection[sec] {
			g.run(b, b.hosts)
		}
		g.checkSection(sec)
	}
	t.Logf("the guide ran end to end in %v", time.Since(start).Round(time.Second))
}

func newGuideLab(t *testing.T, repo string) *guideLab {
	dir := t.TempDir()
	lab, err := netlab.New("mgd")
	if err != nil {
		t.Fatal(err)
	}
	g := &guideLab{t: t, lab: lab, dir: dir, nsDir: filepath.Join(dir, "ns"), repo: repo, hosts: map[string]*guideHost{}}
	t.Cleanup(g.close)
	if out, err := exec.Command("bash", "-c", "mkdir -p "+g.nsDir+" && mount --bind "+g.nsDir+" "+g.nsDir+
		" && mount --make-private "+g.nsDir).CombinedOutput(); err != nil {
		t.Fatalf("mount namespace directory: %v: %s", err, out)
	}
	var etcHosts strings.Builder
	etcHosts.WriteString("127.0.0.1 localhost\n")
	names := []string{"host1", "host2", "host3", "host4"}
	for i, n := range names {
		fmt.Fprintf(&etcHosts, "198.18.0.%d %s\n", 10+i, n)
	}
	for _, n := range names {
		g.addHost(n, etcHosts.String())
	}
	return g
}

func (g *guideLab) addHost(name, etcHosts string) {
	t := g.t
	h, err := g.lab.AddHost(name)
	if err != nil {
		t.Fatal(err)
	}
	gh := &guideHost{name: name, host: h, dir: filepath.Join(g.dir, name), mntNS: filepath.Join(g.nsDir, name)}
	for _, d := range []string{"state", "mnt", "cwd"} {
		if err := os.MkdirAll(filepath.Join(gh.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(gh.mntNS, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var setup strings.Builder
	setup.WriteString("set -e\n")
	for _, d := range []string{"etc", "opt", "var"} {
		up, work := filepath.Join(gh.dir, d+".up"), filepath.Join(gh.dir, d+".work")
		fmt.Fprintf(&setup, "mkdir -p %s %s\nmount -t overlay overlay -o lowerdir=/%s,upperdir=%s,workdir=%s /%s\n", up, work, d, up, work, d)
	}
	fmt.Fprintf(&setup, "mount --bind %s /mnt\n", filepath.Join(gh.dir, "mnt"))
	fmt.Fprintf(&setup, "cat >/etc/hosts <<'EOF'\n%sEOF\n", etcHosts)
	// Made from this process's mount namespace: ip netns exec's own is
	// temporary, and a namespace file is bound where it is made.
	cmd := exec.Command("unshare", "--mount="+gh.mntNS, "--propagation", "private", "bash", "-c", setup.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: mount namespace: %v: %s", name, err, out)
	}
	g.hosts[name] = gh
	g.order = append(g.order, name)
}

// close kills every process in the hosts' namespaces, then releases the
// mount namespaces and removes the namespaces and bridge.
func (g *guideLab) close() {
	if g.t.Failed() {
		for _, n := range g.order {
			logs, _ := filepath.Glob(filepath.Join(g.hosts[n].dir, "state", "*.log"))
			zk, _ := filepath.Glob(filepath.Join(g.hosts[n].dir, "var.up", "log", "zookeeper", "*.out"))
			for _, l := range append(logs, zk...) {
				b, _ := os.ReadFile(l)
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				g.t.Logf("=== %s: %s (tail)\n%s", n, l, b)
			}
		}
	}
	g.lab.Close()
	for _, n := range g.order {
		_ = syscall.Unmount(g.hosts[n].mntNS, syscall.MNT_DETACH)
	}
	_ = syscall.Unmount(g.nsDir, syscall.MNT_DETACH)
}

// guideBlockTimeout bounds one block on one host: every wait the guide
// writes as an until-loop ends here at the latest.
const guideBlockTimeout = 6 * time.Minute

// run runs block b on each of hosts in turn.
func (g *guideLab) run(b guideBlock, hosts []string) {
	t := g.t
	for _, hn := range hosts {
		t.Logf("docs/deploy.md:%d (%s) %s on %s", b.line, b.section, b.where, hn)
		var cmd *exec.Cmd
		if hn == "build" {
			cmd = exec.Command("bash", "-c", "set -euo pipefail\n"+g.settings+g.overrides("build")+b.code)
			cmd.Dir = g.repo
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		} else {
			gh := g.hosts[hn]
			if gh == nil {
				t.Fatalf("docs/deploy.md:%d: no host %s", b.line, hn)
			}
			g.copyTarballs(gh)
			script := "set -euo pipefail\n" + guideShims + g.settings + g.overrides(hn) + b.code
			// nsenter from this mount namespace: a copy of it (ip netns
			// exec's) does not carry the bound mount namespace files.
			cmd = exec.Command("nsenter", "--mount="+gh.mntNS, "--net=/run/netns/"+gh.host.NS,
				"--wd="+filepath.Join(gh.dir, "cwd"), "--", "bash", "-c", script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			cmd.Env = append(os.Environ(), "GUIDE_STATE="+filepath.Join(gh.dir, "state"), "HOME=/root")
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		began := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(guideBlockTimeout):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = fmt.Errorf("timed out after %v (killed); output so far follows", guideBlockTimeout)
			<-done
		}
		t.Logf("  %v, output:\n%s", time.Since(began).Round(100*time.Millisecond), tail(out.String(), 4000))
		if err != nil {
			t.Fatalf("docs/deploy.md:%d (%s) on %s: %v", b.line, b.section, hn, err)
		}
		if strings.Contains(b.code, "perf e2e") {
			checkE2E(t, b, out.String())
		}
	}
}

// overrides sets the per-host settings after the guide's Settings block,
// and the versions the test's tarballs carry.
func (g *guideLab) overrides(host string) string {
	s := "VERSION=guide1\nNEW_VERSION=guide2\n"
	if strings.HasPrefix(host, "host") {
		s += "HOST=" + host + "\nMYID=" + strings.TrimPrefix(host, "host") + "\n"
	}
	return s
}

// copyTarballs stands in for "scp it to every host".
func (g *guideLab) copyTarballs(gh *guideHost) {
	tars, _ := filepath.Glob(filepath.Join(g.repo, "dist", "magnetar-guide*-linux-*.tar.gz"))
	for _, src := range tars {
		dst := filepath.Join(gh.dir, "cwd", filepath.Base(src))
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		b, err := os.ReadFile(src)
		if err == nil {
			err = os.WriteFile(dst, b, 0o644)
		}
		if err != nil {
			g.t.Fatal(err)
		}
	}
}

// checkSection verifies what a section's commands cannot show by
// themselves.
func (g *guideLab) checkSection(sec string) {
	switch {
	case sec == "Rolling upgrade":
		for _, unit := range []string{"host1/magnetar-bookie", "host2/magnetar-broker", "host3/magnetar-proxy", "host4/magnetar-bookie"} {
			h, u, _ := strings.Cut(unit, "/")
			pid, err := os.ReadFile(filepath.Join(g.hosts[h].dir, "state", u+".pid"))
			if err != nil {
				g.t.Fatalf("%s: %v", unit, err)
			}
			exe, err := os.Readlink("/proc/" + strings.TrimSpace(string(pid)) + "/exe")
			if err != nil || !strings.Contains(exe, "magnetar-guide2/") {
				g.t.Fatalf("%s runs %q (%v) after the upgrade, want the new release", unit, exe, err)
			}
		}
	case sec == "Backing up the metadata":
		backups, _ := filepath.Glob(filepath.Join(g.hosts["host2"].dir, "var.up", "backups", "zookeeper-*.tar.gz"))
		if len(backups) != 1 {
			g.t.Fatalf("backups on host2: %v", backups)
		}
		out, err := exec.Command("tar", "-tzf", backups[0]).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "version-2/snapshot.") || !strings.Contains(string(out), "version-2/log.") {
			g.t.Fatalf("the backup holds no snapshot and log: %v\n%s", err, out)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "...\n" + s[len(s)-n:]
	}
	return s
}

var (
	e2ePublishedRE = regexp.MustCompile(`(?m)^published +(\d+) msgs .* errors (\d+)$`)
	e2eConsumedRE  = regexp.MustCompile(`(?m)^consumed +(\d+) msgs`)
)

// checkE2E holds perf e2e's report to what the guide says: every message
// published was consumed, without errors.
func checkE2E(t *testing.T, b guideBlock, out string) {
	p, c := e2ePublishedRE.FindStringSubmatch(out), e2eConsumedRE.FindStringSubmatch(out)
	if p == nil || c == nil || p[1] == "0" || p[1] != c[1] || p[2] != "0" {
		t.Fatalf("docs/deploy.md:%d: perf e2e published %v, consumed %v: want every message consumed, no errors", b.line, p, c)
	}
}
