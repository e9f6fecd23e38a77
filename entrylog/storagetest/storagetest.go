// Package storagetest is the conformance suite of the entrylog.Storage
// contract: every implementation (the in-memory one, the on-disk one) runs
// it, so the layers above can rely on the contract, not on one
// implementation.
package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Open returns a fresh, empty Storage that reports checkpoints to cp.
type Open func(t *testing.T, cp entrylog.Checkpointer) entrylog.Storage

// Run runs the suite; each subtest opens its own storage and closes it.
func Run(t *testing.T, open Open) { run(t, open, false) }

// RunKept runs the suite on a KeepingAdder with every add a kept one
// (AddEntryKept), but for CopiesInput: a kept add's data is the caller's
// promise not to change it, and Run checks that AddEntry copies.
func RunKept(t *testing.T, open func(t *testing.T, cp entrylog.Checkpointer) entrylog.KeepingStorage) {
	run(t, func(t *testing.T, cp entrylog.Checkpointer) entrylog.Storage { return keeping{open(t, cp)} }, true)
}

// keeping makes every AddEntry an AddEntryKept.
type keeping struct{ entrylog.KeepingStorage }

func (k keeping) AddEntry(ledgerID, entryID int64, data []byte) error {
	return k.AddEntryKept(ledgerID, entryID, data, crc32c.Known{})
}

