package metadata_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/metadatatest"
)

func TestLocalConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadatatest.Harness {
		srv := openLocal(t, t.TempDir(), metadata.LocalOptions{})
		return metadatatest.Harness{
			NewSession: func(t *testing.T) metadata.Store {
				s := srv.NewSession()
				t.Cleanup(func() { s.Close() })
				return s
			},
			Expire: func(t *testing.T, s metadata.Store) { srv.ExpireSession(s) },
		}
	})
}

// openLocal opens a local server that the test closes at its end.
func openLocal(t testing.TB, dir string, opts metadata.LocalOptions) *metadata.LocalServer {
	t.Helper()
	srv, err := metadata.OpenLocal(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func bg(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// node is what a client sees of one node.
type node struct {
	Value             string
	Version           int64
	Ephemeral         bool
	Kids              []string
	Created, Modified int64 // Unix ms; zero unless asked for
}

// dump reads the whole tree. With withTimes it keeps the timestamps (the
// local store keeps them to the millisecond, so they come back identical).
func dump(t testing.TB, s metadata.Store, withTimes bool) map[string]node {
	t.Helper()
	out := map[string]node{}
	var walk func(path string)
	walk = func(path string) {
		v, st, err := s.Get(bg(t), path)
		check(t, err)
		kids, err := s.Children(bg(t), path)
		check(t, err)
		n := node{Value: string(v), Version: st.Version, Ephemeral: st.Ephemeral, Kids: kids}
		if withTimes {
			n.Created, n.Modified = st.Created.UnixMilli(), st.Modified.UnixMilli()
		}
		out[path] = n
		for _, k := range kids {
			walk(strings.TrimSuffix(path, "/") + "/" + k)
		}
	}
	walk("/")
	return out
}

// withoutEphemerals is the tree as it must look once the ephemeral nodes
// are gone: without them, and without them in their parents' children.
func withoutEphemerals(t *testing.T, s metadata.Store) map[string]node {
	tree := dump(t, s, true)
	for p, n := range tree {
		if !n.Ephemeral {
			continue
		}
		delete(tree, p)
		parent, name := filepath.Split(p)
		pn := tree[filepath.Clean(parent)]
		pn.Kids = slices.DeleteFunc(slices.Clone(pn.Kids), func(k string) bool { return k == name })
		tree[filepath.Clean(parent)] = pn
	}
	return tree
}

// writeSampleTree writes nested nodes, several CAS puts, sequential nodes
// and ephemeral ones (plain and sequential); it returns the sequential
// names handed out under /seq.
func writeSampleTree(t *testing.T, s metadata.Store) []string {
	c := bg(t)
	_, err := s.Put(c, "/admin/clusters/c1", []byte("v0"), metadata.AnyVersion)
	check(t, err)
	for v := int64(0); v < 3; v++ {
		_, err := s.Put(c, "/admin/clusters/c1", []byte(fmt.Sprint("v", v+1)), v)
		check(t, err)
	}
	_, err = s.Put(c, "/a/b/c", []byte("deep"), metadata.AnyVersion)
	check(t, err)
	_, _, err = s.Create(c, "/a/empty", nil, metadata.CreateOptions{})
	check(t, err)
	var seq []string
	for i := 0; i < 3; i++ {
		p, _, err := s.Create(c, "/seq/item-", []byte{byte('0' + i)}, metadata.CreateOptions{Sequential: true})
		check(t, err)
		seq = append(seq, p)
	}
	check(t, s.Delete(c, seq[1], 0))
	p, _, err := s.Create(c, "/seq/item-", []byte("eph"), metadata.CreateOptions{Sequential: true, Ephemeral: true})
	check(t, err)
	seq = append(seq, p)
	_, _, err = s.Create(c, "/live/b1", []byte("b1"), metadata.CreateOptions{Ephemeral: true})
	check(t, err)
	return seq
}

// checkRestored checks a reopened tree against want and that a new
// sequential node under /seq gets a suffix never handed out before.
func checkRestored(t *testing.T, s metadata.Store, want map[string]node, issued []string) {
	t.Helper()
	if got := dump(t, s, true); !reflect.DeepEqual(got, want) {
		t.Fatalf("tree after reopen differs:\n got %v\nwant %v", got, want)
	}
	p, _, err := s.Create(bg(t), "/seq/item-", nil, metadata.CreateOptions{Sequential: true})
	check(t, err)
	for _, old := range issued {
		if p <= old {
			t.Fatalf("sequential name %s after restart does not follow %s", p, old)
		}
	}
}

func TestLocalRestart(t *testing.T) {
	dir := t.TempDir()
	srv := openLocal(t, dir, metadata.LocalOptions{})
	s := srv.NewSession()
	issued := writeSampleTree(t, s)
	want := withoutEphemerals(t, s)
	check(t, srv.Close())

	srv = openLocal(t, dir, metadata.LocalOptions{})
	checkRestored(t, srv.NewSession(), want, issued)
}

// TestLocalCrash drops everything that was not synced, as a power cut
// would: every acknowledged write must be there, and ephemeral nodes and
// their sequential numbers must not come back or be reused.
func TestLocalCrash(t *testing.T) {
	fsys := vfs.NewCrashableMem()
	srv := openLocal(t, "/meta", metadata.LocalOptionsWithFS(metadata.LocalOptions{}, fsys))
	s := srv.NewSession()
	issued := writeSampleTree(t, s)
	want := withoutEphemerals(t, s)
	crashed := fsys.CrashClone(vfs.CrashCloneCfg{})

	srv2 := openLocal(t, "/meta", metadata.LocalOptionsWithFS(metadata.LocalOptions{}, crashed))
	checkRestored(t, srv2.NewSession(), want, issued)
}

func TestOpenLocalConnectionString(t *testing.T) {
	dir := t.TempDir()
	s, err := metadata.Open(bg(t), "local:"+dir, metadata.Options{})
	check(t, err)
	_, err = s.Put(bg(t), "/admin/clusters/c1", []byte("x"), metadata.AnyVersion)
	check(t, err)
	check(t, s.Close())
	if err := s.Close(); !errors.Is(err, metadata.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}

	s, err = metadata.Open(bg(t), "local:"+dir, metadata.Options{}) // the first Close released the directory
	check(t, err)
	defer s.Close()
	v, st, err := s.Get(bg(t), "/admin/clusters/c1")
	if err != nil || string(v) != "x" || st.Version != 0 {
		t.Fatalf("after reopen: %q %+v %v", v, st, err)
	}
}

func TestLocalSecondOpenInProcess(t *testing.T) {
	dir := t.TempDir()
	openLocal(t, dir, metadata.LocalOptions{})
	_, err := metadata.OpenLocal(dir, metadata.LocalOptions{})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second open: %v", err)
	}
}

// TestLocalSecondOpenOtherProcess holds the directory in a child process
// (this test binary, as TestLocalHelperProcess) and opens it here.
func TestLocalSecondOpenOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalHelperProcess$")
	cmd.Env = append(os.Environ(), "MAGNETAR_LOCAL_HELPER_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	check(t, err)
	stdout, err := cmd.StdoutPipe()
	check(t, err)
	check(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		stdin.Close()
		t.Fatalf("helper: %q %v (wait: %v)", line, err, cmd.Wait())
	}

	_, err = metadata.OpenLocal(dir, metadata.LocalOptions{})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("open while another process holds the directory: %v", err)
	}

	stdin.Close() // the helper exits without closing: a crash
	check(t, cmd.Wait())
	s := openLocal(t, dir, metadata.LocalOptions{}).NewSession()
	if v, _, err := s.Get(bg(t), "/held/by/child"); err != nil || string(v) != "child" {
		t.Fatalf("child's write: %q %v", v, err)
	}
	if ok, _, err := s.Exists(bg(t), "/held/eph"); ok || err != nil {
		t.Fatalf("child's ephemeral node survived it: %v %v", ok, err)
	}
}

// TestLocalHelperProcess is the child of TestLocalSecondOpenOtherProcess.
func TestLocalHelperProcess(t *testing.T) {
	dir := os.Getenv("MAGNETAR_LOCAL_HELPER_DIR")
	if dir == "" {
		t.Skip("runs only as TestLocalSecondOpenOtherProcess's child")
	}
	srv, err := metadata.OpenLocal(dir, metadata.LocalOptions{})
	check(t, err)
	s := srv.NewSession()
	_, err = s.Put(bg(t), "/held/by/child", []byte("child"), metadata.AnyVersion)
	check(t, err)
	_, _, err = s.Create(bg(t), "/held/eph", nil, metadata.CreateOptions{Ephemeral: true})
	check(t, err)
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// validRecord is a well-formed node record: format 1, versions 0, times 0,
// no value.
var validRecord = []byte{1, 0, 0, 0, 0}

func TestLocalCorruption(t *testing.T) {
	cases := []struct {
		name, key string
		value     []byte // nil: delete the key
		named     string // the key the error must name; "" means key
	}{
		{name: "bad record format byte", key: "n/admin", value: []byte{9, 0, 0, 0, 0}},
		{name: "truncated record", key: "n/admin", value: []byte{1, 0x80}},
		{name: "empty record", key: "n/admin", value: []byte{}},
		{name: "overlong version", key: "n/admin", value: []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0}},
		{name: "key is not a valid path", key: "n/a//b", value: validRecord},
		{name: "unknown key", key: "zzz", value: validRecord},
		{name: "node without parent", key: "n/orphan/child", value: validRecord},
		{name: "format key missing", key: "format", named: "n/"},
		{name: "format value damaged", key: "format", value: []byte("xx")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			srv := openLocal(t, dir, metadata.LocalOptions{})
			_, err := srv.NewSession().Put(bg(t), "/admin/x", []byte("v"), metadata.AnyVersion)
			check(t, err)
			check(t, srv.Close())
			pebbleWrite(t, dir, c.key, c.value)

			_, err = metadata.OpenLocal(dir, metadata.LocalOptions{})
			if !errors.Is(err, engine.ErrCorruption) || !errors.Is(err, metadata.ErrStoreFailed) || errors.Is(err, metadata.ErrNotFound) {
				t.Fatalf("want corruption and store failed, got %v", err)
			}
			named := c.named
			if named == "" {
				named = c.key
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", named)) {
				t.Fatalf("error does not name key %q: %v", named, err)
			}
		})
	}
}

