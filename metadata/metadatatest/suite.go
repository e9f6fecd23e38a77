// Package metadatatest is the conformance suite every metadata.Store
// backend must pass, run identically on memory, zk and local.
package metadatatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// Harness gives the suite fresh sessions on one fresh backend.
type Harness struct {
	// NewSession opens another session on the same backend.
	NewSession func(t *testing.T) metadata.Store
	// Expire forces the session to expire as the backend would (a
	// ZooKeeper session expiry); the session must then report SessionLost.
	Expire func(t *testing.T, s metadata.Store)
}

// Run runs every conformance case; newHarness is called once per case.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	cases := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"CRUD", testCRUD},
		{"CreateIDTellsNodesApart", testCreateID},
		{"Errors", testErrors},
		{"CASRaceOneWinner", testCASRace},
		{"CreateRaceOneWinner", testCreateRace},
		{"Sequential", testSequential},
		{"WatchOrderUnderBurst", testWatchOrder},
		{"EphemeralCleanupOnClose", testEphemeralClose},
		{"EphemeralCleanupOnExpiry", testEphemeralExpiry},
		{"LargeValues", testLargeValues},
		{"TenThousandChildren", testManyChildren},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newHarness(t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testCRUD(t *testing.T, h Harness) {
	s, c := h.NewSession(t), ctx(t)
	st, err := s.Put(c, "/admin/clusters/c1", []byte("v0"), metadata.AnyVersion)
	must(t, err)
	if st.Version != 0 {
		t.Fatalf("new node version %d", st.Version)
	}
	v, st, err := s.Get(c, "/admin/clusters/c1")
	must(t, err)
	if string(v) != "v0" || st.Version != 0 || st.Ephemeral {
		t.Fatalf("get: %q %+v", v, st)
	}
	st, err = s.Put(c, "/admin/clusters/c1", []byte("v1"), 0)
	must(t, err)
	if st.Version != 1 {
		t.Fatalf("version after CAS put: %d", st.Version)
	}
	kids, err := s.Children(c, "/admin/clusters")
	must(t, err)
	if fmt.Sprint(kids) != "[c1]" {
		t.Fatalf("children: %v", kids)
	}
	ok, st, err := s.Exists(c, "/admin")
	must(t, err)
	if !ok || st.NumChildren != 1 {
		t.Fatalf("exists /admin: %v %+v", ok, st)
	}
	must(t, s.Delete(c, "/admin/clusters/c1", 1))
	if ok, _, err := s.Exists(c, "/admin/clusters/c1"); ok || err != nil {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
}

// A node re-created at the same path with the same value is told from
// the first by its CreateID (the brokers' lookups rely on it to see that a
// restarted broker took its bundle again); a change keeps a node's.
func testCreateID(t *testing.T, h Harness) {
	s, c := h.NewSession(t), ctx(t)
	const path = "/ids/node"
	_, err := s.Put(c, path, []byte("same"), metadata.AnyVersion)
	must(t, err)
	_, first, err := s.Get(c, path)
	must(t, err)
	if first.CreateID == 0 {
		t.Fatalf("no CreateID: %+v", first)
	}
	_, err = s.Put(c, path, []byte("changed"), first.Version)
	must(t, err)
	_, changed, err := s.Get(c, path)
	must(t, err)
	if changed.CreateID != first.CreateID {
		t.Fatalf("CreateID %d after a change, was %d", changed.CreateID, first.CreateID)
	}
	must(t, s.Delete(c, path, metadata.AnyVersion))
	_, err = s.Put(c, path, []byte("same"), metadata.AnyVersion)
	must(t, err)
	_, again, err := s.Get(c, path)
	must(t, err)
	if again.CreateID == first.CreateID {
		t.Fatalf("re-created node has the first's CreateID %d", first.CreateID)
	}
}

func testErrors(t *testing.T, h Harness) {
	s, c := h.NewSession(t), ctx(t)
	if _, _, err := s.Get(c, "/missing"); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := s.Put(c, "/missing", nil, 3); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("CAS put on missing: %v", err)
	}
	_, err := s.Put(c, "/n", []byte("x"), metadata.AnyVersion)
	must(t, err)
	if _, err := s.Put(c, "/n", nil, 7); !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("stale put: %v", err)
	}
	if err := s.Delete(c, "/n", 7); !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("stale delete: %v", err)
	}
	if _, _, err := s.Create(c, "/n", nil, metadata.CreateOptions{}); !errors.Is(err, metadata.ErrExists) {
		t.Fatalf("create existing: %v", err)
	}
	_, err = s.Put(c, "/n/child", nil, metadata.AnyVersion)
	must(t, err)
	if err := s.Delete(c, "/n", metadata.AnyVersion); !errors.Is(err, metadata.ErrNotEmpty) {
		t.Fatalf("delete with children: %v", err)
	}
	if _, err := s.Put(c, "bad//path", nil, metadata.AnyVersion); !errors.Is(err, metadata.ErrInvalidPath) {
		t.Fatalf("invalid path: %v", err)
	}
	_, _, err = s.Create(c, "/eph", nil, metadata.CreateOptions{Ephemeral: true})
	must(t, err)
	if _, _, err := s.Create(c, "/eph/kid", nil, metadata.CreateOptions{}); !errors.Is(err, metadata.ErrEphemeralKids) {
		t.Fatalf("child of ephemeral: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Get(cancelled, "/n"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func testCASRace(t *testing.T, h Harness) {
	c := ctx(t)
	setup := h.NewSession(t)
	st, err := setup.Put(c, "/race/cas", []byte("start"), metadata.AnyVersion)
	must(t, err)
	const contenders = 16
	sessions := make([]metadata.Store, 4)
	for i := range sessions {
		sessions[i] = h.NewSession(t)
	}
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < contenders; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := sessions[i%len(sessions)].Put(c, "/race/cas", []byte(fmt.Sprint(i)), st.Version)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, metadata.ErrBadVersion):
				conflicts.Add(1)
			default:
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != contenders-1 {
		t.Fatalf("CAS race: %d winners, %d conflicts", wins.Load(), conflicts.Load())
	}
}

