package metadata_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/metadatatest"
	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// One ZooKeeper server is shared by the tests of this package that do not
// stop servers; each test works under its own chroot.
var shared struct {
	once    sync.Once
	cluster *zktest.Cluster
	dir     string
	err     error
	chroots atomic.Int64
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cluster != nil {
		_ = shared.cluster.Stop()
		os.RemoveAll(shared.dir)
	}
	stopSharedEtcd()
	os.Exit(code)
}

func sharedZK(t *testing.T) *zktest.Cluster {
	t.Helper()
	zktest.SkipIfShort(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "magnetar-zk-")
		if shared.err == nil {
			shared.cluster, shared.err = zktest.Start(shared.dir, 1)
		}
	})
	if shared.err != nil {
		t.Fatalf("ZooKeeper is required for this test and did not start (scripts/zookeeper.sh install): %v", shared.err)
	}
	return shared.cluster
}

// startZK starts a private server or ensemble for a test that stops nodes.
func startZK(t *testing.T, nodes int) *zktest.Cluster {
	t.Helper()
	return zktest.StartForTest(t, nodes)
}

// testSessionTimeout is short enough to force expiries quickly and long
// enough (a 4 s receive timeout) that a loaded 2-core machine running the
// race detector and the JVM does not drop connections spuriously.
const testSessionTimeout = 6 * time.Second

