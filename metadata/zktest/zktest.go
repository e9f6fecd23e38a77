// Package zktest runs real ZooKeeper servers for tests, through
// scripts/zookeeper.sh: one server or an ensemble on free loopback ports,
// with nodes that can be stopped and restarted. ZooKeeper is installed by
// the script when missing; a test that needs ZooKeeper fails, never skips,
// when it cannot be started, except under go test -short (StartForTest,
// SkipIfShort), the fast inner loop that make test-short runs.
package zktest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SkipIfShort skips t under go test -short: starting ZooKeeper (a JVM)
// takes seconds, so the fast inner loop leaves these tests to make test.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real ZooKeeper server (scripts/zookeeper.sh): skipped under -short; make test runs it")
	}
}

// StartForTest starts nodes servers under a temporary directory of t and
// stops them when t ends. It skips t under -short and fails it when
// ZooKeeper does not start.
func StartForTest(t testing.TB, nodes int) *Cluster {
	t.Helper()
	SkipIfShort(t)
	c, err := Start(t.TempDir(), nodes)
	if err != nil {
		t.Fatalf("ZooKeeper is required for this test and did not start (scripts/zookeeper.sh install): %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// Cluster is a running ZooKeeper server or ensemble.
type Cluster struct {
	// Connection is the metadata connection string, "zk:host:port,...".
	Connection string
	// Hosts are the servers' host:port, in node order (node i is Hosts[i-1]).
	Hosts []string
	dir   string
}

// Start starts nodes servers under dir (which must not hold one yet) and
// waits until they serve requests. The servers die with this process even
// if it never calls Stop.
func Start(dir string, nodes int) (*Cluster, error) {
	out, err := script("start", dir, strconv.Itoa(nodes))
	if err != nil {
		return nil, err
	}
	conn := strings.TrimSpace(out)
	if !strings.HasPrefix(conn, "zk:") {
		return nil, fmt.Errorf("zktest: unexpected output from zookeeper.sh start: %q", out)
	}
	return &Cluster{Connection: conn, Hosts: strings.Split(strings.TrimPrefix(conn, "zk:"), ","), dir: dir}, nil
}

// Stop kills every node.
func (c *Cluster) Stop() error {
	_, err := script("stop", c.dir)
	return err
}

// StopNode kills node i (1-based) at once, as a crash would; its data stays.
func (c *Cluster) StopNode(i int) error {
	_, err := script("stop-node", c.dir, strconv.Itoa(i))
	return err
}

// StartNode starts node i again and waits until it answers requests.
func (c *Cluster) StartNode(i int) error {
	if _, err := script("start-node", c.dir, strconv.Itoa(i)); err != nil {
		return err
	}
	return c.waitServing(i, 30*time.Second)
}

// ServerLog returns node i's log, for failure messages.
func (c *Cluster) ServerLog(i int) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("node%d", i), "server.log"))
	return string(b)
}

func (c *Cluster) waitServing(i int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok, _ := Serving(c.Hosts[i-1]); ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("zktest: node %d (%s) did not serve within %s", i, c.Hosts[i-1], timeout)
}

// script runs scripts/zookeeper.sh with a watchdog tied to this process.
func script(args ...string) (string, error) {
	path, err := scriptPath()
	if err != nil {
		return "", err
	}
	// Bounded, so a wedged start fails the test instead of hanging CI.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "ZK_PARENT_PID="+strconv.Itoa(os.Getpid()))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("zktest: zookeeper.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// scriptPath finds scripts/zookeeper.sh from this source file's location,
// which works for every test package in the module.
func scriptPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("zktest: cannot locate the source tree")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "zookeeper.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("zktest: %w", err)
	}
	return p, nil
}
