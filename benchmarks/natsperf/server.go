package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// stopTimeout bounds the wait for nats-server to exit after SIGTERM; past
// it the server is killed, so a stuck server cannot hang the benchmark.
const stopTimeout = 15 * time.Second

// server is a nats-server process this run started, with its own
// directory holding the store, the config file and the log.
type server struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process exited
	waitErr error         // the process's exit, valid once exited is closed
	dir     string
	logPath string
	url     string // client URL
	monitor string // monitoring endpoint, http://host:port
}

// startServer starts cfg.ServerBin on free loopback ports. On error
// nothing is left running or on disk.
func startServer(cfg Config) (*server, error) {
	if cfg.Sync == syncAlways {
		if err := checkSyncIntervalSupport(cfg.ServerBin); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(cfg.Dir, "natsperf-")
	if err != nil {
		return nil, fmt.Errorf("creating the server's directory: %w", err)
	}
	s := &server{dir: dir, logPath: filepath.Join(dir, "server.log"), exited: make(chan struct{})}
	if err := s.launch(cfg); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// launch writes the config the variant needs and starts the process.
func (s *server) launch(cfg Config) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	store := filepath.Join(s.dir, "store")
	args := []string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(ports[0]), "-m", strconv.Itoa(ports[1])}
	if cfg.Sync == syncAlways {
		conf := filepath.Join(s.dir, "nats.conf")
		// sync_interval lives only in the config file: there is no flag.
		// The store goes there too: the server refuses -sd beside a
		// config's store_dir.
		text := fmt.Sprintf("jetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", store)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return fmt.Errorf("writing the server config: %w", err)
		}
		args = append(args, "-c", conf)
	} else {
		args = append(args, "-sd", store)
	}
	log, err := os.Create(s.logPath)
	if err != nil {
		return fmt.Errorf("creating the server log: %w", err)
	}
	defer log.Close() // the child holds its own copy
	s.cmd = exec.Command(cfg.ServerBin, args...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// Its own process group: a Ctrl-C at the terminal reaches only
	// natsperf, which then stops the server in order.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", cfg.ServerBin, err)
	}
	go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
	s.url = fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	s.monitor = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	return nil
}

// stop ends the server with SIGTERM (JetStream then flushes and closes
// its stores), kills it if it does not exit in time, and removes its
// directory.
func (s *server) stop() error {
	var err error
	if s.cmd != nil && s.cmd.Process != nil {
		err = s.terminate()
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("removing %s: %w", s.dir, rmErr))
	}
	return err
}

func (s *server) terminate() error {
	select {
	case <-s.exited:
		return nil // already gone; startup errors report why
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling nats-server: %w", err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = s.cmd.Process.Kill() // fails only if it exited meanwhile
	<-s.exited
	return fmt.Errorf("nats-server did not exit within %s of SIGTERM; killed", stopTimeout)
}

// logTail is the end of the server's log, for errors about it.
func (s *server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(bytes.TrimSpace(b))
}

// freePorts asks the kernel for n unused loopback ports. They are released
// before the server binds them; another process taking one meanwhile makes
// the server exit, which startup reports with its log.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close() // held until all are chosen, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// versionRE matches `nats-server --version` output: "nats-server: v2.9.10".
var versionRE = regexp.MustCompile(`v(\d+)\.(\d+)\.(\d+)`)

// checkSyncIntervalSupport refuses servers older than 2.10: they reject
// sync_interval as an unknown field, and running them as "always" would
// mislabel the default.
func checkSyncIntervalSupport(bin string) error {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %s --version: %w (%s)", bin, err, bytes.TrimSpace(out))
	}
	major, minor, ok := parseVersion(string(out))
	if !ok {
		return fmt.Errorf("%s --version printed %q: no version found", bin, bytes.TrimSpace(out))
	}
	if major < 2 || major == 2 && minor < 10 {
		return fmt.Errorf("--sync always: %s is %s, which has no jetstream sync_interval (added in nats-server 2.10); "+
			"build a newer server with scripts/install-nats.sh and pass --server-bin bin/nats-server",
			bin, bytes.TrimSpace(out))
	}
	return nil
}

func parseVersion(s string) (major, minor int, ok bool) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1]) // digits by the pattern
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}
