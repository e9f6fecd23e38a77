package managedledger

// Three bookies, each with its journal and ledgers on its own small real
// file system (tmpfs), under a managed ledger (issue 30): one full disk
// costs nothing (the writer moves to the bookie left), all three full stop
// writes but not reads, and freeing the space brings writes back with no
// restart; nothing acknowledged is lost.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/internal/testdisk"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
)

const clusterCheck = 50 * time.Millisecond

// tmpfsBookie is a bookie on its own tmpfs whose registration follows its
// mode, as `magnetar bookie` publishes it.
type tmpfsBookie struct {
	id, dir string
	core    *bookie.Core
}

func startTmpfsBookie(t *testing.T, meta *metadata.MemoryServer, tr *ledger.LocalTransport, id string) *tmpfsBookie {
	t.Helper()
	dir := testdisk.MountTmpfs(t, "40m")
	jdir, ldir := filepath.Join(dir, "journal"), filepath.Join(dir, "ledgers")
	for _, d := range []string{jdir, ldir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		return entrylog.Open(engine.NewStd(), []string{ldir}, entrylog.Options{Checkpointer: cp, LogSizeLimit: 4 << 20,
			WriteCacheMaxSize: 4 << 20, FlushInterval: 50 * time.Millisecond, GCWaitTime: -1, Logger: quiet()})
	}
	core, err := bookie.OpenCore(engine.NewStd(), []string{jdir}, journal.Options{MaxFileSize: 8 << 20, Logger: quiet()}, open,
		bookie.Options{LedgerDirs: []string{ldir}, DiskCheckInterval: clusterCheck, FlushInterval: 100 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatalf("open bookie %s on tmpfs: %v", id, err)
	}
	store := meta.NewSession()
	reg, err := registry.Register(context.Background(), store, registry.Registration{BookieID: id, Address: id}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	core.OnModeChange(func(bool) {
		go func() { // off the goroutine that changed the mode, as announceBookie does
			ro, why := core.ReadOnly()
			_ = reg.SetMode(context.Background(), ro, why, core.OutOfSpace())
		}()
	})
	tr.Add(id, core)
	t.Cleanup(func() { tr.Add(id, nil); core.Close(); store.Close() })
	return &tmpfsBookie{id: id, dir: dir, core: core}
}

// fill leaves 1 MiB free on the bookie's disk; the returned func frees it.
func (b *tmpfsBookie) fill(t *testing.T) func() {
	t.Helper()
	p := testdisk.Fill(t, b.dir, 1<<20)
	return func() {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBKThreeBookiesFullDisks(t *testing.T) {
	meta, tr := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	var bks []*tmpfsBookie
	for i := range 3 {
		bks = append(bks, startTmpfsBookie(t, meta, tr, fmt.Sprintf("bk%d", i)))
	}
	cl, store := newClusterClient(t, meta, tr)
	f, err := NewBKFactory(Config{Store: store, Ledgers: cl, EnsembleSize: 2, WriteQuorum: 2, AckQuorum: 2,
		MaxEntriesPerLedger: 200, MinLedgerRolloverTime: time.Nanosecond, FailureBackoff: 20 * time.Millisecond,
		FailureBackoffMax: 200 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ml, err := f.Open(ctx, "public/default/persistent/three-full-disks")
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close(ctx)
	reader, err := ml.OpenCursor(ctx, "all", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	add := func() error {
		data := fmt.Sprintf("e%05d-%s", len(acked), make([]byte, 8<<10))
		if _, err := addWaitErr(ml, data); err != nil {
			return err
		}
		acked = append(acked, data[:6])
		return nil
	}
	for range 50 {
		if err := add(); err != nil {
			t.Fatal(err)
		}
	}

	// One full disk: the writer leaves that bookie for the third one.
	free0 := bks[0].fill(t)
	// The disk checker runs every clusterCheck; on a loaded machine a few
	// runs can take longer than three intervals. Space the bookie releases
	// after the fill (a preallocation it truncates) is filled again, so
	// the disk stays past diskUsageThreshold (95% of 40 MiB: < 2 MiB free).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(clusterCheck) {
		ro, why := bks[0].core.ReadOnly()
		if ro {
			break
		}
		free := testdisk.Free(t, bks[0].dir)
		if time.Now().After(deadline) {
			t.Fatalf("bookie bk0 with %d KiB free of 40 MiB is writable 10 s later (%s)", free>>10, why)
		}
		if free > 3<<19 {
			bks[0].fill(t)
		}
	}
	for range 50 {
		if err := add(); err != nil {
			t.Fatalf("with one of three disks full, an add failed: %v", err)
		}
	}
	free0()

	// All three full: adds fail, reads go on.
	var frees []func()
	for _, b := range bks {
		frees = append(frees, b.fill(t))
	}
	start := time.Now()
	var refused error
	for i := 0; i < 2000 && refused == nil; i++ {
		refused = add()
	}
	if refused == nil {
		t.Fatal("2000 adds of 8 KiB fit on three disks with 1 MiB free each")
	}
	toRefused := time.Since(start)
	expectReads(t, reader, acked, "with every disk full")

	// Space freed: adds work again, with no restart.
	for _, free := range frees {
		free()
	}
	freed := time.Now()
	var back time.Duration
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ml.ResumeAdds() // as the broker does once it has fenced the topic and reloaded
		if add() == nil {
			back = time.Since(freed)
			break
		}
	}
	if back == 0 {
		t.Fatal("no add succeeded in the 30 s after space was freed")
	}
	for range 20 {
		if err := add(); err != nil {
			t.Fatalf("add after the disks were freed: %v", err)
		}
	}
	expectReads(t, reader, acked, "after space was freed")
	t.Logf("3 bookies (E=Qw=Qa=2) on 40 MiB tmpfs each, diskCheckInterval %v: one disk full cost no add; all full refused adds after %v (%v); writes back %v after freeing; all %d acknowledged entries read",
		clusterCheck, toRefused.Round(time.Millisecond), refused, back.Round(time.Millisecond), len(acked))
}

func newClusterClient(t *testing.T, meta *metadata.MemoryServer, tr *ledger.LocalTransport) (*ledger.Client, metadata.Store) {
	t.Helper()
	store := meta.NewSession()
	cl, err := ledger.New(context.Background(), ledger.Config{Store: store, Transport: tr, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); store.Close() })
	return cl, store
}

// addWaitErr adds data and waits for its callback.
func addWaitErr(ml ManagedLedger, data string) (Position, error) {
	type result struct {
		p   Position
		err error
	}
	done := make(chan result, 1)
	ml.AddEntry([]byte(data), func(p Position, err error) { done <- result{p, err} })
	select {
	case r := <-done:
		return r.p, r.err
	case <-time.After(60 * time.Second):
		return Position{}, fmt.Errorf("add: no callback in 60 s")
	}
}

// expectReads reads the cursor from the start and checks it holds exactly
// the acknowledged entries, in order.
func expectReads(t *testing.T, c Cursor, acked []string, when string) {
	t.Helper()
	c.Rewind()
	var got []string
	for {
		es, err := c.ReadEntries(context.Background(), 100, 4<<20)
		if err != nil {
			t.Fatalf("%s: read: %v", when, err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			got = append(got, string(e.Data[:6]))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Fatalf("%s: read %d entries, %d acknowledged (first difference in %v / %v)", when, len(got), len(acked),
			got[:min(5, len(got))], acked[:min(5, len(acked))])
	}
}