func TestLocalNewerFormat(t *testing.T) {
	dir := t.TempDir()
	check(t, openLocal(t, dir, metadata.LocalOptions{}).Close())
	pebbleWrite(t, dir, "format", []byte{2})
	_, err := metadata.OpenLocal(dir, metadata.LocalOptions{})
	if err == nil || errors.Is(err, engine.ErrCorruption) || !strings.Contains(err.Error(), "format version 2") {
		t.Fatalf("newer format: %v", err)
	}
}

// pebbleWrite sets (or, with a nil value, deletes) a raw key behind the
// store's back.
func pebbleWrite(t *testing.T, dir, key string, value []byte) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	check(t, err)
	if value == nil {
		err = db.Delete([]byte(key), pebble.Sync)
	} else {
		err = db.Set([]byte(key), value, pebble.Sync)
	}
	check(t, err)
	check(t, db.Close())
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)         {}
func (quietLogger) Errorf(string, ...any)        {}
func (quietLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// failedWatch drains w and checks that it ended with ErrStoreFailed and
// never delivered an event at path.
func failedWatch(t *testing.T, w *metadata.Watcher, path string) {
	t.Helper()
	for ev := range w.Events() {
		if ev.Path == path {
			t.Fatalf("watcher saw %v, which was never made durable", ev)
		}
	}
	if !errors.Is(w.Err(), metadata.ErrStoreFailed) {
		t.Fatalf("watch ended with %v, want ErrStoreFailed", w.Err())
	}
}

// checkFailStop checks that the write failed with the store's failure and
// that everything after it fails the same way.
func checkFailStop(t *testing.T, srv *metadata.LocalServer, dir string, writer, watcher metadata.Store, w *metadata.Watcher, cause error) {
	t.Helper()
	_, err := writer.Put(bg(t), "/b", []byte("lost"), metadata.AnyVersion)
	if !errors.Is(err, metadata.ErrStoreFailed) || !errors.Is(err, cause) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("write on a failing disk: %v", err)
	}
	failedWatch(t, w, "/b")
	for _, s := range []metadata.Store{writer, watcher, srv.NewSession()} {
		if _, _, err2 := s.Get(bg(t), "/a"); !errors.Is(err2, metadata.ErrStoreFailed) {
			t.Fatalf("read after the failure: %v", err2)
		}
		if _, _, err2 := s.Create(bg(t), "/c", nil, metadata.CreateOptions{}); !errors.Is(err2, metadata.ErrStoreFailed) {
			t.Fatalf("write after the failure: %v", err2)
		}
	}
	states := writer.SessionEvents() // subscribed after the failure: starts with the current state
	var got []metadata.SessionState
	for st := range states.States() {
		got = append(got, st)
	}
	if fmt.Sprint(got) != "[lost]" || !errors.Is(states.Err(), metadata.ErrStoreFailed) {
		t.Fatalf("session states %v, end %v", got, states.Err())
	}
}

