package ledger

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/metadata"
)

var replSeeds = flag.Int("ledger.replseeds", 4, "seeds of TestReplicationRandomized")

// Settings that keep the re-replication tests fast.
var (
	testAuditorCfg = AuditorConfig{LostBookieRecoveryDelay: 20 * time.Millisecond, PeriodicCheckInterval: -1}
	testWorkerCfg  = ReplicationConfig{OpenLedgerGracePeriod: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond, MaxRetryDelay: 400 * time.Millisecond}
)

func startAuditor(t *testing.T, c *cluster, cfg AuditorConfig) (*Auditor, *Client) {
	t.Helper()
	cl := c.client(t, Config{})
	a := NewAuditor(cl, cfg)
	a.Start()
	t.Cleanup(a.Stop)
	return a, cl
}

func startWorker(t *testing.T, c *cluster, name string, cfg ReplicationConfig, hooks replicationHooks) *ReplicationWorker {
	t.Helper()
	cfg.Name = name
	w := NewReplicationWorker(c.client(t, Config{Placement: NewRandomPlacement(c.seed + uint64(len(name)))}), cfg)
	w.hooks = hooks
	w.Start()
	t.Cleanup(w.Stop)
	return w
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s did not happen; %s", d, what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settled reports whether no mark is left and no ledger's metadata names
// a lost bookie.
func settled(c *cluster, store metadata.Store, ids []int64, lost map[string]bool) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	marks, err := ListUnderreplicated(ctx, store)
	if err != nil {
		return false, err.Error()
	}
	if len(marks) > 0 {
		return false, fmt.Sprintf("marked %v", marks)
	}
	ms := metaStore{store}
	for _, id := range ids {
		md, _, err := ms.read(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		if b := lostIn(md, lost); b != "" {
			return false, fmt.Sprintf("ledger %d (%s) still names lost bookie %s: %+v", id, md.State, b, md.Ensembles)
		}
	}
	return true, ""
}

func lostIn(md *Metadata, lost map[string]bool) string {
	for _, f := range md.Ensembles {
		for _, b := range f.Bookies {
			if lost[b] {
				return b
			}
		}
	}
	return ""
}

// coreOf returns a running bookie's core, nil when it is down.
func (c *cluster) coreOf(id string) *bookie.Core {
	c.faults.mu.Lock()
	defer c.faults.mu.Unlock()
	if nd := c.nodes[id]; nd != nil {
		return nd.core
	}
	return nil
}

// snapshot records the stored bytes of every entry of the ledgers that
// any running bookie holds, and fails if two replicas differ.
type snapshot map[int64]map[int64][]byte // ledger -> entry -> bytes

func (s snapshot) take(t *testing.T, c *cluster, ids []int64) {
	t.Helper()
	for _, id := range ids {
		if s[id] == nil {
			s[id] = map[int64][]byte{}
		}
		// Every entry up to the end is on some running bookie (each has
		// only those of its write sets): the first one none holds ends it.
		for e, found := int64(0), true; found; e++ {
			found = false
			for _, b := range sortedIDs(c) {
				core := c.coreOf(b)
				if core == nil {
					continue
				}
				data, err := core.Storage().ReadEntry(id, e)
				if err != nil {
					continue
				}
				found = true
				if prev, ok := s[id][e]; ok && !bytes.Equal(prev, data) {
					t.Fatalf("ledger %d entry %d: bookie %s holds other bytes than a replica read before", id, e, b)
				}
				s[id][e] = bytes.Clone(data)
			}
		}
	}
}

// checkReplicas checks every entry of a closed ledger on the bookies of
// its write set: at least Qa hold it, the bookies that did not hold it
// before replication (new replicas) all do, and every copy is the exact
// bytes recorded before any bookie was lost.
func checkReplicas(t *testing.T, c *cluster, id int64, before snapshot, oldMD *Metadata) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	md, _, err := metaStore{c.meta.NewSession()}.read(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for e := int64(0); e <= md.LastEntryID; e++ {
		holders := 0
		for _, b := range writeSet(md, e) {
			core := c.coreOf(b)
			if core == nil {
				t.Fatalf("ledger %d entry %d: write set %v names bookie %s, which is down", id, e, writeSet(md, e), b)
			}
			data, err := core.Storage().ReadEntry(id, e)
			if err != nil {
				if oldMD != nil && !slices.Contains(writeSet(oldMD, e), b) {
					t.Fatalf("ledger %d entry %d: new replica %s lacks it: %v", id, e, b, err)
				}
				continue
			}
			holders++
			if want, ok := before[id][e]; ok && !bytes.Equal(data, want) {
				t.Fatalf("ledger %d entry %d on %s: bytes differ from before the loss", id, e, b)
			}
		}
		if holders < md.AckQuorumSize {
			t.Fatalf("ledger %d entry %d: %d replicas of write set %v hold it, Qa=%d\n%s", id, e, holders, writeSet(md, e), md.AckQuorumSize, c.dump(id))
		}
	}
}

// readWithPartitioned reads the whole closed ledger through a fresh
// client while bookie x is unreachable.
func readWithPartitioned(t *testing.T, c *cluster, id int64, x string) {
	t.Helper()
	c.faults.partition(x, true)
	defer c.faults.partition(x, false)
	ctx := ctxFor(t, 10*time.Second)
	r, err := c.client(t, Config{}).OpenNoRecovery(ctx, id, password)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, 0, r.LastAddConfirmed())
	if err != nil {
		t.Fatalf("read ledger %d with %s partitioned: %v", id, x, err)
	}
	for i, e := range got {
		if !bytes.Equal(e.Payload, payload(id, int64(i))) {
			t.Fatalf("ledger %d entry %d with %s partitioned: wrong bytes", id, i, x)
		}
	}
}