func testCreateRace(t *testing.T, h Harness) {
	c := ctx(t)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		s := h.NewSession(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.Create(c, "/race/create/leader", nil, metadata.CreateOptions{Ephemeral: true})
			if err == nil {
				wins.Add(1)
			} else if !errors.Is(err, metadata.ErrExists) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("create race: %d winners", wins.Load())
	}
}

func testSequential(t *testing.T, h Harness) {
	s, c := h.NewSession(t), ctx(t)
	var last string
	for i := 0; i < 5; i++ {
		p, _, err := s.Create(c, "/seq/item-", []byte{byte(i)}, metadata.CreateOptions{Sequential: true})
		must(t, err)
		if len(p) != len("/seq/item-")+10 || p <= last {
			t.Fatalf("sequential path %q after %q", p, last)
		}
		last = p
	}
	kids, err := s.Children(c, "/seq")
	must(t, err)
	if len(kids) != 5 {
		t.Fatalf("children %v", kids)
	}
}

func testWatchOrder(t *testing.T, h Harness) {
	writer, watcher, c := h.NewSession(t), h.NewSession(t), ctx(t)
	w, err := watcher.Watch(c, "/burst")
	must(t, err)
	defer w.Close()
	const n = 500
	for i := 0; i < n; i++ {
		_, err := writer.Put(c, "/burst/k", []byte(fmt.Sprint(i)), metadata.AnyVersion)
		must(t, err)
	}
	must(t, writer.Delete(c, "/burst/k", metadata.AnyVersion))
	var got []metadata.Event
	timeout := time.After(20 * time.Second)
	for len(got) < n+2 { // created /burst and /burst/k, n-1 modified, deleted (children events skipped)
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			if ev.Type != metadata.EventChildrenChanged {
				got = append(got, ev)
			}
		case <-timeout:
			t.Fatalf("only %d events arrived", len(got))
		}
	}
	want := []metadata.Event{{Type: metadata.EventCreated, Path: "/burst"}, {Type: metadata.EventCreated, Path: "/burst/k"}}
	for i := 1; i < n; i++ {
		want = append(want, metadata.Event{Type: metadata.EventModified, Path: "/burst/k"})
	}
	want = append(want, metadata.Event{Type: metadata.EventDeleted, Path: "/burst/k"})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events out of order or missing:\n got %v\nwant %v", got[:min(8, len(got))], want[:8])
	}
}

