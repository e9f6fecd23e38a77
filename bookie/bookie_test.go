package bookie

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

func TestAddAndRead(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	for i := range 50 {
		if err := tb.add(7, int64(i), int64(i-1), payloadOf(i), 0); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	for i := range 50 {
		resp, err := tb.read(7, int64(i))
		mustPayload(t, resp, err, payloadOf(i))
		if resp.LAC != 48 {
			t.Fatalf("read %d: LAC %d, want 48", i, resp.LAC)
		}
	}
	if _, err := tb.read(7, 50); !errors.Is(err, client.ErrNoEntry) {
		t.Fatalf("read past the end: %v, want ErrNoEntry", err)
	}
	if _, err := tb.read(8, 0); !errors.Is(err, client.ErrNoLedger) {
		t.Fatalf("read of unknown ledger: %v, want ErrNoLedger", err)
	}
}

func TestAddChecksKeyAndHead(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	if err := tb.add(1, 0, -1, "a", 0); err != nil {
		t.Fatal(err)
	}
	_, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1, EntryID: 1, MasterKey: []byte("other"), Data: entry(1, 1, 0, "b")})
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("add with the wrong key: %v, want ErrUnauthorized", err)
	}
	_, err = tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1, EntryID: 2, MasterKey: testKey, Data: entry(1, 3, 0, "c")})
	if !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("add whose head names another entry: %v, want ErrBadRequest", err)
	}
}

func TestFenceRejectsOldWriter(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	if err := tb.add(3, 0, -1, "x", 0); err != nil {
		t.Fatal(err)
	}
	if err := tb.fence(3); err != nil {
		t.Fatalf("fence: %v", err)
	}
	if err := tb.add(3, 1, 0, "y", 0); !errors.Is(err, client.ErrFenced) {
		t.Fatalf("add after fence: %v, want ErrFenced", err)
	}
	if err := tb.add(3, 1, 0, "y", bkproto.FlagRecoveryAdd); err != nil {
		t.Fatalf("recovery add after fence: %v", err)
	}
	// A fencing read of EntryLAC answers with the LAC and the last entry.
	resp, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpRead, Flags: bkproto.FlagFence, LedgerID: 3, EntryID: bkproto.EntryLAC, MasterKey: testKey})
	if err != nil || resp.LAC != 0 || string(resp.Data[bkproto.EntryHeadLen:]) != "y" {
		t.Fatalf("fence read of the LAC: %+v %v", resp, err)
	}
	// Fencing a ledger never seen here creates it fenced: its old writer
	// cannot start writing here after recovery.
	if err := tb.fence(99); err != nil {
		t.Fatalf("fence unknown ledger: %v", err)
	}
	if err := tb.add(99, 0, -1, "late", 0); !errors.Is(err, client.ErrFenced) {
		t.Fatalf("add to a ledger fenced before its first entry: %v, want ErrFenced", err)
	}
}

// TestAddRacingFence is BookKeeper #4701: an add acknowledged while a fence
// was in progress must be visible to the recovery reads after the fence.
func TestAddRacingFence(t *testing.T) {
	for round := range 10 {
		// Slow stores widen the window between an add's fence check and its
		// store, where the bug lived.
		slow := func(entrylog.Checkpointer) (entrylog.Storage, error) {
			return &slowStorage{Storage: entrylog.NewMemory(nil), rng: rand.New(rand.NewPCG(uint64(round), 1))}, nil
		}
		tb := startTestBookie(t, nil, slow, ServerOptions{AddWorkers: 4})
		const ledger, n = 11, 400
		var mu sync.Mutex
		var acked []int64
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			tb.cl.Send(&bkproto.Request{Op: bkproto.OpAdd, LedgerID: ledger, EntryID: int64(i), MasterKey: testKey,
				Data: entry(ledger, int64(i), -1, payloadOf(i))}, func(_ *bkproto.Response, err error) {
				if err == nil {
					mu.Lock()
					acked = append(acked, int64(i))
					mu.Unlock()
				} else if !errors.Is(err, client.ErrFenced) {
					t.Errorf("add %d: %v", i, err)
				}
				wg.Done()
			})
			if i == n/2 {
				go func() {
					if err := tb.fence(ledger); err != nil {
						t.Errorf("fence: %v", err)
					}
				}()
			}
		}
		// Recovery reads start after the fence is answered.
		time.Sleep(time.Millisecond)
		if err := tb.fence(ledger); err != nil {
			t.Fatal(err)
		}
		visible := map[int64]bool{}
		for i := range n {
			if _, err := tb.read(ledger, int64(i)); err == nil {
				visible[int64(i)] = true
			}
		}
		wg.Wait()
		for _, e := range acked {
			if !visible[e] {
				t.Fatalf("round %d: entry %d was acknowledged but recovery after the fence did not see it", round, e)
			}
		}
		tb.stop()
	}
}