func openZK(t *testing.T, connection string, opts metadata.ZKOptions) metadata.Store {
	t.Helper()
	target, err := metadata.ParseTarget(connection)
	if err != nil {
		t.Fatal(err)
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = testSessionTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := metadata.OpenZK(ctx, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func freshChroot(t *testing.T, zk *zktest.Cluster) string {
	return fmt.Sprintf("%s/test-%d", zk.Connection, shared.chroots.Add(1))
}

func TestZKConformance(t *testing.T) {
	zk := sharedZK(t)
	metadatatest.Run(t, func(t *testing.T) metadatatest.Harness {
		conn := freshChroot(t, zk)
		var mu sync.Mutex
		nets := map[metadata.Store]*zktest.Dialer{}
		return metadatatest.Harness{
			NewSession: func(t *testing.T) metadata.Store {
				fn := &zktest.Dialer{}
				s := openZK(t, conn, metadata.ZKOptions{Dial: fn.Dial})
				mu.Lock()
				nets[s] = fn
				mu.Unlock()
				return s
			},
			// A session expires when its client stays away longer than
			// the session timeout, whatever the client does meanwhile.
			Expire: func(t *testing.T, s metadata.Store) {
				mu.Lock()
				fn := nets[s]
				mu.Unlock()
				fn.Cut()
				time.Sleep(testSessionTimeout + 1500*time.Millisecond)
				fn.Heal()
			},
		}
	})
}

func TestZKPersistentWatchBinding(t *testing.T) {
	zk := sharedZK(t)
	conn := freshChroot(t, zk)
	chroot := strings.TrimPrefix(conn, zk.Connection)
	s := openZK(t, conn, metadata.ZKOptions{})
	ctx := context.Background()
	w, err := s.Watch(ctx, "/a")
	if err != nil {
		t.Fatalf("addWatch through go-zookeeper's request path: %v", err)
	}
	defer w.Close()
	if _, err := s.Put(ctx, "/a/b/c", []byte("x"), metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	want := []metadata.Event{{Type: metadata.EventCreated, Path: "/a"}, {Type: metadata.EventCreated, Path: "/a/b"},
		{Type: metadata.EventChildrenChanged, Path: "/a"}, {Type: metadata.EventCreated, Path: "/a/b/c"},
		{Type: metadata.EventChildrenChanged, Path: "/a/b"}}
	for _, ev := range want {
		select {
		case got, ok := <-w.Events():
			if !ok || got != ev {
				t.Fatalf("got %v (open %v), want %v; err %v", got, ok, ev, w.Err())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %v", ev)
		}
	}
	w.Close()
	// The server-side watch goes too (removed in the background).
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := zktest.FourLetter(zk.Hosts[0], "wchp")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, chroot+"/a\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still has the watch after Close:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.Put(ctx, "/a/b/c", []byte("y"), metadata.AnyVersion); err != nil {
		t.Fatalf("put after removing the watch: %v", err)
	}
}

func TestZKChroot(t *testing.T) {
	zk := sharedZK(t)
	root := openZK(t, zk.Connection, metadata.ZKOptions{})
	conn := freshChroot(t, zk)
	chroot := strings.TrimPrefix(conn, zk.Connection)
	s := openZK(t, conn, metadata.ZKOptions{})
	ctx := context.Background()
	if ok, _, err := root.Exists(ctx, chroot); !ok || err != nil {
		t.Fatalf("open did not create the chroot %s: %v %v", chroot, ok, err)
	}
	p, _, err := s.Create(ctx, "/q/item-", []byte("v"), metadata.CreateOptions{Sequential: true})
	if err != nil || !strings.HasPrefix(p, "/q/item-") {
		t.Fatalf("sequential create in chroot: %q %v", p, err)
	}
	v, _, err := root.Get(ctx, chroot+p)
	if err != nil || string(v) != "v" {
		t.Fatalf("node not under the chroot: %q %v", v, err)
	}
	kids, err := s.Children(ctx, "/")
	if err != nil || fmt.Sprint(kids) != "[q]" {
		t.Fatalf("chroot root children %v %v", kids, err)
	}
}

// logBuffer collects log records for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestZKDownAtStart(t *testing.T) {
	zk := startZK(t, 1)
	if err := zk.StopNode(1); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	// Debug, so a failure shows go-zookeeper's own account of each attempt.
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	target, _ := metadata.ParseTarget(zk.Connection)

	// Nobody answers: Open gives up when its context does, saying why.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := metadata.OpenZK(ctx, target, metadata.ZKOptions{SessionTimeout: testSessionTimeout, Logger: logger})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no ZooKeeper session") {
		t.Fatalf("open with ZooKeeper down: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("open took %s past its 1.5 s context", time.Since(start))
	}
	if !strings.Contains(logs.String(), "cannot reach ZooKeeper, retrying") {
		t.Fatalf("no retry log line:\n%s", logs.String())
	}

	// ZooKeeper comes up while Open retries: Open succeeds.
	done := make(chan error, 1)
	go func() {
		// Generous: on a loaded CI machine a JVM that just started can take
		// many seconds to answer its first session request.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		s, err := metadata.OpenZK(ctx, target, metadata.ZKOptions{SessionTimeout: testSessionTimeout, Logger: logger})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond)
	if err := zk.StartNode(1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("open while ZooKeeper starts: %v\nclient log:\n%s\nserver log tail:\n%s", err, logs.String(), tail(zk.ServerLog(1), 3000))
	}
	if !strings.Contains(logs.String(), "ZooKeeper reachable again") {
		t.Fatalf("no recovery log line:\n%s", logs.String())
	}
}

func TestZKDownWhileRunning(t *testing.T) {
	zk := startZK(t, 1)
	var logs logBuffer
	t.Cleanup(func() {
		if t.Failed() { // once: a restarted server answered no session request for 30 s under load
			t.Logf("client log:\n%s\nserver log tail:\n%s", logs.String(), tail(zk.ServerLog(1), 4000))
		}
	})
	s := openZK(t, zk.Connection, metadata.ZKOptions{SessionTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()
	states := s.SessionEvents()
	expectState(t, states, metadata.SessionConnected)
	if _, _, err := s.Create(ctx, "/owner", nil, metadata.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := zk.StopNode(1); err != nil {
		t.Fatal(err)
	}
	expectState(t, states, metadata.SessionSuspended)
	waitWatchEnd(t, w)
	if !errors.Is(w.Err(), metadata.ErrWatchInterrupted) {
		t.Fatalf("watch after connection loss: %v", w.Err())
	}
	opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = s.Get(opCtx, "/owner")
	if err == nil || !strings.Contains(err.Error(), "ZooKeeper") {
		t.Fatalf("get while ZooKeeper is down: %v", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("get hung for %s with a 2 s context", took)
	}
	t.Logf("get while down failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if err := zk.StartNode(1); err != nil {
		t.Fatal(err)
	}
	expectState(t, states, metadata.SessionReconnected)
	ok, st, err := s.Exists(ctx, "/owner")
	if err != nil || !ok || !st.Ephemeral {
		t.Fatalf("ephemeral after reconnecting within the session timeout: %v %+v %v", ok, st, err)
	}
}

func expectState(t *testing.T, w *metadata.SessionWatcher, want metadata.SessionState) {
	t.Helper()
	select {
	case got, ok := <-w.States():
		if !ok || got != want {
			t.Fatalf("session state %v (open %v), want %v; err %v", got, ok, want, w.Err())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no %v session event", want)
	}
}

// waitWatchEnd drains w until it ends, failing the test after 30 s.
func waitWatchEnd(t *testing.T, w *metadata.Watcher) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("watch did not end")
		}
	}
}

func TestOpenZKConnectionString(t *testing.T) {
	conn := freshChroot(t, sharedZK(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := metadata.Open(ctx, conn, metadata.Options{SessionTimeout: testSessionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(ctx, "/x", []byte("v"), metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// A store cut from every ZooKeeper server declares its session lost by
// itself once one and a half session timeouts have passed since a server
// last answered (the servers expire it at the first tick past the timeout),
// without reaching a server again: by then the servers have expired it and
// another process may hold what it owned (a broker cut from ZooKeeper then
// closes its bundles at once instead of serving them until the cut heals).
// A cut shorter than the timeout keeps the session.
func TestZKCutPastSessionTimeoutIsSessionLost(t *testing.T) {
	zk := startZK(t, 1)
	const timeout = 4 * time.Second
	dialer := &zktest.Dialer{}
	s := openZK(t, zk.Connection, metadata.ZKOptions{SessionTimeout: timeout, Dial: dialer.Dial})
	states := s.SessionEvents()
	expectState(t, states, metadata.SessionConnected)

	dialer.Cut() // shorter than the timeout: the session survives
	expectState(t, states, metadata.SessionSuspended)
	time.Sleep(timeout / 4)
	dialer.Heal()
	expectState(t, states, metadata.SessionReconnected)

	ctx := context.Background()
	if _, _, err := s.Create(ctx, "/owner", nil, metadata.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	dialer.Cut() // and never healed
	expectState(t, states, metadata.SessionSuspended)
	expectState(t, states, metadata.SessionLost)
	took := time.Since(cut)
	// One and a half timeouts after a server last answered, which was at
	// most a ping interval (a third of the timeout) before the cut.
	if took > timeout*3/2+time.Second || took < timeout {
		t.Fatalf("session lost %s after the cut, want about 1.5 x the %s timeout", took.Round(time.Millisecond), timeout)
	}
	t.Logf("session lost %s after the cut (timeout %s)", took.Round(time.Millisecond), timeout)
	if _, _, err := s.Get(ctx, "/owner"); !errors.Is(err, metadata.ErrSessionLost) {
		t.Fatalf("get after the session was lost: %v, want ErrSessionLost", err)
	}
}

// While servers accept connections but do not answer the session's
// handshake (an ensemble electing a leader: the new one renews the sessions
// it inherits), the store does not declare its session lost by itself; it
// waits for the servers' own answer.
func TestZKSilentServersDoNotEndTheSession(t *testing.T) {
	zk := startZK(t, 1)
	const timeout = 4 * time.Second
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accepts and never answers, as a server without a leader
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	real := &zktest.Dialer{}
	dial, quiet := divertingDial(real, silent.Addr().String())
	s := openZK(t, zk.Connection, metadata.ZKOptions{SessionTimeout: timeout, Dial: dial})
	states := s.SessionEvents()
	expectState(t, states, metadata.SessionConnected)
	quiet.Store(true)
	real.Cut()
	expectState(t, states, metadata.SessionSuspended)
	select {
	case st := <-states.States():
		t.Fatalf("session state %v while servers accepted connections but had not answered", st)
	case <-time.After(timeout*3/2 + time.Second):
	}
}

// A ZooKeeper ensemble electing a leader takes connections and closes
// them (a server answers a session's handshake only under a leader). The
// store must be back soon after the election ends: go-zookeeper pauses a
// whole second after each round of servers that all failed, which made
// every broker and bookie wait about half a second past a 0.6 s election
// in the fault suite's kill-zk-leader runs (issue 40: ZooKeeper faults
// under 1 s).
func TestZKReconnectsSoonAfterAnElection(t *testing.T) {
	zk := sharedZK(t)
	electing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer electing.Close()
	go func() { // reads the handshake and hangs up, as a server without a leader
		for {
			c, err := electing.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				_, _ = c.Read(make([]byte, 64))
			}()
		}
	}()
	real := &zktest.Dialer{}
	dial, inElection := divertingDial(real, electing.Addr().String())
	// Three servers, as an ensemble (all this one ZooKeeper).
	target, chroot, _ := strings.Cut(strings.TrimPrefix(freshChroot(t, zk), "zk:"), "/")
	conn := "zk:" + strings.Join([]string{target, target, target}, ",") + "/" + chroot
	s := openZK(t, conn, metadata.ZKOptions{SessionTimeout: 4 * time.Second, Dial: dial})
	states := s.SessionEvents()
	expectState(t, states, metadata.SessionConnected)

	inElection.Store(true)
	real.Cut()
	expectState(t, states, metadata.SessionSuspended)
	time.Sleep(150 * time.Millisecond) // the election
	inElection.Store(false)
	real.Heal()
	elected := time.Now()
	expectState(t, states, metadata.SessionReconnected)
	took := time.Since(elected)
	t.Logf("reconnected %s after the election ended", took.Round(time.Millisecond))
	if took > 500*time.Millisecond {
		t.Fatalf("reconnected %s after the election ended, want within 500 ms", took.Round(time.Millisecond))
	}
	if _, _, err := s.Create(context.Background(), "/after", nil, metadata.CreateOptions{}); err != nil {
		t.Fatalf("create after the election: %v", err)
	}
}

// divertingDial dials through real, or to other while the returned flag
// is set (servers that take connections but serve no session).
func divertingDial(real *zktest.Dialer, other string) (func(string, string, time.Duration) (net.Conn, error), *atomic.Bool) {
	divert := &atomic.Bool{}
	return func(network, addr string, d time.Duration) (net.Conn, error) {
		if divert.Load() {
			return net.DialTimeout(network, other, d)
		}
		return real.Dial(network, addr, d)
	}, divert
}