func run(t *testing.T, open Open, kept bool) {
	tests := []struct {
		name string
		fn   func(*testing.T, Open)
	}{
		{"MasterKey", testMasterKey},
		{"Fenced", testFenced},
		{"ExplicitLAC", testExplicitLAC},
		{"AddRead", testAddRead},
		{"Replace", testReplace},
		{"LastEntryID", testLastEntryID},
		{"Delete", testDelete},
		{"Ledgers", testLedgers},
		{"FlushCheckpoint", testFlushCheckpoint},
		{"CopiesInput", testCopiesInput},
		{"Closed", testClosed},
		{"Concurrent", testConcurrent},
	}
	for _, tc := range tests {
		if kept && tc.name == "CopiesInput" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func openClosed(t *testing.T, open Open, cp entrylog.Checkpointer) entrylog.Storage {
	s := open(t, cp)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

func testMasterKey(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	_, err := s.MasterKey(1)
	wantErr(t, err, entrylog.ErrNoLedger, "MasterKey of an unknown ledger")
	must(t, s.SetMasterKey(1, []byte("key-1")))
	must(t, s.SetMasterKey(1, []byte("other")))
	k, err := s.MasterKey(1)
	must(t, err)
	if string(k) != "key-1" {
		t.Fatalf("master key %q, want the first one set", k)
	}
	if ok, err := s.LedgerExists(1); !ok || err != nil {
		t.Fatalf("LedgerExists after SetMasterKey: %v %v", ok, err)
	}
	if _, err := s.LastEntryID(1); !errors.Is(err, entrylog.ErrNoEntry) {
		t.Fatalf("LastEntryID of a ledger without entries: %v", err)
	}
	must(t, s.AddEntry(2, 0, []byte("x")))
	if k, err := s.MasterKey(2); err != nil || k != nil {
		t.Fatalf("MasterKey of a ledger created by AddEntry: %q %v, want nil", k, err)
	}
}

func testFenced(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	_, err := s.SetFenced(5)
	wantErr(t, err, entrylog.ErrNoLedger, "SetFenced of an unknown ledger")
	_, err = s.IsFenced(5)
	wantErr(t, err, entrylog.ErrNoLedger, "IsFenced of an unknown ledger")
	must(t, s.SetMasterKey(5, []byte("k")))
	if f, err := s.IsFenced(5); f || err != nil {
		t.Fatalf("new ledger fenced=%v err=%v", f, err)
	}
	if was, err := s.SetFenced(5); was || err != nil {
		t.Fatalf("first SetFenced: already=%v err=%v", was, err)
	}
	if was, err := s.SetFenced(5); !was || err != nil {
		t.Fatalf("second SetFenced: already=%v err=%v", was, err)
	}
	if f, err := s.IsFenced(5); !f || err != nil {
		t.Fatalf("IsFenced after SetFenced: %v %v", f, err)
	}
}

func testExplicitLAC(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	wantErr(t, s.SetExplicitLAC(7, []byte("lac")), entrylog.ErrNoLedger, "SetExplicitLAC of an unknown ledger")
	_, err := s.ExplicitLAC(7)
	wantErr(t, err, entrylog.ErrNoLedger, "ExplicitLAC of an unknown ledger")
	must(t, s.AddEntry(7, 0, []byte("e")))
	if lac, err := s.ExplicitLAC(7); lac != nil || err != nil {
		t.Fatalf("ExplicitLAC before any: %q %v", lac, err)
	}
	must(t, s.SetExplicitLAC(7, []byte("lac-1")))
	must(t, s.SetExplicitLAC(7, []byte("lac-2")))
	if lac, err := s.ExplicitLAC(7); string(lac) != "lac-2" || err != nil {
		t.Fatalf("ExplicitLAC: %q %v", lac, err)
	}
}

// payload is entry (l, e)'s deterministic content, of a size that varies.
func payload(l, e int64, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(int64(i)*31 + l*7 + e*13)
	}
	return b
}

func checkEntry(t *testing.T, s entrylog.Storage, l, e int64, want []byte) {
	t.Helper()
	got, err := s.ReadEntry(l, e)
	if err != nil {
		t.Fatalf("ReadEntry(%d, %d): %v", l, e, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ReadEntry(%d, %d): %d bytes differ from the %d added", l, e, len(got), len(want))
	}
}

func testAddRead(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[[2]int64][]byte{}
	for round := 0; round < 3; round++ {
		for i := 0; i < 200; i++ {
			l, e := int64(rng.IntN(6)), int64(rng.IntN(100))
			p := payload(l, e+int64(round), rng.IntN(3000))
			must(t, s.AddEntry(l, e, p))
			want[[2]int64{l, e}] = p
		}
		for k, p := range want {
			checkEntry(t, s, k[0], k[1], p)
		}
		must(t, s.Flush())
		for k, p := range want {
			checkEntry(t, s, k[0], k[1], p)
		}
	}
	_, err := s.ReadEntry(100, 0)
	wantErr(t, err, entrylog.ErrNoLedger, "ReadEntry of an unknown ledger")
	for e := int64(0); ; e++ {
		if _, ok := want[[2]int64{0, e}]; !ok {
			_, err := s.ReadEntry(0, e)
			wantErr(t, err, entrylog.ErrNoEntry, "ReadEntry of a missing entry")
			break
		}
	}
	must(t, s.AddEntry(9, 0, nil))
	if got, err := s.ReadEntry(9, 0); err != nil || len(got) != 0 {
		t.Fatalf("empty entry: %q %v", got, err)
	}
}

func testReplace(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	must(t, s.AddEntry(1, 0, []byte("first")))
	must(t, s.AddEntry(1, 1, []byte("next")))
	must(t, s.Flush())
	checkEntry(t, s, 1, 0, []byte("first")) // now possibly cached
	must(t, s.AddEntry(1, 0, []byte("second")))
	checkEntry(t, s, 1, 0, []byte("second"))
	must(t, s.Flush())
	checkEntry(t, s, 1, 0, []byte("second"))
	must(t, s.AddEntry(1, 0, []byte("third")))
	must(t, s.AddEntry(1, 0, []byte("fourth")))
	checkEntry(t, s, 1, 0, []byte("fourth"))
	must(t, s.Flush())
	checkEntry(t, s, 1, 0, []byte("fourth"))
	checkEntry(t, s, 1, 1, []byte("next"))
}

func testLastEntryID(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	_, err := s.LastEntryID(3)
	wantErr(t, err, entrylog.ErrNoLedger, "LastEntryID of an unknown ledger")
	check := func(want int64) {
		t.Helper()
		got, err := s.LastEntryID(3)
		if err != nil || got != want {
			t.Fatalf("LastEntryID = %d, %v; want %d", got, err, want)
		}
	}
	for _, e := range []int64{5, 2, 9, 7} {
		must(t, s.AddEntry(3, e, []byte{byte(e)}))
	}
	check(9)
	must(t, s.Flush())
	check(9)
	must(t, s.AddEntry(3, 12, []byte("x")))
	check(12)
	must(t, s.AddEntry(4, 100, []byte("other ledger")))
	must(t, s.Flush())
	check(12)
	must(t, s.AddEntry(3, 1<<40, []byte("big id")))
	check(1 << 40)
}

func testDelete(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	must(t, s.DeleteLedger(42)) // unknown: not an error
	for e := int64(0); e < 20; e++ {
		must(t, s.AddEntry(1, e, payload(1, e, 100)))
		must(t, s.AddEntry(2, e, payload(2, e, 100)))
	}
	must(t, s.SetMasterKey(1, []byte("k")))
	must(t, s.Flush())
	for e := int64(20); e < 25; e++ {
		must(t, s.AddEntry(1, e, payload(1, e, 100)))
	}
	must(t, s.DeleteLedger(1))
	if ok, err := s.LedgerExists(1); ok || err != nil {
		t.Fatalf("LedgerExists after delete: %v %v", ok, err)
	}
	for _, e := range []int64{0, 22} {
		_, err := s.ReadEntry(1, e)
		wantErr(t, err, entrylog.ErrNoLedger, "ReadEntry of a deleted ledger")
	}
	_, err := s.MasterKey(1)
	wantErr(t, err, entrylog.ErrNoLedger, "MasterKey of a deleted ledger")
	_, err = s.LastEntryID(1)
	wantErr(t, err, entrylog.ErrNoLedger, "LastEntryID of a deleted ledger")
	_, err = s.SetFenced(1)
	wantErr(t, err, entrylog.ErrNoLedger, "SetFenced of a deleted ledger")
	must(t, s.Flush())
	_, err = s.ReadEntry(1, 22)
	wantErr(t, err, entrylog.ErrNoLedger, "ReadEntry of a deleted ledger after a flush")
	for e := int64(0); e < 20; e++ {
		checkEntry(t, s, 2, e, payload(2, e, 100))
	}
	must(t, s.DeleteLedger(1)) // twice: not an error
	// A replayed or stale write never brings a deleted ledger back.
	must(t, s.AddEntry(1, 30, payload(1, 30, 100)))
	must(t, s.SetMasterKey(1, []byte("k")))
	if ok, err := s.LedgerExists(1); ok || err != nil {
		t.Fatalf("LedgerExists after writes to a deleted ledger: %v %v", ok, err)
	}
	_, err = s.ReadEntry(1, 30)
	wantErr(t, err, entrylog.ErrNoLedger, "ReadEntry after a write to a deleted ledger")
}

func testLedgers(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	ids := []int64{40, 3, 17, 1 << 50, 8, 0}
	for _, id := range ids {
		must(t, s.SetMasterKey(id, []byte("k")))
	}
	must(t, s.DeleteLedger(17))
	var got []int64
	must(t, s.Ledgers(func(id int64) bool { got = append(got, id); return true }))
	if fmt.Sprint(got) != fmt.Sprint([]int64{0, 3, 8, 40, 1 << 50}) {
		t.Fatalf("Ledgers = %v", got)
	}
	got = nil
	must(t, s.Ledgers(func(id int64) bool { got = append(got, id); return len(got) < 2 }))
	if len(got) != 2 {
		t.Fatalf("Ledgers went on after fn returned false: %v", got)
	}
}

// Checkpoints records what a storage reports; positions are ints.
type Checkpoints struct {
	mu        sync.Mutex
	next      int
	started   []int
	completed []int
}

// StartCheckpoint implements entrylog.Checkpointer.
func (c *Checkpoints) StartCheckpoint() entrylog.Checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.started = append(c.started, c.next)
	return c.next
}

// CompleteCheckpoint implements entrylog.Checkpointer.
func (c *Checkpoints) CompleteCheckpoint(cp entrylog.Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.completed = append(c.completed, cp.(int))
	return nil
}

// Completed returns the checkpoints completed so far, in order.
func (c *Checkpoints) Completed() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.completed...)
}