func TestLocalFailStop(t *testing.T) {
	dir := t.TempDir()
	srv := openLocal(t, dir, metadata.LocalOptions{})
	writer, watcher := srv.NewSession(), srv.NewSession()
	_, err := writer.Put(bg(t), "/a", []byte("kept"), metadata.AnyVersion)
	check(t, err)
	w, err := watcher.Watch(bg(t), "/")
	check(t, err)
	errDisk := errors.New("injected: disk gone")
	metadata.FailLocalWrites(srv, errDisk)

	checkFailStop(t, srv, dir, writer, watcher, w, errDisk)
	check(t, srv.Close())

	s := openLocal(t, dir, metadata.LocalOptions{}).NewSession()
	if v, _, err := s.Get(bg(t), "/a"); err != nil || string(v) != "kept" {
		t.Fatalf("acknowledged write after reopen: %q %v", v, err)
	}
	if ok, _, err := s.Exists(bg(t), "/b"); ok || err != nil {
		t.Fatalf("failed write came back: %v %v", ok, err)
	}
}

// TestLocalPebbleWriteFailure fails the file system under Pebble itself:
// Pebble treats a failed WAL write as fatal, and the store must turn that
// into fail-stop, not a crash.
func TestLocalPebbleWriteFailure(t *testing.T) {
	disk := &errorfs.Toggle{Injector: errorfs.ErrInjected}
	fsys := errorfs.Wrap(vfs.NewMem(), disk)
	var log bytes.Buffer
	opts := metadata.LocalOptions{Logger: slog.New(slog.NewTextHandler(&log, nil))}
	srv := openLocal(t, "/meta", metadata.LocalOptionsWithFS(opts, fsys))
	writer, watcher := srv.NewSession(), srv.NewSession()
	_, err := writer.Put(bg(t), "/a", []byte("kept"), metadata.AnyVersion)
	check(t, err)
	w, err := watcher.Watch(bg(t), "/")
	check(t, err)
	disk.On()

	checkFailStop(t, srv, "/meta", writer, watcher, w, errorfs.ErrInjected)
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "fatal commit error") {
		t.Fatalf("Pebble's fatal error was not logged through slog at Error:\n%s", log.String())
	}
	srv.Close() // Pebble may report the same failure again; it must not hang
}

