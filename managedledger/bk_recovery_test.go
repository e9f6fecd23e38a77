package managedledger

// Opening a managed ledger while its metadata store is slow or failing
// (metadata/faultstore): nothing may be trimmed before every cursor is
// known, and an open that failed leaves nothing running.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/faultstore"
)

// backlogFixture stores 7 entries over 4 ledgers with two cursors: "done"
// acknowledged all of them, "late" none. It closes the managed ledger.
func backlogFixture(t *testing.T, env *bkEnv, name string) {
	t.Helper()
	ctx := context.Background()
	f, _ := env.factoryOver(t, env.tr, nil, recoveryConfig())
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := ml.OpenCursor(ctx, "done", CursorOptions{Initial: Earliest})
	if _, err := ml.OpenCursor(ctx, "late", CursorOptions{Initial: Earliest}); err != nil {
		t.Fatal(err)
	}
	var last Position
	for i := range 7 {
		last = addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	if err := done.MarkDelete(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// recoveryConfig rolls over every 2 entries and persists every 20 ms, so
// a trim would come quickly.
func recoveryConfig() Config {
	return Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond, MarkDeleteRate: 50}
}

// expectBacklog reopens name with a healthy store and checks that "late"
// still reads all 7 entries.
func expectBacklog(t *testing.T, env *bkEnv, name string) {
	t.Helper()
	ctx := context.Background()
	f, _ := env.factoryOver(t, env.tr, nil, recoveryConfig())
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close(ctx)
	late, err := ml.OpenCursor(ctx, "late", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readAll(t, late)); got != "[m0 m1 m2 m3 m4 m5 m6]" {
		t.Fatalf("cursor late (nothing acknowledged) reads %s after the reopen: its backlog was trimmed", got)
	}
}

// TestBKSlowCursorRecoveryTrimsNothing: while one cursor's node is slow
// to read, the persister must not trim by the cursors recovered so far
// (issue 16, defect 1: the slow cursor lost its 7 unacknowledged entries).
func TestBKSlowCursorRecoveryTrimsNothing(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/slow-cursor-recovery"
	backlogFixture(t, env, name)

	slow := faultstore.OnPath(cursorPath(name, "late"), faultstore.Fault{Delay: 300 * time.Millisecond}, faultstore.OpGet)
	f, _ := env.factoryOver(t, env.tr, func(s metadata.Store) metadata.Store { return faultstore.Wrap(s, slow) }, recoveryConfig())
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	late, err := ml.OpenCursor(ctx, "late", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readAll(t, late)); got != "[m0 m1 m2 m3 m4 m5 m6]" {
		t.Fatalf("cursor late (nothing acknowledged, recovered slowly) reads %s: its backlog was trimmed during recovery", got)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	expectBacklog(t, env, name)
}

// TestBKFailedOpenLeavesNothingRunning: an open that fails while
// recovering cursors (one cursor node unreadable) must leave no persister
// behind: the abandoned instance trimmed by the cursors it had recovered,
// and the next open found the other cursor's backlog gone (issue 16,
// defect 1).
func TestBKFailedOpenLeavesNothingRunning(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/failed-open"
	backlogFixture(t, env, name)

	unreadable := faultstore.OnPath(cursorPath(name, "late"), faultstore.Fault{Fail: true}, faultstore.OpGet)
	fs := faultstore.Wrap(nil, unreadable)
	f, _ := env.factoryOver(t, env.tr, func(s metadata.Store) metadata.Store { fs = faultstore.Wrap(s, unreadable); return fs }, recoveryConfig())
	if _, err := f.Open(ctx, name); err == nil {
		t.Fatal("open succeeded with a cursor node unreadable")
	}
	// The abandoned instance must not write anything from now on: give
	// its persister (every 20 ms) time to run, and compare.
	before := fs.Ops()
	time.Sleep(300 * time.Millisecond)
	if n := fs.Ops() - before; n != 0 {
		t.Errorf("the abandoned managed ledger made %d metadata calls after its open failed", n)
	}
	expectBacklog(t, env, name)
}

// TestBKClosedLedgerTrimsNothing: trims after Close (a tick that armed
// before it, a SetRetention after it) write nothing.
func TestBKClosedLedgerTrimsNothing(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/closed-no-trim"
	counting := faultstore.Wrap(nil, faultstore.None)
	f, _ := env.factoryOver(t, env.tr, func(s metadata.Store) metadata.Store { counting = faultstore.Wrap(s, faultstore.None); return counting },
		Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond, MarkDeleteRate: 50, Retention: Retention{Time: -1, Size: -1}})
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	var last Position
	for i := range 5 {
		last = addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	if err := c.MarkDelete(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	before := counting.Ops()
	ml.SetRetention(Retention{}) // everything consumed would now go
	time.Sleep(200 * time.Millisecond)
	if n := counting.Ops() - before; n != 0 {
		t.Fatalf("the closed managed ledger made %d metadata calls", n)
	}
}

// TestBKReopenCursorAfterFailedDelete: a cursor delete whose node delete
// failed leaves the node; opening the same name again must take that node
// over. It used to ignore the existing node and keep version 0, so the
// cursor's first persist failed its CAS and the managed ledger closed
// itself as fenced ("changed or deleted under this owner"); found by the
// model test.
func TestBKReopenCursorAfterFailedDelete(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/reopen-after-failed-delete"
	failDelete := faultstore.NewToggle(faultstore.OnPath(cursorPath(name, "c"), faultstore.Fault{Fail: true}, faultstore.OpDelete))
	f, _ := env.factoryOver(t, env.tr, func(s metadata.Store) metadata.Store { return faultstore.Wrap(s, failDelete) }, recoveryConfig())
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close(ctx)
	c, err := ml.OpenCursor(ctx, "c", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	first := addWait(t, ml, "m0")
	if err := c.MarkDelete(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitPersisted(t, c.(*bkCursor))
	failDelete.Set(true)
	if err := ml.DeleteCursor(ctx, "c"); err == nil {
		t.Fatal("the delete of the cursor's node failed, yet DeleteCursor succeeded")
	}
	failDelete.Set(false)
	c, err = ml.OpenCursor(ctx, "c", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		p := addWait(t, ml, fmt.Sprintf("m%d", i))
		if err := c.MarkDelete(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitPersisted(t, c.(*bkCursor)) // a CAS on the cursor's node
	}
	if _, err := ml.OpenCursor(ctx, "other", CursorOptions{}); err != nil {
		t.Fatalf("the managed ledger stopped after the cursor was opened again: %v", err)
	}
}
