// Package etcdtest runs real etcd servers for tests, through
// scripts/etcd.sh: one server or a cluster on free loopback ports, with
// nodes that can be stopped and restarted. etcd (Debian's etcd-server) is
// installed by the script when missing; a test that needs etcd fails,
// never skips, when it cannot be started, except under go test -short
// (StartForTest, SkipIfShort), the fast inner loop that make test-short
// runs.
package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// SkipIfShort skips t under go test -short.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real etcd server (scripts/etcd.sh): skipped under -short; make test runs it")
	}
}

// StartForTest starts nodes servers under a temporary directory of t and
// stops them when t ends. It skips t under -short and fails it when etcd
// does not start. tlsDir, when not empty, holds ca.pem, server.pem and
// server-key.pem: the servers then require client certificates.
func StartForTest(t testing.TB, nodes int, tlsDir string) *Cluster {
	t.Helper()
	SkipIfShort(t)
	c, err := Start(t.TempDir(), nodes, tlsDir)
	if err != nil {
		t.Fatalf("etcd is required for this test and did not start (scripts/etcd.sh install): %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// Cluster is a running etcd server or cluster.
type Cluster struct {
	// Connection is the metadata connection string, "etcd:http://host:port,...".
	Connection string
	// Endpoints are the servers' client URLs, in node order (node i is
	// Endpoints[i-1]).
	Endpoints []string
	dir       string
	tlsDir    string
}

// Start starts nodes servers under dir and waits until they serve
// requests. The servers die with this process even if it never calls Stop.
func Start(dir string, nodes int, tlsDir string) (*Cluster, error) {
	out, err := script(tlsDir, "start", dir, strconv.Itoa(nodes))
	if err != nil {
		return nil, err
	}
	conn := strings.TrimSpace(out)
	if !strings.HasPrefix(conn, "etcd:") {
		return nil, fmt.Errorf("etcdtest: unexpected output from etcd.sh start: %q", out)
	}
	return &Cluster{Connection: conn, Endpoints: strings.Split(strings.TrimPrefix(conn, "etcd:"), ","),
		dir: dir, tlsDir: tlsDir}, nil
}

// Stop kills every node.
func (c *Cluster) Stop() error {
	_, err := script(c.tlsDir, "stop", c.dir)
	return err
}

// StopNode kills node i (1-based) at once, as a crash would; its data stays.
func (c *Cluster) StopNode(i int) error {
	_, err := script(c.tlsDir, "stop-node", c.dir, strconv.Itoa(i))
	return err
}

// StartNode starts node i again and waits until its client port accepts.
func (c *Cluster) StartNode(i int) error {
	if _, err := script(c.tlsDir, "start-node", c.dir, strconv.Itoa(i)); err != nil {
		return err
	}
	host := strings.TrimPrefix(strings.TrimPrefix(c.Endpoints[i-1], "http://"), "https://")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", host, time.Second); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("etcdtest: node %d (%s) did not listen within 30 s", i, host)
}

// ServerLog returns node i's log, for failure messages.
func (c *Cluster) ServerLog(i int) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("node%d", i), "server.log"))
	return string(b)
}

// Leader returns the node (1-based) that is the raft leader, asking each
// running node; 0 if none answers within 15 s. Plain-HTTP clusters only.
func (c *Cluster) Leader() int {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for i, ep := range c.Endpoints {
			if c.isLeader(ep) {
				return i + 1
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0
}

func (c *Cluster) isLeader(ep string) bool {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second, Logger: quietZap()})
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := cli.Status(ctx, ep)
	return err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId
}

// Client returns a raw etcd client on every endpoint (plain HTTP), for
// tests that act on the server directly (compaction, lease revocation).
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: quietZap()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// script runs scripts/etcd.sh with a watchdog tied to this process.
func script(tlsDir string, args ...string) (string, error) {
	path, err := scriptPath()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "ETCD_PARENT_PID="+strconv.Itoa(os.Getpid()))
	if tlsDir != "" {
		cmd.Env = append(cmd.Env, "ETCD_TLS_DIR="+tlsDir)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("etcdtest: etcd.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func scriptPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("etcdtest: cannot locate the source tree")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "etcd.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	return p, nil
}

func quietZap() *zap.Logger { return zap.NewNop() }