// TestLocalMatchesMemory applies one random sequence of operations to the
// memory backend (the model) and to the local one, restarting the local one
// at random points, and compares every result and the whole tree after
// each step. Set MAGNETAR_SEED to replay a run.
func TestLocalMatchesMemory(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("MAGNETAR_SEED"); s != "" {
		_, err := fmt.Sscan(s, &seed)
		check(t, err)
	}
	t.Logf("seed %d (MAGNETAR_SEED=%d replays it)", seed, seed)
	l := newLockstep(t, rand.New(rand.NewPCG(uint64(seed), 0)))
	const steps = 600
	for step := 0; step < steps; step++ {
		desc := l.step()
		if got, want := dump(t, l.local[0], false), dump(t, l.model[0], false); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (%s): trees differ:\nlocal %v\nmodel %v", step, desc, got, want)
		}
	}
}

// lockstep drives a model server and a local one through the same
// sessions: model[i] and local[i] are one client.
type lockstep struct {
	t            *testing.T
	rng          *rand.Rand
	fsys         vfs.FS
	modelSrv     *metadata.MemoryServer
	localSrv     *metadata.LocalServer
	model, local []metadata.Store
}

const lockstepSessions = 3

func newLockstep(t *testing.T, rng *rand.Rand) *lockstep {
	l := &lockstep{t: t, rng: rng, fsys: vfs.NewMem(), modelSrv: metadata.NewMemoryServer()}
	l.open()
	t.Cleanup(func() { l.localSrv.Close() })
	return l
}

// open opens the local server and a fresh set of sessions on both sides.
func (l *lockstep) open() {
	srv, err := metadata.OpenLocal("/meta", metadata.LocalOptionsWithFS(metadata.LocalOptions{}, l.fsys))
	check(l.t, err)
	l.localSrv = srv
	l.model, l.local = nil, nil
	for i := 0; i < lockstepSessions; i++ {
		l.model = append(l.model, l.modelSrv.NewSession())
		l.local = append(l.local, srv.NewSession())
	}
}