func createLedger(t *testing.T, cl *Client, e, w, a int) *WriteHandle {
	t.Helper()
	wh, err := cl.Create(ctxFor(t, 10*time.Second), CreateOptions{EnsembleSize: e, WriteQuorumSize: w, AckQuorumSize: a, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// TestReplicateClosedLedger: a closed ledger loses a bookie for good; the
// auditor marks it, the worker copies the lost replica's entries to the
// one bookie left and replaces it in the metadata.
func TestReplicateClosedLedger(t *testing.T) {
	c := newCluster(t, 4, 11)
	cl := c.client(t, Config{})
	ctx := ctxFor(t, 30*time.Second)
	w := createLedger(t, cl, 3, 2, 2)
	a := newAcks()
	appendN(t, w, 60, a)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	id, md := w.ID(), w.Metadata()
	before := snapshot{}
	before.take(t, c, []int64{id})
	lost := md.Ensembles[0].Bookies[1]
	spare := ""
	for _, b := range sortedIDs(c) {
		if !slices.Contains(md.Ensembles[0].Bookies, b) {
			spare = b
		}
	}
	c.stopBookie(lost)
	_, acl := startAuditor(t, c, testAuditorCfg)
	startWorker(t, c, "w1", testWorkerCfg, replicationHooks{})
	waitFor(t, 10*time.Second, "re-replication", func() (bool, string) {
		return settled(c, acl.cfg.Store, []int64{id}, map[string]bool{lost: true})
	})
	after, err := cl.ReadMetadata(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(md.Ensembles[0].Bookies)
	want[1] = spare
	if len(after.Ensembles) != 1 || !slices.Equal(after.Ensembles[0].Bookies, want) || after.State != StateClosed || after.LastEntryID != 59 {
		t.Fatalf("after re-replication: %s last %d ensembles %+v, want one fragment %v", after.State, after.LastEntryID, after.Ensembles, want)
	}
	checkReplicas(t, c, id, before, md)
	// Each entry of the new replica is readable with its other replica
	// unreachable: reads can only be served by the copy.
	for _, x := range want {
		if x != spare {
			readWithPartitioned(t, c, id, x)
		}
	}
	checkPersistence(t, c, id, a)
}

// TestReplicateOpenLedgerDeadWriter: the writer of an open ledger died
// and a bookie of its last ensemble is lost; after the grace period the
// worker recovers the ledger (closing it) and then replicates it.
func TestReplicateOpenLedgerDeadWriter(t *testing.T) {
	c := newCluster(t, 4, 12)
	w := createLedger(t, c.client(t, Config{}), 3, 2, 2)
	a := newAcks()
	appendN(t, w, 40, a)
	w.finish() // the writer dies without closing
	id, md := w.ID(), w.Metadata()
	before := snapshot{}
	before.take(t, c, []int64{id})
	lost := md.last().Bookies[0]
	c.stopBookie(lost)
	_, acl := startAuditor(t, c, testAuditorCfg)
	startWorker(t, c, "w1", testWorkerCfg, replicationHooks{})
	waitFor(t, 10*time.Second, "recovery and re-replication", func() (bool, string) {
		return settled(c, acl.cfg.Store, []int64{id}, map[string]bool{lost: true})
	})
	after, err := acl.ReadMetadata(ctxFor(t, 5*time.Second), id)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != StateClosed || after.LastEntryID != 39 {
		t.Fatalf("after re-replication: %s at %d, want CLOSED at 39 (%+v)", after.State, after.LastEntryID, after.Ensembles)
	}
	checkReplicas(t, c, id, before, md)
	checkPersistence(t, c, id, a)
}

// TestOpenLedgerLeftToLiveWriter: a lost bookie in the last ensemble of
// a ledger whose writer is alive (idle for a moment) is not recovered
// from under it during the grace period; the writer replaces the bookie
// on its next adds and the worker then replicates the older fragment,
// with the ledger still open and its writer still writing.
func TestOpenLedgerLeftToLiveWriter(t *testing.T) {
	c := newCluster(t, 5, 13)
	cl := c.client(t, Config{AddTimeout: 300 * time.Millisecond})
	ctx := ctxFor(t, 30*time.Second)
	w := createLedger(t, cl, 3, 2, 2)
	a := newAcks()
	appendN(t, w, 30, a)
	id := w.ID()
	before := snapshot{}
	before.take(t, c, []int64{id})
	md := w.Metadata()
	lost := md.last().Bookies[2]
	c.stopBookie(lost)
	_, acl := startAuditor(t, c, testAuditorCfg)
	cfg := testWorkerCfg
	cfg.OpenLedgerGracePeriod = time.Minute // must not run out: the writer's change ends the wait
	startWorker(t, c, "w1", cfg, replicationHooks{})
	waitFor(t, 5*time.Second, "mark", func() (bool, string) {
		ids, err := ListUnderreplicated(ctx, acl.cfg.Store)
		return len(ids) == 1, fmt.Sprint(ids, err)
	})
	time.Sleep(100 * time.Millisecond) // the worker looks at it and must leave it alone
	appendN(t, w, 20, a)
	if len(a.ids) != 50 {
		t.Fatalf("%d of 50 appends acknowledged: the writer was fenced or failed", len(a.ids))
	}
	waitFor(t, 10*time.Second, "re-replication of the older fragment", func() (bool, string) {
		return settled(c, acl.cfg.Store, []int64{id}, map[string]bool{lost: true})
	})
	after, _ := cl.ReadMetadata(ctx, id)
	if after.State != StateOpen || len(after.Ensembles) < 2 {
		t.Fatalf("ledger %s with %d fragments, want OPEN with the writer's new one: %+v", after.State, len(after.Ensembles), after.Ensembles)
	}
	appendN(t, w, 10, a)
	if err := w.Close(ctx); err != nil {
		t.Fatalf("close after re-replication: %v", err)
	}
	final, _ := cl.ReadMetadata(ctx, id)
	if final.LastEntryID != 59 || lostIn(final, map[string]bool{lost: true}) != "" {
		t.Fatalf("closed at %d, ensembles %+v", final.LastEntryID, final.Ensembles)
	}
	checkReplicas(t, c, id, before, md)
	checkPersistence(t, c, id, a)
}

// TestTwoWorkers: two workers on many marked ledgers; the per-ledger lock
// lets exactly one copy each lost replica.
func TestTwoWorkers(t *testing.T) {
	c := newCluster(t, 5, 14)
	cl := c.client(t, Config{Placement: NewRandomPlacement(14)})
	ctx := ctxFor(t, 30*time.Second)
	lost := "bookie-0"
	var ids []int64
	var acked []*acks
	for len(ids) < 8 {
		w := createLedger(t, cl, 3, 2, 2)
		if !slices.Contains(w.Metadata().Ensembles[0].Bookies, lost) {
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		a := newAcks()
		appendN(t, w, 15, a)
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ids, acked = append(ids, w.ID()), append(acked, a)
	}
	before := snapshot{}
	before.take(t, c, ids)
	var mu sync.Mutex
	copies := map[int64]int{}
	hook := replicationHooks{beforeCopy: func(id int64, _, _ string) {
		mu.Lock()
		copies[id]++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // widen the window in which a second worker could start the same copy
	}}
	c.stopBookie(lost)
	_, acl := startAuditor(t, c, testAuditorCfg)
	startWorker(t, c, "w1", testWorkerCfg, hook)
	startWorker(t, c, "w2", testWorkerCfg, hook)
	waitFor(t, 15*time.Second, "re-replication", func() (bool, string) {
		return settled(c, acl.cfg.Store, ids, map[string]bool{lost: true})
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if copies[id] != 1 {
			t.Fatalf("ledger %d: its lost replica was copied %d times, want once (copies %v)", id, copies[id], copies)
		}
	}
	// A worker releases its lock after it cleared the ledger's mark, so
	// the locks go just after the ledgers settle; one left for seconds
	// would hold its ledger from every other worker.
	waitFor(t, 5*time.Second, "the workers' locks released", func() (bool, string) {
		locks, err := acl.cfg.Store.Children(ctx, urLocksPath)
		if err != nil {
			return false, err.Error()
		}
		return len(locks) == 0, fmt.Sprintf("locks left behind: %v", locks)
	})
	for i, id := range ids {
		checkReplicas(t, c, id, before, nil)
		checkPersistence(t, c, id, acked[i])
	}
}

// TestAuditorElection: one leader among candidates; when its session
// expires another leads and audits; when that one stops, the last one.
func TestAuditorElection(t *testing.T) {
	c := newCluster(t, 4, 15)
	cl := c.client(t, Config{})
	ctx := ctxFor(t, 30*time.Second)
	w := createLedger(t, cl, 3, 3, 2)
	appendN(t, w, 5, newAcks())
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var auditors []*Auditor
	var clients []*Client
	for range 3 {
		a, acl := startAuditor(t, c, testAuditorCfg)
		auditors, clients = append(auditors, a), append(clients, acl)
	}
	leader := func(excluded ...int) func() (bool, string) {
		return func() (bool, string) {
			n, who := 0, -1
			for i, a := range auditors {
				if a.IsLeader() {
					n++
					who = i
				}
			}
			return n == 1 && !slices.Contains(excluded, who), fmt.Sprintf("%d leaders (last %d)", n, who)
		}
	}
	waitFor(t, 5*time.Second, "one leader", leader())
	first := slices.IndexFunc(auditors, (*Auditor).IsLeader)
	c.meta.ExpireSession(clients[first].cfg.Store)
	waitFor(t, 5*time.Second, "a new leader", leader(first))
	second := slices.IndexFunc(auditors, (*Auditor).IsLeader)
	// The new leader audits: losing a bookie of the ledger marks it.
	c.stopBookie(w.Metadata().Ensembles[0].Bookies[0])
	waitFor(t, 5*time.Second, "mark by the new leader", func() (bool, string) {
		ids, err := ListUnderreplicated(ctx, cl.cfg.Store)
		return len(ids) == 1 && ids[0] == w.ID(), fmt.Sprint(ids, err)
	})
	auditors[second].Stop()
	waitFor(t, 5*time.Second, "the last candidate leads", leader(first, second))
}

// gatedStore lets a test end watches of the bookie registrations and
// refuse new ones, as a lost connection to the store would.
type gatedStore struct {
	metadata.Store
	mu       sync.Mutex
	blocked  bool
	watchers []*metadata.Watcher
	// lists counts listings of the registered bookies, refused the
	// registration watches refused while blocked (only the auditor watches
	// AvailablePath itself; the ledger client watches RackMapPath).
	lists, refused int
}

func (g *gatedStore) Children(ctx context.Context, path string) ([]string, error) {
	if path == registry.AvailablePath {
		g.mu.Lock()
		g.lists++
		g.mu.Unlock()
	}
	return g.Store.Children(ctx, path)
}

// counts returns lists and refused.
func (g *gatedStore) counts() (lists, refused int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lists, g.refused
}

func (g *gatedStore) Watch(ctx context.Context, prefix string) (*metadata.Watcher, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prefix != registry.AvailablePath && prefix != registry.RackMapPath { // the client watches the rack map and registrations
		return g.Store.Watch(ctx, prefix)
	}
	if g.blocked {
		if prefix == registry.AvailablePath {
			g.refused++
		}
		return nil, fmt.Errorf("test gate: %w", metadata.ErrWatchInterrupted)
	}
	w, err := g.Store.Watch(ctx, prefix)
	if err == nil {
		g.watchers = append(g.watchers, w)
	}
	return w, err
}

func (g *gatedStore) watching() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.watchers)
}

// interrupt ends every registration watch and refuses new ones.
func (g *gatedStore) interrupt() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked = true
	for _, w := range g.watchers {
		w.Close()
	}
	g.watchers = nil
}

func (g *gatedStore) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked = false
}

// gatedAuditor starts an auditor whose registration watches go through a
// gate, once it leads and watches.
func gatedAuditor(t *testing.T, c *cluster, cfg AuditorConfig) *gatedStore {
	t.Helper()
	g := &gatedStore{Store: c.meta.NewSession()}
	cl, err := New(context.Background(), Config{Store: g, Transport: c.faults, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); g.Close() })
	a := NewAuditor(cl, cfg)
	a.Start()
	t.Cleanup(a.Stop)
	// Two registration watches: the client's bookie list, and the auditor's.
	waitFor(t, 5*time.Second, "auditor watching", func() (bool, string) {
		return a.IsLeader() && g.watching() == 2, fmt.Sprintf("leader %v, %d watches", a.IsLeader(), g.watching())
	})
	return g
}

func closedLedgerOn(t *testing.T, c *cluster, n int) (*WriteHandle, *acks) {
	t.Helper()
	w := createLedger(t, c.client(t, Config{}), 3, 2, 2)
	a := newAcks()
	appendN(t, w, n, a)
	if err := w.Close(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return w, a
}

func marked(t *testing.T, c *cluster) []int64 {
	t.Helper()
	ids, err := ListUnderreplicated(ctxFor(t, 5*time.Second), c.meta.NewSession())
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestAuditorRelistsAfterWatchLoss: a bookie leaves while the auditor's
// watch is down; the auditor must notice from the list it reads when the
// watch is back, since no event for it will ever come.
func TestAuditorRelistsAfterWatchLoss(t *testing.T) {
	c := newCluster(t, 4, 16)
	w, _ := closedLedgerOn(t, c, 10)
	g := gatedAuditor(t, c, AuditorConfig{PeriodicCheckInterval: -1})
	lists, _ := g.counts()
	g.interrupt()
	// The auditor re-lists as its watch ends; the bookie leaves after that,
	// while there is no watch.
	waitFor(t, 5*time.Second, "the auditor's list as its watch ended", func() (bool, string) {
		n, _ := g.counts()
		return n > lists, ""
	})
	c.stopBookie(w.Metadata().Ensembles[0].Bookies[2])
	_, refused := g.counts()
	waitFor(t, 5*time.Second, "the auditor's next try to watch", func() (bool, string) {
		_, n := g.counts()
		return n > refused, ""
	})
	if ids := marked(t, c); len(ids) != 0 {
		t.Fatalf("marked %v without seeing the bookie leave: the test's gate is broken", ids)
	}
	g.resume()
	waitFor(t, 5*time.Second, "mark after the watch is back", func() (bool, string) {
		ids := marked(t, c)
		return len(ids) == 1 && ids[0] == w.ID(), fmt.Sprint(ids)
	})
}

// TestAuditorPeriodicCheck: with no registration watch at all, the
// periodic full check still finds the lost bookie's ledgers.
func TestAuditorPeriodicCheck(t *testing.T) {
	c := newCluster(t, 4, 17)
	w, _ := closedLedgerOn(t, c, 10)
	g := gatedAuditor(t, c, AuditorConfig{PeriodicCheckInterval: 150 * time.Millisecond})
	g.interrupt()
	c.stopBookie(w.Metadata().Ensembles[0].Bookies[0])
	waitFor(t, 5*time.Second, "mark by the periodic check", func() (bool, string) {
		ids := marked(t, c)
		return len(ids) == 1 && ids[0] == w.ID(), fmt.Sprint(ids)
	})
}

// TestLostBookieRecoveryDelay: a bookie that comes back within the delay
// causes no marks; one that stays away past it does.
func TestLostBookieRecoveryDelay(t *testing.T) {
	c := newCluster(t, 4, 18)
	w, _ := closedLedgerOn(t, c, 10)
	a, _ := startAuditor(t, c, AuditorConfig{LostBookieRecoveryDelay: 400 * time.Millisecond, PeriodicCheckInterval: -1})
	waitFor(t, 5*time.Second, "leader", func() (bool, string) { return a.IsLeader(), "" })
	b := w.Metadata().Ensembles[0].Bookies[1]
	c.stopBookie(b)
	time.Sleep(100 * time.Millisecond)
	c.startBookie(b) // a restart
	time.Sleep(600 * time.Millisecond)
	if ids := marked(t, c); len(ids) != 0 {
		t.Fatalf("a bookie back within the delay got ledgers marked: %v", ids)
	}
	stopped := time.Now()
	c.stopBookie(b)
	waitFor(t, 5*time.Second, "mark after the delay", func() (bool, string) {
		ids := marked(t, c)
		return len(ids) == 1, fmt.Sprint(ids)
	})
	if d := time.Since(stopped); d < 400*time.Millisecond {
		t.Fatalf("marked %v after the bookie left, before the 400ms delay", d)
	}
}

// scriptedPlacement ignores the registered bookies it is given (as a
// placement working from a stale list would): new ensembles are ens,
// replacements the first of order outside the ensemble and exclude.
type scriptedPlacement struct{ ens, order []string }

func (p scriptedPlacement) NewEnsemble(_ []BookieInfo, size, _, _ int, _ []string) ([]string, error) {
	if len(p.ens) < size {
		return nil, ErrNotEnoughBookies
	}
	return slices.Clone(p.ens[:size]), nil
}

func (p scriptedPlacement) Replace(_ []BookieInfo, ensemble []string, _, _ int, exclude []string) (string, error) {
	for _, b := range p.order {
		if !slices.Contains(ensemble, b) && !slices.Contains(exclude, b) {
			return b, nil
		}
	}
	return "", ErrNotEnoughBookies
}

// TestReplacementNeverALostBookie: two bookies lose their registrations
// but keep serving (their sessions expired); a placement with a stale
// list offers one of them as the replacement for the other. The worker
// must refuse it.
func TestReplacementNeverALostBookie(t *testing.T) {
	c := newCluster(t, 6, 19)
	cl := c.client(t, Config{Placement: scriptedPlacement{order: []string{"bookie-0", "bookie-1", "bookie-2", "bookie-3", "bookie-4", "bookie-5"}}})
	// A ledger on bookies 1, 2, 3: create it with the real placement, then
	// put it where the test wants it.
	ctx := ctxFor(t, 30*time.Second)
	pin := c.client(t, Config{Placement: scriptedPlacement{ens: []string{"bookie-1", "bookie-2", "bookie-3"}}})
	w := createLedger(t, pin, 3, 2, 2)
	a := newAcks()
	appendN(t, w, 20, a)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	before := snapshot{}
	before.take(t, c, []int64{w.ID()})
	// bookie-1 is lost for good; bookie-0 (in no ensemble) lost its
	// registration but still answers: it is the placement's first choice.
	c.meta.ExpireSession(c.nodes["bookie-0"].store)
	c.stopBookie("bookie-1")
	_, acl := startAuditor(t, c, testAuditorCfg)
	wk := NewReplicationWorker(cl, testWorkerCfg)
	wk.Start()
	t.Cleanup(wk.Stop)
	waitFor(t, 10*time.Second, "re-replication", func() (bool, string) {
		return settled(c, acl.cfg.Store, []int64{w.ID()}, map[string]bool{"bookie-0": true, "bookie-1": true})
	})
	md, _ := cl.ReadMetadata(ctx, w.ID())
	if got := md.Ensembles[0].Bookies; !slices.Equal(got, []string{"bookie-4", "bookie-2", "bookie-3"}) {
		t.Fatalf("ensemble %v: want bookie-1 replaced by bookie-4, the first registered choice", got)
	}
	checkReplicas(t, c, w.ID(), before, w.Metadata())
	checkPersistence(t, c, w.ID(), a)
}

// TestReplicateToFencedBookie: the replacement for a lost bookie of the
// first fragment is a bookie of the last one, which the recovery that
// closed the ledger fenced. Only recovery adds pass a fence, so the copy
// must use them.
func TestReplicateToFencedBookie(t *testing.T) {
	c := newCluster(t, 5, 20)
	ctx := ctxFor(t, 30*time.Second)
	writer := c.client(t, Config{AddTimeout: 300 * time.Millisecond,
		Placement: scriptedPlacement{ens: []string{"bookie-0", "bookie-1", "bookie-2"}, order: []string{"bookie-3"}}})
	w := createLedger(t, writer, 3, 2, 2)
	a := newAcks()
	appendN(t, w, 12, a)
	c.faults.partition("bookie-0", true) // the writer moves on to [bookie-3 bookie-1 bookie-2]
	appendN(t, w, 12, a)
	c.faults.partition("bookie-0", false)
	w.finish()
	if _, err := c.client(t, Config{}).OpenRecover(ctx, w.ID(), password); err != nil {
		t.Fatal(err) // fences bookie-3, bookie-1 and bookie-2
	}
	md, _ := writer.ReadMetadata(ctx, w.ID())
	if len(md.Ensembles) != 2 || !slices.Equal(md.Ensembles[1].Bookies, []string{"bookie-3", "bookie-1", "bookie-2"}) {
		t.Fatalf("setup: ensembles %+v", md.Ensembles)
	}
	before := snapshot{}
	before.take(t, c, []int64{w.ID()})
	c.stopBookie("bookie-2")
	_, acl := startAuditor(t, c, testAuditorCfg)
	wk := NewReplicationWorker(c.client(t, Config{Placement: scriptedPlacement{order: []string{"bookie-3", "bookie-4", "bookie-0"}}}), testWorkerCfg)
	wk.Start()
	t.Cleanup(wk.Stop)
	waitFor(t, 10*time.Second, "re-replication", func() (bool, string) {
		return settled(c, acl.cfg.Store, []int64{w.ID()}, map[string]bool{"bookie-2": true})
	})
	after, _ := writer.ReadMetadata(ctx, w.ID())
	if !slices.Equal(after.Ensembles[0].Bookies, []string{"bookie-0", "bookie-1", "bookie-3"}) ||
		!slices.Equal(after.Ensembles[1].Bookies, []string{"bookie-3", "bookie-1", "bookie-4"}) {
		t.Fatalf("ensembles %+v: want bookie-2 replaced by the fenced bookie-3, then bookie-4", after.Ensembles)
	}
	checkReplicas(t, c, w.ID(), before, md)
	checkPersistence(t, c, w.ID(), a)
}

// TestReplicationRandomized runs seeded scenarios: several ledgers with
// random quorums, closed, open with a dead writer, or open with a live
// writer appending throughout; bookies are lost one after another; an
// auditor and two workers run until no mark is left after each loss.
// Then every ledger is checked: no lost bookie named, every replica the
// exact bytes stored before, the persistence property. -run
// 'TestReplicationRandomized/seed=N' reruns one.
func TestReplicationRandomized(t *testing.T) {
	for seed := range uint64(*replSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runReplicationScenario(t, seed) })
	}
}

type scenarioLedger struct {
	w    *WriteHandle
	a    *acks
	kind int // 0 closed, 1 dead writer, 2 live writer
	stop chan struct{}
	done chan struct{}
}

func runReplicationScenario(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 77))
	n := 5 + rng.IntN(2)
	losses := 1 + rng.IntN(2)
	c := newCluster(t, n, 500+seed)
	c.faults.maxDelay = time.Duration(rng.IntN(200)) * time.Microsecond
	ctx := ctxFor(t, 60*time.Second)
	cl := c.client(t, Config{Placement: NewRandomPlacement(seed)})
	var ls []*scenarioLedger
	var ids []int64
	for range 4 + rng.IntN(3) {
		e := 2 + rng.IntN(n-losses-1) // the survivors must still fill an ensemble
		wq := 2 + rng.IntN(e-1)
		aq := 2 + rng.IntN(wq-1) // Qa >= 2: every entry survives one loss
		l := &scenarioLedger{w: createLedger(t, cl, e, wq, aq), a: newAcks(), kind: rng.IntN(3)}
		appendN(t, l.w, 5+rng.IntN(40), l.a)
		switch l.kind {
		case 0:
			if err := l.w.Close(ctx); err != nil {
				t.Fatal(err)
			}
		case 1:
			l.w.finish()
		case 2:
			l.stop, l.done = make(chan struct{}), make(chan struct{})
			go liveWriter(l)
		}
		ls, ids = append(ls, l), append(ids, l.w.ID())
	}
	t.Logf("n=%d losses=%d ledgers=%d kinds=%v", n, losses, len(ls), kinds(ls))
	before := snapshot{}
	_, acl := startAuditor(t, c, testAuditorCfg)
	startWorker(t, c, "w1", testWorkerCfg, replicationHooks{})
	startWorker(t, c, "w2", testWorkerCfg, replicationHooks{})
	lost := map[string]bool{}
	for range losses {
		before.take(t, c, ids)
		alive := slices.DeleteFunc(sortedIDs(c), func(b string) bool { return lost[b] })
		victim := alive[rng.IntN(len(alive))]
		lost[victim] = true
		t.Logf("losing %s", victim)
		c.stopBookie(victim)
		waitFor(t, 20*time.Second, "re-replication after losing "+victim, func() (bool, string) {
			return settled(c, acl.cfg.Store, ids, lost)
		})
	}
	for _, l := range ls {
		if l.kind == 2 {
			close(l.stop)
			<-l.done
			if err := l.w.Close(ctx); err != nil {
				t.Fatalf("ledger %d: live writer close: %v", l.w.ID(), err)
			}
		}
	}
	for _, l := range ls {
		id := l.w.ID()
		checkPersistence(t, c, id, l.a) // recovers the open ledgers that kept all their bookies
		md, err := cl.ReadMetadata(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if b := lostIn(md, lost); b != "" {
			t.Fatalf("ledger %d names lost bookie %s: %+v", id, b, md.Ensembles)
		}
		checkReplicas(t, c, id, before, nil)
	}
}

func kinds(ls []*scenarioLedger) []int {
	var out []int
	for _, l := range ls {
		out = append(out, l.kind)
	}
	return out
}

// liveWriter appends every few milliseconds until stopped.
func liveWriter(l *scenarioLedger) {
	defer close(l.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(3 * time.Millisecond):
		}
		wg.Add(1)
		l.w.AppendAsync(payload(l.w.ID(), l.w.peekNext()), l.a.cb(&wg))
	}
}
