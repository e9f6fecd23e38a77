package main

// The magnetar standalone the suite runs against: its configuration (the
// suite's own standalone.conf), start, readiness, health, setup, stop.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// suitePorts are the ports the suite hard-codes: binary, HTTP, and their
// TLS twins.
var suitePorts = []int{6650, 8080, 6651, 8443}

const metricsURL = "http://localhost:8080/metrics"

// suiteConf is the suite's standalone.conf with its docker paths
// (/pulsar/certs, /pulsar/tokens) pointed at the module's own files, and
// the basic-authentication users file the suite's Dockerfile passes as
// -Dpulsar.auth.basic.conf given as basicAuthConf.
func suiteConf(conf []byte, moduleDir string) []byte {
	s := string(conf)
	s = strings.ReplaceAll(s, "/pulsar/certs", filepath.Join(moduleDir, "integration-tests", "certs"))
	s = strings.ReplaceAll(s, "/pulsar/tokens", filepath.Join(moduleDir, "integration-tests", "tokens"))
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	s += "basicAuthConf=" + filepath.Join(moduleDir, "integration-tests", "conf", ".htpasswd") + "\n"
	return []byte(s)
}

// portsFree fails naming the first suite port something already listens on.
func portsFree() error {
	for _, p := range suitePorts {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			return fmt.Errorf("port %d is already in use (a standalone or Pulsar still running? see `ss -ltnp 'sport = :%d'`): "+
				"the suite hard-codes localhost:6650, 8080, 6651 and 8443", p, p)
		}
		l.Close()
	}
	return nil
}

// standalone is one running magnetar standalone process.
type standalone struct {
	bin, conf, dataDir, logPath string
	cmd                         *exec.Cmd
	done                        chan error // receives Wait's result once
	exited                      error      // set once done has been read
	hasExited                   bool
}

// start launches the standalone in its own process group, appending its
// output to logPath, and waits until /metrics answers.
func (s *standalone) start(ctx context.Context) error {
	if err := portsFree(); err != nil {
		return err
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n==== %s: %s standalone --config %s --data-dir %s\n", time.Now().Format(time.RFC3339), s.bin, s.conf, s.dataDir)
	s.cmd = exec.Command(s.bin, "standalone", "--config", s.conf, "--data-dir", s.dataDir)
	s.cmd.Dir = filepath.Dir(s.conf)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s standalone: %w", s.bin, err)
	}
	s.done, s.hasExited, s.exited = make(chan error, 1), false, nil
	go func() { s.done <- s.cmd.Wait() }()
	return s.waitReady(ctx, 90*time.Second)
}

func (s *standalone) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if !s.alive() {
			return fmt.Errorf("the standalone exited while starting (%v); its log %s ends:\n%s", s.exited, s.logPath, tailFile(s.logPath, 20))
		}
		if metricsAnswer(ctx, 2*time.Second) {
			return nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("%s did not answer within %s; the standalone's log %s ends:\n%s", metricsURL, limit, s.logPath, tailFile(s.logPath, 20))
		}
		select {
		case <-ctx.Done():
			s.stop()
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// alive reports whether the process is still running.
func (s *standalone) alive() bool {
	if s.cmd == nil || s.hasExited {
		return false
	}
	select {
	case err := <-s.done:
		s.exited, s.hasExited = err, true
		return false
	default:
		return true
	}
}

// healthy reports whether the standalone runs and answers /metrics.
func (s *standalone) healthy(ctx context.Context) bool {
	return s.alive() && metricsAnswer(ctx, 10*time.Second)
}

// stop sends SIGTERM to the group, then SIGKILL after 15 s.
func (s *standalone) stop() {
	if !s.alive() {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.exited = err
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.exited = <-s.done
	}
	s.hasExited = true
}

func metricsAnswer(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// setupCommands are scripts/pulsar-test-service-start.sh's pulsar-admin
// calls, as magnetar admin arguments.
var setupCommands = [][]string{
	{"tenants", "update", "public", "-r", "anonymous"},
	{"namespaces", "grant-permission", "public/default", "--actions", "produce,consume", "--role", "anonymous"},
	{"tenants", "create", "private"},
	{"namespaces", "create", "private/auth"},
	{"namespaces", "grant-permission", "private/auth", "--actions", "produce,consume", "--role", "token-principal"},
}

// setup runs the suite's setup as the superuser admin (the suite's
// admin-token; in the suite's container pulsar-admin's client.conf
// authenticates as admin too); each failure is returned as a note and the
// rest still run.
func setup(ctx context.Context, bin, moduleDir string, logf func(string, ...any)) []string {
	var failed []string
	creds := []string{"admin", "--auth-plugin", "token", "--auth-params",
		"file://" + filepath.Join(moduleDir, "integration-tests", "tokens", "admin-token")}
	for _, args := range setupCommands {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(cctx, bin, append(creds, args...)...).CombinedOutput()
		cancel()
		line := "magnetar admin " + strings.Join(args, " ")
		if err != nil {
			first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
			msg := fmt.Sprintf("setup `%s` failed (%v): %s", line, err, shorten(first))
			logf("%s", msg)
			failed = append(failed, msg)
			continue
		}
		logf("setup: %s: ok", line)
	}
	return failed
}

var unusedKeysLine = regexp.MustCompile(`msg="config keys not used by this build".* keys=(\S+)`)

// unusedKeys is the list of configuration keys the standalone logged as
// not used, or "".
func unusedKeys(log string) string {
	if m := unusedKeysLine.FindStringSubmatch(log); m != nil {
		return strings.ReplaceAll(strings.Trim(m[1], `"`), ",", ", ")
	}
	return ""
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}

var errStandaloneDown = errors.New("the standalone is down and could not be restarted")
