package main

// The suite itself: the client module in the module cache, its test
// binary, the list of its tests, and one test run in its own process.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const clientModule = "github.com/apache/pulsar-client-go"

// module is the client module as the go command resolved it.
type module struct {
	Path, Version, Dir, Error string
}

// findModule resolves the client module at the version the repository's
// go.mod requires, downloading it into the module cache if missing.
func findModule(ctx context.Context, repo string) (module, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", clientModule)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m module
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Error != "" || err != nil {
		return m, fmt.Errorf("cannot download %s at the version in %s/go.mod (network or GOPROXY?): %v %s %s",
			clientModule, repo, err, m.Error, strings.TrimSpace(stderr.String()))
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "pulsar", "helper_for_test.go")); err != nil {
		return m, fmt.Errorf("%s@%s in %s has no pulsar/ test files: %w", m.Path, m.Version, m.Dir, err)
	}
	return m, nil
}

// buildTestBinary compiles the tests of the module's package pkg into out.
// The module cache is read-only and the suite's own dependencies may be
// missing from it: -mod=mod lets the go command fetch them.
func buildTestBinary(ctx context.Context, m module, pkg, out string, logf func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	logf("building the %s@%s %s test binary (several minutes the first time, cached after)", m.Path, m.Version, pkg)
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", out, "./"+pkg)
	cmd.Dir = m.Dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s/%s tests: %v\n%s", m.Dir, pkg, err, tail(string(b), 40))
	}
	return nil
}

// listTests is every Test function the binary holds, as -test.list prints them.
func listTests(ctx context.Context, bin, dir string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.list", ".*")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %w", bin, err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Test") {
			names = append(names, strings.TrimSpace(l))
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s -test.list listed no tests", bin)
	}
	return names, nil
}

// killGrace is how long past the test binary's own -test.timeout (which
// prints the stacks of a hung test) the harness waits before killing it.
const killGrace = 30 * time.Second

// runTest runs one test in its own process group, its output in logPath.
// It returns when the test ends, when timeout+killGrace passes (the group
// is killed) or when ctx is cancelled (the group is killed).
func runTest(ctx context.Context, bin, dir, name, logPath string, timeout time.Duration) (outcome, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return outcome{}, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-test.run", "^"+name+"$", "-test.count=1", "-test.v",
		"-test.timeout="+timeout.String())
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return outcome{}, fmt.Errorf("starting %s: %w", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout + killGrace)
	defer timer.Stop()
	var o outcome
	select {
	case err = <-done:
	case <-timer.C:
		o.TimedOut = true
		err = killGroup(cmd, done)
	case <-ctx.Done():
		o.Killed = "interrupted"
		err = killGroup(cmd, done)
	}
	o.ExitCode = exitCode(err)
	b, rerr := os.ReadFile(logPath)
	o.Output = string(b)
	return o, rerr
}

// killGroup kills a process group and waits for its leader.
func killGroup(cmd *exec.Cmd, done <-chan error) error {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return <-done
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode()
	default:
		return -1
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
