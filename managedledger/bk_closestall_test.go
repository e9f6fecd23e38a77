package managedledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// TestBKCloseDoesNotWaitForAStalledBookie: a bookie that went silent (a
// cut, a paused process) holds every add to it until the add timeout. An
// unload must not wait that long: Close gives up on the cursor snapshots
// and adds still pending after CloseTimeout, and the next owner recovers
// the ledger with every acknowledged entry. Found by the fault suite
// (partition-broker-bookie seed 16): load shedding unloaded a topic 0.4 s
// into a cut; the unload took 13 s, all of it refused to the topic's
// clients ("not served by this broker").
func TestBKCloseDoesNotWaitForAStalledBookie(t *testing.T) {
	const name = "public/default/persistent/close-stalled"
	env, ft, ml, c := openOverFaults(t, name, Config{CloseTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	var acked []string
	for i := range 3 {
		m := fmt.Sprintf("m%d", i)
		addWait(t, ml, m)
		acked = append(acked, m)
	}
	es, err := c.ReadEntries(ctx, 1, 1<<20)
	if err != nil || len(es) != 1 {
		t.Fatalf("read: %v %v", es, err)
	}
	if err := c.MarkDelete(ctx, es[0].Position); err != nil { // dirty: Close persists it
		t.Fatal(err)
	}
	hang := ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Hang})
	pending := addAsync(ml, "never acknowledged")
	start := time.Now()
	_ = ml.Close(ctx) // its error says what it gave up on
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %s with a bookie silent (CloseTimeout 500 ms)", took.Round(time.Millisecond))
	}
	select {
	case r := <-pending:
		if r.err == nil {
			t.Fatalf("the add pending on the silent bookie succeeded at %v", r.p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pending add never called back after Close")
	}
	ft.Remove(hang)
	owner, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := owner.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, c2)
	// At least once: the cursor is where its last snapshot that landed
	// put it (m0 acknowledged or not), and every acknowledged entry after
	// it is there, in order; the add the silent bookie never received is
	// not.
	if fmt.Sprint(got) != fmt.Sprint(acked[1:]) && fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Fatalf("the next owner reads %v, want %v (or m0 too)", got, acked[1:])
	}
}

// TestBKCloseDoesNotWaitForAPersistTickOnAStalledBookie: Close waited,
// unbounded, for a cursor-persist tick in flight, and a tick whose cursor
// snapshot went to a silent bookie holds until the add timeout. Found by
// the fault suite (partition-broker-bookie seed 15 of 5 Dec): load shedding
// unloaded a topic 2 s into a cut of one bookie; its clients were closed at
// once, but the unload finished 11.6 s later (12.4 s without an
// acknowledgement against the 11 s bound), 9.6 s of it waiting for the tick.
func TestBKCloseDoesNotWaitForAPersistTickOnAStalledBookie(t *testing.T) {
	_, ft, ml, c := openOverFaults(t, "public/default/persistent/close-during-tick",
		Config{CloseTimeout: 500 * time.Millisecond, MarkDeleteRate: 100})
	ctx := context.Background()
	for i := range 3 {
		addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	es, err := c.ReadEntries(ctx, 1, 1<<20)
	if err != nil || len(es) != 1 {
		t.Fatalf("read: %v %v", es, err)
	}
	hang := ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Hang})
	defer ft.Remove(hang)
	if err := c.MarkDelete(ctx, es[0].Position); err != nil { // the next tick (10 ms) persists it
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the tick's snapshot is now held by the silent bookie
	start := time.Now()
	_ = ml.Close(ctx)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %s with a persist tick held by a silent bookie (CloseTimeout 500 ms)", took.Round(time.Millisecond))
	}
}

// openOverFaults opens a managed ledger named name whose bookies are
// reached through a fault-injecting transport, with a cursor "s" from the
// earliest entry.
func openOverFaults(t *testing.T, name string, cfg Config) (*bkEnv, *fault.Transport, ManagedLedger, Cursor) {
	t.Helper()
	env := newBKEnv(t)
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, cfg)
	ml, err := f.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ml.OpenCursor(context.Background(), "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	return env, ft, ml, c
}

