package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/zktest"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// TestMain lets a test run this binary's main as a child process (a real
// bookie process to kill -9).
func TestMain(m *testing.M) {
	if os.Getenv("MAGNETAR_TEST_RUN_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv("MAGNETAR_TEST_CLIENT") == "1" {
		os.Exit(runClientWorkload(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// skipProcessesIfShort skips t under go test -short: tests that run
// magnetar (or a client workload) as real child processes and kill them
// take seconds to tens of seconds each, so the fast inner loop (make
// test-short) leaves them to make test. Every helper here that starts a
// child process calls it; a test that starts one before any other work
// calls it first.
func skipProcessesIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real magnetar child processes: skipped under -short; make test runs it")
	}
}

// bookieProcess is a magnetar bookie child process.
type bookieProcess struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{} // closed once the process was reaped
	err    error         // its exit, set before exited is closed
}

func startBookieProcess(t *testing.T, args ...string) *bookieProcess {
	t.Helper()
	return startMagnetarProcess(t, "bookie", nil, args...)
}

// startMagnetarProcess runs "magnetar <sub> args..." as a child process
// with extra environment variables.
func startMagnetarProcess(t *testing.T, sub string, env []string, args ...string) *bookieProcess {
	t.Helper()
	skipProcessesIfShort(t)
	cmd := exec.Command(os.Args[0], append([]string{sub}, args...)...)
	cmd.Env = append(append(os.Environ(), "MAGNETAR_TEST_RUN_MAIN=1"), env...)
	p := &bookieProcess{cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", sub, err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	return p
}

func (p *bookieProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// wait returns the process's exit.
func (p *bookieProcess) wait() error {
	<-p.exited
	return p.err
}

func (p *bookieProcess) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.out.String(), "ready") {
		select {
		case <-p.exited:
			t.Fatalf("process exited before ready: %v\n%s", p.err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("process not ready:\n%s", p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type bookieTestEnv struct {
	zk       *zktest.Cluster
	dir      string
	port     int
	httpPort int
	args     []string
}

func newBookieTestEnv(t *testing.T) *bookieTestEnv {
	t.Helper()
	skipProcessesIfShort(t) // every test of this env runs bookie processes
	zk := zktest.StartForTest(t, 1)
	e := &bookieTestEnv{zk: zk, dir: t.TempDir(), port: freePort(t), httpPort: freePort(t)}
	conf := filepath.Join(e.dir, "bk_server.conf")
	// zkTimeout short, so a killed bookie's registration expires quickly.
	if err := os.WriteFile(conf, []byte("zkTimeout=2000\nflushInterval=200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.args = []string{"--config", conf, "--metadata-store", zk.Connection + "/bk",
		"--journal-dirs", filepath.Join(e.dir, "journal"), "--ledger-dirs", filepath.Join(e.dir, "l1") + "," + filepath.Join(e.dir, "l2"),
		"--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1", "--bookie-port", strconv.Itoa(e.port),
		"--http-port", strconv.Itoa(e.httpPort), "--io-backend", "std"}
	return e
}

func (e *bookieTestEnv) addr() string { return "127.0.0.1:" + strconv.Itoa(e.port) }

func testEntry(ledgerID, entryID int64, size int) []byte {
	b := make([]byte, bkproto.EntryHeadLen+size)
	bkproto.PutEntryHead(b, bkproto.EntryHead{LedgerID: ledgerID, EntryID: entryID, LAC: entryID - 1})
	for i := bkproto.EntryHeadLen; i < len(b); i++ {
		b[i] = byte(int64(i) * (entryID + 7) * (ledgerID + 3))
	}
	return b
}

// TestBookieKill9KeepsAcknowledgedEntries writes from several clients,
// kills the bookie process with SIGKILL mid-stream, restarts it on the
// same directories, and reads back every acknowledged entry byte for byte.
func TestBookieKill9KeepsAcknowledgedEntries(t *testing.T) {
	e := newBookieTestEnv(t)
	p := startBookieProcess(t, e.args...)
	p.waitReady(t)
	key := []byte("key")
	var mu sync.Mutex
	acked := map[[2]int64]bool{}
	var wg sync.WaitGroup
	for l := int64(1); l <= 4; l++ {
		cl, err := client.Dial(context.Background(), e.addr(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := make(chan struct{}, 32)
			for i := int64(0); cl.Err() == nil; i++ {
				sem <- struct{}{}
				data := testEntry(l, i, 100+int(i%3000))
				cl.Send(&bkproto.Request{Op: bkproto.OpAdd, LedgerID: l, EntryID: i, MasterKey: key, Data: data},
					func(_ *bkproto.Response, err error) {
						if err == nil {
							mu.Lock()
							acked[[2]int64{l, i}] = true
							mu.Unlock()
						}
						<-sem
					})
			}
		}()
	}
	// Let the writers run across a few storage flushes (at least a
	// second and 100 acknowledged entries), then kill.
	start := time.Now()
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 100 && time.Since(start) >= time.Second {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("only %d entries acknowledged in 30 s:\n%s", n, p.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.kill()
	wg.Wait()
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n < 100 {
		t.Fatalf("only %d entries acknowledged before the kill:\n%s", n, p.out.String())
	}
	p2 := startBookieProcess(t, e.args...)
	p2.waitReady(t)
	cl, err := client.Dial(context.Background(), e.addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Read everything back, pipelined.
	var rwg sync.WaitGroup
	sem := make(chan struct{}, 256)
	errs := make(chan error, 1)
	for k := range acked {
		sem <- struct{}{}
		rwg.Add(1)
		cl.Send(&bkproto.Request{Op: bkproto.OpRead, LedgerID: k[0], EntryID: k[1]}, func(resp *bkproto.Response, err error) {
			defer func() { <-sem; rwg.Done() }()
			if err == nil && !bytes.Equal(resp.Data, testEntry(k[0], k[1], 100+int(k[1]%3000))) {
				err = fmt.Errorf("read %d bytes that differ from those written", len(resp.Data))
			}
			if err != nil {
				select {
				case errs <- fmt.Errorf("acknowledged entry %d/%d after kill -9: %w", k[0], k[1], err):
				default:
				}
			}
		})
	}
	rwg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d acknowledged entries read back after kill -9", n)
}

// TestBookieWipedDirectoryRefusesToStart: BookKeeper #2612.
func TestBookieWipedDirectoryRefusesToStart(t *testing.T) {
	e := newBookieTestEnv(t)
	p := startBookieProcess(t, e.args...)
	p.waitReady(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := metadata.Open(ctx, e.zk.Connection+"/bk", metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	list, err := registry.Bookies(ctx, store)
	if err != nil || len(list) != 1 || list[0].Address != e.addr() {
		t.Fatalf("registered bookies: %+v %v", list, err)
	}
	for path, want := range map[string]string{
		"/api/v1/bookie/state": `"readOnly":false`,
		"/metrics":             "bookie_SERVER_STATUS 1",
		"/debug/pprof/":        "goroutine",
	} {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(e.httpPort) + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %q not in\n%s", path, want, body)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("bookie did not stop cleanly on SIGTERM: %v\n%s", err, p.out.String())
	}
	if err := os.RemoveAll(filepath.Join(e.dir, "l2")); err != nil {
		t.Fatal(err)
	}
	p2 := startBookieProcess(t, e.args...)
	if err := p2.wait(); err == nil || !strings.Contains(p2.out.String(), "has no cookie") {
		t.Fatalf("bookie with a wiped ledger directory: exit %v\n%s", p2.err, p2.out.String())
	}
	// After an explicit format it starts, as a new, empty bookie.
	format := exec.Command(os.Args[0], append([]string{"bookie", "format", "--force"}, e.args...)...)
	format.Env = append(os.Environ(), "MAGNETAR_TEST_RUN_MAIN=1")
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("format: %v\n%s", err, out)
	}
	p3 := startBookieProcess(t, e.args...)
	p3.waitReady(t)
}
