package managedledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger/offload"
)

func offloadFactory(t *testing.T, e *bkEnv, root string) *BKFactory {
	t.Helper()
	return e.factory(t, Config{MaxEntriesPerLedger: 5, MinLedgerRolloverTime: 1,
		Offload: &OffloadConfig{Driver: offload.DriverFilesystem, Config: offload.Config{Root: root}}})
}

// TestOffloadPrefixReadsFromTheCopy: offloaded ledgers are read from
// their copies, also after their bookie copies are deleted and after a
// reopen; the current ledger is never offloaded; a trimmed ledger's copy
// goes with it.
func TestOffloadPrefixReadsFromTheCopy(t *testing.T) {
	e := newBKEnv(t)
	root := t.TempDir()
	f := offloadFactory(t, e, root)
	ctx := context.Background()
	ml, err := f.Open(ctx, "t/ns/persistent/off")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ml.OpenCursor(ctx, "keep", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 17 {
		want = append(want, fmt.Sprintf("m%02d", i))
		addWait(t, ml, want[i])
	}
	first, err := ml.(Offloadable).OffloadPrefix(ctx, "", Position{LedgerID: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	lls := ml.(LedgerLister).Ledgers()
	off := ml.(Offloadable).Offloaded()
	if last := lls[len(lls)-1]; off[last.ID] || first.LedgerID != last.ID || first.EntryID != 0 {
		t.Fatalf("first not offloaded %v; ledgers %v offloaded %v: every closed ledger, not the current %d", first, lls, off, last.ID)
	}
	for _, l := range lls[:len(lls)-1] {
		if !off[l.ID] {
			t.Fatalf("ledger %d not offloaded: %v", l.ID, off)
		}
	}
	copies, _ := filepath.Glob(filepath.Join(root, "t/ns/persistent/off", "*.ledger"))
	if len(copies) != len(lls)-1 {
		t.Fatalf("%d copies under %s, want %d", len(copies), root, len(lls)-1)
	}
	if err := ml.(Offloadable).OffloadByPolicy(ctx, OffloadPolicy{ThresholdBytes: -1, ThresholdAge: -1}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	// The deletion lag passed: the bookies' copies go; reads still work,
	// also after a reopen by a new owner.
	if err := ml.(Offloadable).OffloadByPolicy(ctx, OffloadPolicy{ThresholdBytes: -1, ThresholdAge: -1, DeletionLag: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cfg.Ledgers.OpenNoRecovery(ctx, lls[0].ID, nil); !errors.Is(err, ledger.ErrNoSuchLedger) {
		t.Fatalf("offloaded ledger %d still on the bookies (%v) after its deletion lag", lls[0].ID, err)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f2 := offloadFactory(t, e, root)
	ml2, err := f2.Open(ctx, "t/ns/persistent/off")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ml2.NewNonDurableCursor(Position{-1, -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a reopen: read %v, want %v", got, want)
	}
	// Consumed and trimmed: the copies go too.
	c2, err := ml2.OpenCursor(ctx, "keep", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.MarkDelete(ctx, ml2.LastConfirmed()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		copies, _ = filepath.Glob(filepath.Join(root, "t/ns/persistent/off", "*.ledger"))
		if len(copies) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("copies of trimmed ledgers left: %v", copies)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = ml2.Close(ctx)
}

// TestOffloadByThresholds: a size threshold keeps that many bytes of the
// newest closed ledgers on the bookies; 0 offloads every closed ledger.
func TestOffloadByThresholds(t *testing.T) {
	e := newBKEnv(t)
	f := offloadFactory(t, e, t.TempDir())
	ctx := context.Background()
	ml, err := f.Open(ctx, "t/ns/persistent/thr")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ml.OpenCursor(ctx, "keep", CursorOptions{Initial: Earliest}); err != nil {
		t.Fatal(err)
	}
	for i := range 21 { // four closed ledgers of 5 entries of 10 bytes
		addWait(t, ml, fmt.Sprintf("entry-%04d", i))
	}
	count := func() (n int) {
		for _, v := range ml.(Offloadable).Offloaded() {
			if v {
				n++
			}
		}
		return n
	}
	if err := ml.(Offloadable).OffloadByPolicy(ctx, OffloadPolicy{ThresholdBytes: 100, ThresholdAge: -1, DeletionLag: -1}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 { // 100 bytes kept: the two newest closed ledgers
		t.Fatalf("%d ledgers offloaded with 100 bytes kept, want 2", n)
	}
	if err := ml.(Offloadable).OffloadByPolicy(ctx, OffloadPolicy{ThresholdBytes: 0, ThresholdAge: -1, DeletionLag: -1}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 4 {
		t.Fatalf("%d ledgers offloaded with a threshold of 0, want every closed one (4)", n)
	}
	_ = ml.Close(ctx)
}

// TestOffloadFailureLeavesNothing: a driver that is not available fails
// the offload with an error naming it and changes nothing; a copy whose
// reads fail halfway leaves no file and the ledger read from the bookies.
func TestOffloadFailureLeavesNothing(t *testing.T) {
	e := newBKEnv(t)
	root := t.TempDir()
	f := e.factory(t, Config{MaxEntriesPerLedger: 5, MinLedgerRolloverTime: 1,
		Offload: &OffloadConfig{Driver: offload.DriverFilesystem, Config: offload.Config{Root: root},
			Wrap: func(o offload.Offloader) offload.Offloader {
				return offload.NewFaulty(o, func(op string, _ offload.Key) error {
					if op == offload.OpSourceRead {
						return errors.New("injected: bookie read failed")
					}
					return nil
				})
			}}})
	ctx := context.Background()
	ml, err := f.Open(ctx, "t/ns/persistent/fail")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ml.OpenCursor(ctx, "keep", CursorOptions{Initial: Earliest})
	for i := range 12 {
		addWait(t, ml, fmt.Sprintf("m%02d", i))
	}
	_, err = ml.(Offloadable).OffloadPrefix(ctx, "aws-s3", Position{LedgerID: 1 << 62})
	if !errors.Is(err, offload.ErrUnsupportedDriver) {
		t.Fatalf("offload to aws-s3: %v, want ErrUnsupportedDriver", err)
	}
	if _, err := ml.(Offloadable).OffloadPrefix(ctx, "", Position{LedgerID: 1 << 62}); err == nil {
		t.Fatal("an offload whose source reads fail succeeded")
	}
	if copies, _ := filepath.Glob(filepath.Join(root, "t/ns/persistent/fail", "*")); len(copies) != 0 {
		t.Fatalf("a failed offload left %v", copies)
	}
	for id, v := range ml.(Offloadable).Offloaded() {
		if v {
			t.Fatalf("ledger %d counts as offloaded after failed offloads", id)
		}
	}
	if got := readAll(t, c); len(got) != 12 {
		t.Fatalf("read %d entries after failed offloads, want 12", len(got))
	}
	_ = ml.Close(ctx)
}