// restart is a process restart: every session ends, taking its ephemeral
// nodes, and the local server comes back from disk.
func (l *lockstep) restart() {
	for _, s := range l.model {
		s.Close()
	}
	check(l.t, l.localSrv.Close())
	l.open()
}

// step runs one random action on both sides and describes it.
func (l *lockstep) step() string {
	i := l.rng.IntN(lockstepSessions)
	switch r := l.rng.IntN(100); {
	case r < 3:
		l.restart()
		return "restart"
	case r < 6:
		l.modelSrv.ExpireSession(l.model[i])
		l.localSrv.ExpireSession(l.local[i])
		l.model[i], l.local[i] = l.modelSrv.NewSession(), l.localSrv.NewSession()
		return fmt.Sprintf("expire session %d", i)
	case r < 45:
		return l.put(i)
	case r < 75:
		return l.create(i)
	}
	return l.delete(i)
}

func (l *lockstep) put(i int) string {
	p := l.path()
	v, ver := []byte(fmt.Sprint(l.rng.IntN(1000))), l.version(p)
	desc := fmt.Sprintf("session %d put %s %q version %d", i, p, v, ver)
	ms, merr := l.model[i].Put(bg(l.t), p, v, ver)
	ls, lerr := l.local[i].Put(bg(l.t), p, v, ver)
	l.same(desc, outcome("", ms, merr), outcome("", ls, lerr))
	return desc
}

func (l *lockstep) create(i int) string {
	p := l.path()
	opts := metadata.CreateOptions{Ephemeral: l.rng.IntN(3) == 0, Sequential: l.rng.IntN(3) == 0}
	desc := fmt.Sprintf("session %d create %s %+v", i, p, opts)
	mp, ms, merr := l.model[i].Create(bg(l.t), p, []byte(p), opts)
	lp, ls, lerr := l.local[i].Create(bg(l.t), p, []byte(p), opts)
	l.same(desc, outcome(mp, ms, merr), outcome(lp, ls, lerr))
	return desc
}

func (l *lockstep) delete(i int) string {
	p := l.path()
	ver := l.version(p)
	desc := fmt.Sprintf("session %d delete %s version %d", i, p, ver)
	merr := l.model[i].Delete(bg(l.t), p, ver)
	lerr := l.local[i].Delete(bg(l.t), p, ver)
	l.same(desc, outcome("", metadata.Stat{}, merr), outcome("", metadata.Stat{}, lerr))
	return desc
}

// path picks one of a few dozen paths, so that operations collide.
func (l *lockstep) path() string {
	var b strings.Builder
	for d := 1 + l.rng.IntN(3); d > 0; d-- {
		b.WriteString("/" + string(rune('a'+l.rng.IntN(3))))
	}
	return b.String()
}

// version picks AnyVersion, the node's current version or a stale one.
func (l *lockstep) version(path string) int64 {
	_, st, err := l.model[0].Exists(bg(l.t), path)
	check(l.t, err)
	switch l.rng.IntN(3) {
	case 0:
		return metadata.AnyVersion
	case 1:
		return st.Version
	}
	return st.Version + 1
}

func (l *lockstep) same(desc, model, local string) {
	l.t.Helper()
	if model != local {
		l.t.Fatalf("%s: model %s, local %s", desc, model, local)
	}
}

// outcome is what a client sees of a result, minus the timestamps.
func outcome(path string, st metadata.Stat, err error) string {
	if err != nil {
		for _, e := range []error{metadata.ErrNotFound, metadata.ErrExists, metadata.ErrBadVersion,
			metadata.ErrNotEmpty, metadata.ErrInvalidPath, metadata.ErrEphemeralKids} {
			if errors.Is(err, e) {
				return e.Error()
			}
		}
		return "unexpected: " + err.Error()
	}
	return fmt.Sprintf("ok %s version=%d eph=%v kids=%d", path, st.Version, st.Ephemeral, st.NumChildren)
}

// BenchmarkLocalPut measures sequential compare-and-set puts, one fsync
// each, on the test's temporary directory.
func BenchmarkLocalPut(b *testing.B) {
	s := openLocal(b, b.TempDir(), metadata.LocalOptions{}).NewSession()
	c := context.Background()
	value := bytes.Repeat([]byte("m"), 200)
	st, err := s.Put(c, "/managed-ledgers/t/ns/persistent/topic", value, metadata.AnyVersion)
	check(b, err)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st, err = s.Put(c, "/managed-ledgers/t/ns/persistent/topic", value, st.Version); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