func testEphemeralClose(t *testing.T, h Harness) {
	owner, observer, c := h.NewSession(t), h.NewSession(t), ctx(t)
	_, _, err := owner.Create(c, "/loadbalance/brokers/b1", []byte("b1"), metadata.CreateOptions{Ephemeral: true})
	must(t, err)
	w, err := observer.Watch(c, "/loadbalance/brokers")
	must(t, err)
	defer w.Close()
	must(t, owner.Close())
	waitForEvent(t, w, metadata.Event{Type: metadata.EventDeleted, Path: "/loadbalance/brokers/b1"})
	if ok, _, err := observer.Exists(c, "/loadbalance/brokers/b1"); ok || err != nil {
		t.Fatalf("ephemeral survived its session's close: %v %v", ok, err)
	}
}

func testEphemeralExpiry(t *testing.T, h Harness) {
	owner, observer, c := h.NewSession(t), h.NewSession(t), ctx(t)
	states := owner.SessionEvents()
	_, _, err := owner.Create(c, "/namespace/owner", nil, metadata.CreateOptions{Ephemeral: true})
	must(t, err)
	h.Expire(t, owner)
	deadline := time.After(30 * time.Second)
	for lost := false; !lost; {
		select {
		case st, ok := <-states.States():
			if !ok {
				t.Fatalf("session events ended before SessionLost: %v", states.Err())
			}
			lost = st == metadata.SessionLost
		case <-deadline:
			t.Fatal("no SessionLost after expiry")
		}
	}
	for {
		ok, _, err := observer.Exists(c, "/namespace/owner")
		must(t, err)
		if !ok {
			break
		}
		select {
		case <-deadline:
			t.Fatal("ephemeral node outlived its expired session")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, _, err := owner.Get(c, "/namespace"); !errors.Is(err, metadata.ErrSessionLost) {
		t.Fatalf("operation on an expired session: %v", err)
	}
}

func waitForEvent(t *testing.T, w *metadata.Watcher, want metadata.Event) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended before %v: %v", want, w.Err())
			}
			if ev == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %v event", want)
		}
	}
}

func testLargeValues(t *testing.T, h Harness) {
	s, c := h.NewSession(t), ctx(t)
	big := bytes.Repeat([]byte("m"), metadata.MaxValueSize)
	_, err := s.Put(c, "/big", big, metadata.AnyVersion)
	must(t, err)
	got, _, err := s.Get(c, "/big")
	must(t, err)
	if !bytes.Equal(got, big) {
		t.Fatal("1 MiB value changed on the way")
	}
	if _, err := s.Put(c, "/big", append(big, 'x'), metadata.AnyVersion); !errors.Is(err, metadata.ErrValueTooLarge) {
		t.Fatalf("oversized value: %v", err)
	}
}

func testManyChildren(t *testing.T, h Harness) {
	// This case checks that 10,000 children are all created and listed, not
	// how fast: an etcd or ZooKeeper that fsyncs every create needs 20-40 s for
	// them when make test's other packages share the machine's two cores (CI
	// ran out of the usual 30 s at 9,000), so it gets a deadline of its own.
	s := h.NewSession(t)
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	const n, workers = 10000, 16
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if _, _, err := s.Create(c, fmt.Sprintf("/ledgers/L%05d", i), nil, metadata.CreateOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	kids, err := s.Children(c, "/ledgers")
	must(t, err)
	if len(kids) != n || kids[0] != "L00000" || kids[n-1] != fmt.Sprintf("L%05d", n-1) {
		t.Fatalf("%d children, first %q", len(kids), kids[0])
	}
}