func testFlushCheckpoint(t *testing.T, open Open) {
	cps := &Checkpoints{}
	s := openClosed(t, open, cps)
	must(t, s.AddEntry(1, 0, []byte("a")))
	before := len(cps.Completed())
	must(t, s.Flush())
	got := cps.Completed()
	if len(got) != before+1 {
		t.Fatalf("Flush completed %d checkpoints, want 1", len(got)-before)
	}
	cps.mu.Lock()
	last := cps.started[len(cps.started)-1]
	cps.mu.Unlock()
	if got[len(got)-1] != last {
		t.Fatalf("completed checkpoint %d, the last one started was %d", got[len(got)-1], last)
	}
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Fatalf("checkpoints completed out of order: %v", got)
		}
	}
}

func testCopiesInput(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	buf := []byte("original")
	must(t, s.AddEntry(1, 0, buf))
	key := []byte("key")
	must(t, s.SetMasterKey(1, key))
	lac := []byte("lac")
	must(t, s.SetExplicitLAC(1, lac))
	copy(buf, "XXXXXXXX")
	copy(key, "XXX")
	copy(lac, "XXX")
	checkEntry(t, s, 1, 0, []byte("original"))
	if k, _ := s.MasterKey(1); string(k) != "key" {
		t.Fatalf("master key changed with the caller's buffer: %q", k)
	}
	if l, _ := s.ExplicitLAC(1); string(l) != "lac" {
		t.Fatalf("LAC changed with the caller's buffer: %q", l)
	}
	// A slice returned earlier stays as it was after later adds and flushes.
	got, err := s.ReadEntry(1, 0)
	must(t, err)
	must(t, s.Flush())
	for e := int64(1); e < 50; e++ {
		must(t, s.AddEntry(1, e, payload(1, e, 500)))
	}
	must(t, s.AddEntry(1, 0, []byte("replaced")))
	must(t, s.Flush())
	if string(got) != "original" {
		t.Fatalf("a returned slice changed to %q", got)
	}
}

