// Package netlab builds a small network of "hosts" on one Linux machine for
// tests that need links they can cut: each host is a network namespace with
// one veth interface on a shared bridge, addressed from 198.18.0.0/15 (the
// benchmarking range, never routed). Nothing leaves the machine: the
// namespaces have no default route and the bridge has no uplink.
//
//	lab, err := netlab.New("mgc")          // removes a crashed run's leftovers first
//	defer lab.Close()                      // kills the hosts' processes, deletes everything
//	a, _ := lab.AddHost("zk1")             // namespace mgc-zk1, address 198.18.0.10
//	cmd := a.Command("java", ...)          // runs inside the namespace (ip netns exec)
//	lab.Cut("zk1", "broker1")              // drop traffic both ways
//	lab.Heal("zk1", "broker1"); lab.HealAll()
//
// Links are cut with blackhole routes inside both namespaces (ip route add
// blackhole PEER/32): packets to the peer are dropped silently, so open TCP
// connections hang as they do in a real partition rather than being reset.
// That needs nothing beyond iproute2 (no nftables or iptables, which the
// machines lack), and a cut is one route per side, removed by Heal. The
// process running the lab (in the root namespace) reaches every host
// through the bridge's own address, 198.18.0.1, and is never cut.
//
// Needs root. Names are kept short: Linux interface names have 15 bytes.
package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// MaxHosts bounds a lab: host i gets 198.18.0.(10+i).
const MaxHosts = 200

// Lab is one bridge and its hosts.
type Lab struct {
	prefix string
	bridge string
	mu     struct {
		sync.Mutex
		hosts map[string]*Host
		order []string
		cuts  map[[2]string]bool
	}
}

// Host is a network namespace on the lab's bridge.
type Host struct {
	Name string // as given to AddHost
	NS   string // the namespace: prefix-name
	Addr string // its IPv4 address
	veth string // the root-side end of its veth pair
}

// Available reports why a lab cannot be built here (nil if it can).
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netlab: needs root (network namespaces, veth, bridges)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("netlab: needs iproute2's ip")
	}
	return nil
}

// New removes the leftovers of an earlier lab with the same prefix (a
// crashed run), then creates the bridge prefix+"br" with 198.18.0.1/24.
// prefix must be at most 6 bytes.
func New(prefix string) (*Lab, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if prefix == "" || len(prefix) > 6 {
		return nil, fmt.Errorf("netlab: prefix %q must be 1 to 6 bytes", prefix)
	}
	l := &Lab{prefix: prefix, bridge: prefix + "br"}
	l.mu.hosts = map[string]*Host{}
	l.mu.cuts = map[[2]string]bool{}
	Cleanup(prefix)
	if err := ipAll([][]string{
		{"link", "add", l.bridge, "type", "bridge"},
		{"addr", "add", "198.18.0.1/24", "dev", l.bridge},
		{"link", "set", l.bridge, "up"},
	}); err != nil {
		Cleanup(prefix)
		return nil, err
	}
	return l, nil
}

// AddHost creates namespace prefix-name with address 198.18.0.(10+i) for
// the i-th host, lo up, and its veth on the bridge.
func (l *Lab) AddHost(name string) (*Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.mu.hosts[name]; ok {
		return nil, fmt.Errorf("netlab: host %s exists", name)
	}
	i := len(l.mu.order)
	if i >= MaxHosts {
		return nil, fmt.Errorf("netlab: at most %d hosts", MaxHosts)
	}
	h := &Host{Name: name, NS: l.prefix + "-" + name, Addr: "198.18.0." + strconv.Itoa(10+i),
		veth: l.prefix + "v" + strconv.Itoa(i)}
	peer := l.prefix + "p" + strconv.Itoa(i)
	if err := ipAll([][]string{
		{"netns", "add", h.NS},
		{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.NS},
		{"link", "set", h.veth, "master", l.bridge},
		{"link", "set", h.veth, "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
		{"-n", h.NS, "link", "set", peer, "name", "eth0"},
		{"-n", h.NS, "addr", "add", h.Addr + "/24", "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
	}); err != nil {
		_ = ip("netns", "del", h.NS)
		_ = ip("link", "del", h.veth)
		return nil, err
	}
	l.mu.hosts[name] = h
	l.mu.order = append(l.mu.order, name)
	return h, nil
}

// Host returns the host called name, or nil.
func (l *Lab) Host(name string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.hosts[name]
}

// Command returns a command that runs inside h's namespace. ip netns exec
// execs the program, so cmd.Process.Pid is the program's own pid (signals
// reach it). The child is killed if the lab's process dies
// (PR_SET_PDEATHSIG), and runs in its own process group.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Cut drops all traffic between hosts a and b, both ways, until Heal.
func (l *Lab) Cut(a, b string) error {
	return l.route("add", a, b)
}

// Heal restores the link between a and b.
func (l *Lab) Heal(a, b string) error {
	return l.route("del", a, b)
}

func (l *Lab) route(op, a, b string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ha, hb := l.mu.hosts[a], l.mu.hosts[b]
	if ha == nil || hb == nil || a == b {
		return fmt.Errorf("netlab: cannot cut or heal %s-%s", a, b)
	}
	key := [2]string{min(a, b), max(a, b)}
	if (op == "add") == l.mu.cuts[key] {
		return nil // already in that state
	}
	if err := ipAll([][]string{
		{"-n", ha.NS, "route", op, "blackhole", hb.Addr + "/32"},
		{"-n", hb.NS, "route", op, "blackhole", ha.Addr + "/32"},
	}); err != nil {
		return err
	}
	if op == "add" {
		l.mu.cuts[key] = true
	} else {
		delete(l.mu.cuts, key)
	}
	return nil
}

// Cuts lists the links cut now, as "a-b".
func (l *Lab) Cuts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.mu.cuts {
		out = append(out, k[0]+"-"+k[1])
	}
	sort.Strings(out)
	return out
}

// HealAll restores every link cut.
func (l *Lab) HealAll() error {
	l.mu.Lock()
	var keys [][2]string
	for k := range l.mu.cuts {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	var errs []error
	for _, k := range keys {
		errs = append(errs, l.Heal(k[0], k[1]))
	}
	return errors.Join(errs...)
}

// Close kills every process left in the hosts' namespaces and deletes the
// namespaces, veths and bridge.
func (l *Lab) Close() error {
	Cleanup(l.prefix)
	return nil
}

// Cleanup removes every namespace named prefix-* (killing the processes
// in it first), every veth prefix+"v"* and the bridge prefix+"br": the
// leftovers of a lab whose process crashed. Errors are ignored: whatever
// is missing is already clean.
func Cleanup(prefix string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix+"-") {
			continue
		}
		pids, _ := exec.Command("ip", "netns", "pids", f[0]).Output()
		for _, p := range strings.Fields(string(pids)) {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = ip("netns", "del", f[0])
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(links), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, prefix+"v") {
			_ = ip("link", "del", name)
		}
	}
	_ = ip("link", "del", prefix+"br")
}

func ipAll(cmds [][]string) error {
	for _, c := range cmds {
		if err := ip(c...); err != nil {
			return err
		}
	}
	return nil
}

func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("netlab: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
