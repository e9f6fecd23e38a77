package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is a server process this run started (standalone, bookie,
// broker). Its output goes to a log file and is kept in memory to find
// its ready line.
type server struct {
	name   string
	cmd    *exec.Cmd
	log    *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
	err    error
}

// startServer runs bin with args, logging into logPath.
func startServer(name, bin, logPath string, args ...string) (*server, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &server{name: name, cmd: exec.Command(bin, args...), log: f, exited: make(chan struct{})}
	w := io.MultiWriter(f, (*lockedWriter)(s))
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	return s, nil
}

type lockedWriter server

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}

func (s *server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// waitReady waits for the process's ready line.
func (s *server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(s.output(), " ready") {
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited before it was ready (%v); its log: %s", s.name, s.err, s.log.Name())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s; its log: %s", s.name, timeout, s.log.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// stop ends the process with SIGTERM (a clean shutdown that loses nothing
// acknowledged), or SIGKILL after a minute.
func (s *server) stop() error {
	defer s.log.Close()
	select {
	case <-s.exited:
		return fmt.Errorf("%s had exited: %v", s.name, s.err)
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return nil
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%s did not stop within a minute of SIGTERM: killed", s.name)
	}
}

// peakRSSMiB is the process's peak resident memory so far (VmHWM).
func (s *server) peakRSSMiB() (float64, error) {
	return procStatusMiB(s.cmd.Process.Pid, "VmHWM:")
}

func procStatusMiB(pid int, key string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, key)
}

// cpuSeconds is the CPU time (user + system) the process used so far.
func (s *server) cpuSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (utime + stime) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cpuMeter measures servers' CPU use over a run, in cores, and the
// whole machine's.
type cpuMeter struct {
	servers []*server
	start   time.Time
	cpu     float64
	busy    float64 // the machine's busy CPU seconds at start (0: unknown)
}

func meterCPU(servers ...*server) *cpuMeter {
	m := &cpuMeter{servers: servers, start: time.Now()}
	m.cpu = m.total()
	m.busy, _ = machineBusySeconds()
	return m
}

// machineCores is the CPU the whole machine was busy with since meterCPU
// (servers, clients, the kernel's own threads: page-cache writeback, the
// disk's interrupts), per second of wall time; 0 when /proc/stat is not
// readable.
func (m *cpuMeter) machineCores() float64 {
	now, err := machineBusySeconds()
	if err != nil || m.busy == 0 {
		return 0
	}
	return (now - m.busy) / time.Since(m.start).Seconds()
}

// machineBusySeconds reads the busy CPU time of all CPUs from the first
// line of /proc/stat: user, nice, system, irq and softirq (idle, iowait
// and steal are not this machine's work).
func machineBusySeconds() (float64, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStatBusy(string(raw))
}

func parseProcStatBusy(stat string) (float64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy float64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system (idle iowait) irq softirq
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i, line, err)
		}
		busy += v
	}
	return busy / clockTicks, nil
}

func (m *cpuMeter) total() float64 {
	var sum float64
	for _, s := range m.servers {
		if c, err := s.cpuSeconds(); err == nil {
			sum += c
		}
	}
	return sum
}

// cores is the CPU the servers used since meterCPU, per second of wall time.
func (m *cpuMeter) cores() float64 {
	return (m.total() - m.cpu) / time.Since(m.start).Seconds()
}