func testClosed(t *testing.T, open Open) {
	s := open(t, nil)
	must(t, s.AddEntry(1, 0, []byte("a")))
	must(t, s.Close())
	calls := map[string]error{
		"Close":          s.Close(),
		"AddEntry":       s.AddEntry(1, 1, nil),
		"SetMasterKey":   s.SetMasterKey(1, nil),
		"SetExplicitLAC": s.SetExplicitLAC(1, nil),
		"DeleteLedger":   s.DeleteLedger(1),
		"Flush":          s.Flush(),
		"Ledgers":        s.Ledgers(func(int64) bool { return true }),
	}
	_, calls["ReadEntry"] = s.ReadEntry(1, 0)
	_, calls["MasterKey"] = s.MasterKey(1)
	_, calls["SetFenced"] = s.SetFenced(1)
	_, calls["IsFenced"] = s.IsFenced(1)
	_, calls["ExplicitLAC"] = s.ExplicitLAC(1)
	_, calls["LedgerExists"] = s.LedgerExists(1)
	_, calls["LastEntryID"] = s.LastEntryID(1)
	for name, err := range calls {
		wantErr(t, err, entrylog.ErrClosed, name+" after Close")
	}
}

// testConcurrent adds, reads and flushes from several goroutines, one
// ledger each, checking every read.
func testConcurrent(t *testing.T, open Open) {
	s := openClosed(t, open, nil)
	const writers, perWriter = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(l int64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(l), 9))
			for e := int64(0); e < perWriter; e++ {
				if err := s.AddEntry(l, e, payload(l, e, 200+int(e%7)*100)); err != nil {
					errs <- err
					return
				}
				r := int64(rng.IntN(int(e) + 1))
				got, err := s.ReadEntry(l, r)
				if err != nil || !bytes.Equal(got, payload(l, r, 200+int(r%7)*100)) {
					errs <- fmt.Errorf("ledger %d entry %d read back wrong: %v", l, r, err)
					return
				}
			}
		}(int64(w + 1))
	}
	var fwg sync.WaitGroup
	fwg.Add(1)
	go func() {
		defer fwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Flush(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	fwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