func TestJournalReplayRestoresState(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	for i := range 10 {
		if err := tb.add(5, int64(i), int64(i-1), payloadOf(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpWriteLAC, LedgerID: 5, MasterKey: testKey, LAC: 9, Data: []byte("lac-bytes")}); err != nil {
		t.Fatalf("write lac: %v", err)
	}
	if err := tb.fence(5); err != nil {
		t.Fatal(err)
	}
	// Restart on the same files with an empty storage: the journal (never
	// checkpointed by this storage) brings everything back.
	tb.stop()
	tb.start()
	for i := range 10 {
		resp, err := tb.read(5, int64(i))
		mustPayload(t, resp, err, payloadOf(i))
	}
	if err := tb.add(5, 10, 9, "z", 0); !errors.Is(err, client.ErrFenced) {
		t.Fatalf("add after restart: %v, want ErrFenced (fence must survive a restart)", err)
	}
	if err := tb.add(5, 10, 9, "z", 0); err == nil {
		t.Fatal("unexpected success")
	}
	resp, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpReadLAC, LedgerID: 5})
	if err != nil {
		t.Fatalf("read lac: %v", err)
	}
	if resp.LAC != 9 || string(resp.ExplicitLAC) != "lac-bytes" || string(resp.Data[bkproto.EntryHeadLen:]) != payloadOf(9) {
		t.Fatalf("read lac after restart: lac %d explicit %q last %q", resp.LAC, resp.ExplicitLAC, resp.Data)
	}
	if _, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpAdd, LedgerID: 5, EntryID: 10, MasterKey: []byte("wrong"), Data: entry(5, 10, 9, "z")}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("master key after restart: %v, want ErrUnauthorized", err)
	}
}

func TestLongPoll(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	if err := tb.add(2, 0, -1, "e0", 0); err != nil {
		t.Fatal(err)
	}
	// LAC is -1: a poll for entry 0 waits until an add confirms it.
	type result struct {
		resp *bkproto.Response
		err  error
	}
	ch := make(chan result, 1)
	tb.cl.Send(&bkproto.Request{Op: bkproto.OpRead, Flags: bkproto.FlagLongPoll, LedgerID: 2, EntryID: 0, PreviousLAC: -1, TimeoutMillis: 10000},
		func(r *bkproto.Response, err error) { ch <- result{r, err} })
	select {
	case r := <-ch:
		t.Fatalf("long poll answered before the LAC moved: %+v %v", r.resp, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := tb.add(2, 1, 0, "e1", 0); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || r.resp.LAC != 0 || string(r.resp.Data[bkproto.EntryHeadLen:]) != "e0" {
		t.Fatalf("long poll: %+v %v", r.resp, r.err)
	}
	// A poll that times out answers with the unchanged LAC and no entry.
	start := time.Now()
	resp, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpRead, Flags: bkproto.FlagLongPoll, LedgerID: 2, EntryID: 1, PreviousLAC: 0, TimeoutMillis: 100})
	if err != nil || resp.LAC != 0 || len(resp.Data) != 0 || time.Since(start) < 90*time.Millisecond {
		t.Fatalf("timed-out poll: %+v %v after %v", resp, err, time.Since(start))
	}
}