// TestBKOpenRecoversCursorsAtOnce: a new owner recovers a topic's durable
// cursors side by side, as Pulsar's managed ledger does, not one after the
// other: each recovery reads its cursor ledger's last entry (and fences
// the ledger when the previous owner left it open), and a producer waits
// for the whole open. Found by the fault suite (kill-broker seed 2 of 5
// Dec: 5.7 s without an acknowledgement against the 6 s bound, the last
// 1.1 s of it the restarted broker recovering its topics' 15 ledgers one
// by one). Every bookie read here takes 100 ms; ten cursors recovered one
// after the other take a second.
func TestBKOpenRecoversCursorsAtOnce(t *testing.T) {
	const name, cursors = "public/default/persistent/many-cursors", 10
	env := newBKEnv(t)
	ctx := context.Background()
	first := env.factory(t, Config{})
	ml, err := first.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	for i := range cursors {
		c, err := ml.OpenCursor(ctx, fmt.Sprintf("sub-%d", i), CursorOptions{Initial: Earliest})
		if err != nil {
			t.Fatal(err)
		}
		es, err := c.ReadEntries(ctx, 1+i%3, 1<<20)
		if err != nil || len(es) == 0 {
			t.Fatalf("read: %v %v", es, err)
		}
		if err := c.MarkDelete(ctx, es[len(es)-1].Position); err != nil {
			t.Fatal(err)
		}
	}
	if err := ml.Close(ctx); err != nil { // every cursor in a cursor ledger of its own
		t.Fatal(err)
	}
	ft := fault.NewTransport(env.tr)
	ft.Inject(fault.Fault{Op: bkproto.OpRead, Action: fault.Delay, Delay: 100 * time.Millisecond})
	owner, _ := env.factoryOver(t, ft, nil, Config{})
	start := time.Now()
	ml2, err := owner.Open(ctx, name)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	defer ml2.Close(ctx)
	if took > 600*time.Millisecond {
		t.Fatalf("opening a managed ledger with %d cursors took %s with 100 ms bookie reads: recovered one after the other", cursors, took.Round(time.Millisecond))
	}
	for i := range cursors {
		c, err := ml2.OpenCursor(ctx, fmt.Sprintf("sub-%d", i), CursorOptions{Initial: Earliest})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(readAll(t, c)), 3-(1+i%3); got != want {
			t.Fatalf("cursor sub-%d reads %d entries after recovery, want %d", i, got, want)
		}
	}
}

// TestBKCloseKeepsACursorHeldByAStalledBookie: a cursor whose snapshot a
// silent bookie holds is written to its metadata node instead, as Pulsar's
// cursor persists its position to the metadata store when it closes, so
// the close neither waits out CloseTimeout nor loses the position. Found
// by the fault suite (partition-broker-bookie seed 1 of 5 Dec at 7d7a7d4):
// load shedding unloaded a bundle 9.2 s into a cut of one bookie, its
// close waited the whole 2 s for cursor snapshots on the cut bookie, and a
// producer went 11.4 s without an acknowledgement against the 11 s bound.
func TestBKCloseKeepsACursorHeldByAStalledBookie(t *testing.T) {
	const name = "public/default/persistent/close-cursor-stalled"
	env, ft, ml, c := openOverFaults(t, name, Config{CloseTimeout: 2 * time.Second})
	ctx := context.Background()
	for i := range 3 {
		addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	es, err := c.ReadEntries(ctx, 3, 1<<20)
	if err != nil || len(es) != 3 {
		t.Fatalf("read: %v %v", es, err)
	}
	if err := c.MarkDelete(ctx, es[0].Position); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, es[2].Position); err != nil { // an acknowledged range beyond the mark-delete
		t.Fatal(err)
	}
	hang := ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Hang})
	start := time.Now()
	_ = ml.Close(ctx)
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %s with a cursor snapshot held by a silent bookie (CloseTimeout 2 s)", took.Round(time.Millisecond))
	}
	ft.Remove(hang)
	owner, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := owner.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c2); fmt.Sprint(got) != "[m1]" {
		t.Fatalf("the next owner's cursor reads %v, want [m1] (m0 mark-deleted and m2 acknowledged before the close)", got)
	}
}