func TestDeferredSyncAndForce(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	for i := range 20 {
		if err := tb.add(4, int64(i), int64(i-1), payloadOf(i), bkproto.FlagDeferredSync); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpForceLedger, LedgerID: 4, MasterKey: testKey}); err != nil {
		t.Fatalf("force: %v", err)
	}
	// Everything before the force is durable: a crash keeps it.
	crashed := tb.fs.CrashClone(engineCrashOpts())
	tb.stop()
	tb.fs = crashed
	tb.start()
	for i := range 20 {
		resp, err := tb.read(4, int64(i))
		mustPayload(t, resp, err, payloadOf(i))
	}
	if _, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpForceLedger, LedgerID: 77, MasterKey: testKey}); !errors.Is(err, client.ErrNoLedger) {
		t.Fatalf("force of unknown ledger: %v", err)
	}
}

func TestReadOnlyMode(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	if err := tb.add(6, 0, -1, "a", 0); err != nil {
		t.Fatal(err)
	}
	tb.setDiskUsed(0.97)
	waitFor(t, "read-only", func() bool { ro, _ := tb.core.ReadOnly(); return ro })
	if err := tb.add(6, 1, 0, "b", 0); !errors.Is(err, client.ErrReadOnly) {
		t.Fatalf("add while read-only: %v", err)
	}
	if err := tb.add(6, 1, 0, "b", bkproto.FlagRecoveryAdd); err != nil {
		t.Fatalf("recovery add while read-only: %v", err)
	}
	resp, err := tb.read(6, 0)
	mustPayload(t, resp, err, "a")
	info, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpInfo})
	if err != nil || info.InfoFlags&bkproto.InfoReadOnly == 0 || info.TotalBytes != 1<<40 {
		t.Fatalf("info: %+v %v", info, err)
	}
	// Between the marks it stays read-only; below the low-water mark it is writable.
	tb.setDiskUsed(0.92)
	time.Sleep(50 * time.Millisecond)
	if ro, _ := tb.core.ReadOnly(); !ro {
		t.Fatal("writable again above the low-water mark")
	}
	tb.setDiskUsed(0.5)
	waitFor(t, "writable", func() bool { ro, _ := tb.core.ReadOnly(); return !ro })
	if err := tb.add(6, 2, 1, "c", 0); err != nil {
		t.Fatalf("add after recovery of space: %v", err)
	}
}

// TestBackPressure: with a one-slot queue and many pipelined adds, the
// server stops reading instead of failing requests.
func TestBackPressure(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{AddWorkers: 1, MaxPendingAdds: 1})
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		tb.cl.Send(&bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1, EntryID: int64(i), MasterKey: testKey, Data: entry(1, int64(i), -1, payloadOf(i))},
			func(_ *bkproto.Response, err error) {
				if err != nil {
					errs <- err
				}
				wg.Done()
			})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("add failed under back-pressure: %v", err)
	}
}

// TestMalformedFrameClosesOnlyThatConnection sends garbage on one
// connection; another connection keeps working.
func TestMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	conn, err := net.Dial("tcp", tb.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bad := bkproto.AppendRequest(nil, &bkproto.Request{Op: bkproto.OpReadLAC, LedgerID: 1})
	bad[4] = 9 // unknown protocol version
	if _, err := conn.Write(bad); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 64)); err == nil {
		t.Fatalf("connection answered a malformed frame with %d bytes instead of closing", n)
	}
	if err := tb.add(1, 0, -1, "still fine", 0); err != nil {
		t.Fatalf("other connection after a malformed frame: %v", err)
	}
}

func TestClientFailsPendingOnDisconnect(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	tb.cl.Close()
	_, err := tb.cl.Do(context.Background(), &bkproto.Request{Op: bkproto.OpInfo})
	if !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("request on a closed client: %v", err)
	}
}

// slowStorage delays each AddEntry by up to a millisecond.
type slowStorage struct {
	entrylog.Storage
	mu  sync.Mutex
	rng *rand.Rand
}

func (s *slowStorage) AddEntry(ledgerID, entryID int64, data []byte) error {
	s.mu.Lock()
	d := time.Duration(s.rng.IntN(1000)) * time.Microsecond
	s.mu.Unlock()
	time.Sleep(d)
	return s.Storage.AddEntry(ledgerID, entryID, data)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
