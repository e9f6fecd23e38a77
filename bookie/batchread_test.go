package bookie

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

func (tb *testBookie) batchRead(ledgerID, first int64, maxCount, maxBytes uint32) (*bkproto.Response, error) {
	return tb.cl.Do(ctxT(tb.t), &bkproto.Request{Op: bkproto.OpBatchRead, LedgerID: ledgerID, EntryID: first, MaxCount: maxCount, MaxBytes: maxBytes})
}

// mustBatch checks an answer holds exactly entries first..last of ledgerID.
func mustBatch(t *testing.T, resp *bkproto.Response, err error, ledgerID, first, last int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("batch read from %d: %v", first, err)
	}
	if got, want := len(resp.Entries), int(last-first+1); got != want {
		t.Fatalf("batch read from %d: %d entries, want %d (%d..%d)", first, got, want, first, last)
	}
	for i, data := range resp.Entries {
		e := first + int64(i)
		h, err := bkproto.ParseEntryHead(data)
		if err != nil || h.LedgerID != ledgerID || h.EntryID != e || string(data[bkproto.EntryHeadLen:]) != payloadOf(int(e)) {
			t.Fatalf("batch read from %d: answer %d is %q (%+v, %v), want entry %d", first, i, data, h, err, e)
		}
	}
}

// entryLogStorage opens the real ledger storage on the bookie's file
// system, its index on one in-memory file system kept across restarts.
func entryLogStorage(fs *engine.MemFS) OpenStorage {
	index := vfs.NewMem()
	return func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		return entrylog.Open(fs, []string{"/ledgers"}, entrylog.Options{Checkpointer: cp, Logger: quietLogger(),
			LogSizeLimit: 1 << 20, IndexFS: index})
	}
}

// TestBatchRead serves batch reads from the in-memory storage and from
// the entry logs after a restart (so reads go to the log files): limits,
// a missing first entry, a gap, an unknown ledger, bad requests.
func TestBatchRead(t *testing.T) {
	for _, real := range []bool{false, true} {
		t.Run(fmt.Sprintf("entrylog=%v", real), func(t *testing.T) {
			fs := engine.NewMem()
			var open OpenStorage
			if real {
				open = entryLogStorage(fs)
			}
			tb := startTestBookie(t, fs, open, ServerOptions{})
			for i := range 50 {
				if err := tb.add(7, int64(i), int64(i-1), payloadOf(i), 0); err != nil {
					t.Fatal(err)
				}
			}
			// Ledger 9 has a gap at 5 (a write quorum that lost an add).
			for _, i := range []int{0, 1, 2, 3, 4, 6, 7, 8} {
				if err := tb.add(9, int64(i), -1, payloadOf(i), 0); err != nil {
					t.Fatal(err)
				}
			}
			if real {
				tb.stop()
				tb.start()
			}
			checkBatchReads(t, tb)
		})
	}
}

func checkBatchReads(t *testing.T, tb *testBookie) {
	resp, err := tb.batchRead(7, 0, 10, 1<<20)
	mustBatch(t, resp, err, 7, 0, 9)
	if resp.LAC != 48 {
		t.Fatalf("batch read LAC %d, want 48", resp.LAC)
	}
	resp, err = tb.batchRead(7, 45, 100, 1<<20) // stops at the last entry
	mustBatch(t, resp, err, 7, 45, 49)
	per := uint32(4 + bkproto.EntryHeadLen + len(payloadOf(0)))
	resp, err = tb.batchRead(7, 3, 100, 3*per) // exactly three fit
	mustBatch(t, resp, err, 7, 3, 5)
	resp, err = tb.batchRead(7, 3, 100, 3*per-1)
	mustBatch(t, resp, err, 7, 3, 4)
	resp, err = tb.batchRead(7, 3, 100, 1) // the first one always comes
	mustBatch(t, resp, err, 7, 3, 3)
	resp, err = tb.batchRead(7, 0, 1<<31, 1<<31) // the bookie's own limits
	mustBatch(t, resp, err, 7, 0, 49)
	if _, err := tb.batchRead(7, 50, 10, 1<<20); !errors.Is(err, client.ErrNoEntry) {
		t.Fatalf("batch read past the end: %v, want ErrNoEntry", err)
	}
	if _, err := tb.batchRead(8, 0, 10, 1<<20); !errors.Is(err, client.ErrNoLedger) {
		t.Fatalf("batch read of an unknown ledger: %v, want ErrNoLedger", err)
	}
	resp, err = tb.batchRead(9, 1, 100, 1<<20) // stops at the gap
	mustBatch(t, resp, err, 9, 1, 4)
	if _, err := tb.batchRead(9, 5, 100, 1<<20); !errors.Is(err, client.ErrNoEntry) {
		t.Fatalf("batch read from the gap: %v, want ErrNoEntry", err)
	}
	resp, err = tb.batchRead(9, 6, 100, 1<<20)
	mustBatch(t, resp, err, 9, 6, 8)
	bad := []*bkproto.Request{
		{Op: bkproto.OpBatchRead, LedgerID: 7, EntryID: 0, MaxCount: 0, MaxBytes: 1 << 20},
		{Op: bkproto.OpBatchRead, LedgerID: 7, EntryID: bkproto.EntryLAC, MaxCount: 5, MaxBytes: 1 << 20},
		{Op: bkproto.OpBatchRead, Flags: bkproto.FlagFence, LedgerID: 7, MasterKey: testKey, MaxCount: 5, MaxBytes: 1 << 20},
	}
	for _, r := range bad {
		if _, err := tb.cl.Do(ctxT(t), r); !errors.Is(err, client.ErrBadRequest) {
			t.Fatalf("batch read %+v: %v, want ErrBadRequest", r, err)
		}
	}
}

// endlessStorage holds every entry of ledger 1 (a small one each).
type endlessStorage struct{ entrylog.Storage }

func (s endlessStorage) ReadEntry(l, e int64) ([]byte, error) {
	if l == 1 {
		return entry(1, e, e-1, payloadOf(int(e))), nil
	}
	return s.Storage.ReadEntry(l, e)
}

// TestBatchReadLimits: an answer never holds more than the bookie's
// limits, whatever the client asks (it asks again for the rest).
func TestBatchReadLimits(t *testing.T) {
	open := func(entrylog.Checkpointer) (entrylog.Storage, error) {
		return endlessStorage{entrylog.NewMemory(nil)}, nil
	}
	tb := startTestBookie(t, nil, open, ServerOptions{})
	resp, err := tb.batchRead(1, 10, 1<<31, 1<<31)
	mustBatch(t, resp, err, 1, 10, 10+maxBatchEntries-1)
	big := string(make([]byte, 1<<20))
	for i := range 6 {
		if err := tb.add(4, int64(i), int64(i-1), big, 0); err != nil {
			t.Fatal(err)
		}
	}
	resp, err = tb.batchRead(4, 0, 100, 1<<31)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Entries); n != 3 { // 4 MiB holds three 1 MiB entries with their heads, not four
		t.Fatalf("batch read of 1 MiB entries asking for 2 GiB: %d entries, want 3", n)
	}
}

// corruptStorage reports corruption for one entry.
type corruptStorage struct {
	entrylog.Storage
	ledgerID, entryID int64
}

func (s *corruptStorage) ReadEntry(l, e int64) ([]byte, error) {
	if l == s.ledgerID && e == s.entryID {
		return nil, fmt.Errorf("entry log 1 offset 4096: %w", engine.ErrCorruption)
	}
	return s.Storage.ReadEntry(l, e)
}

// TestBatchReadStopsBeforeCorruption: a corrupt entry ends an answer that
// began before it, and is reported as corrupt (never missing) when asked
// for first.
func TestBatchReadStopsBeforeCorruption(t *testing.T) {
	open := func(entrylog.Checkpointer) (entrylog.Storage, error) {
		return &corruptStorage{Storage: entrylog.NewMemory(nil), ledgerID: 3, entryID: 5}, nil
	}
	tb := startTestBookie(t, nil, open, ServerOptions{})
	for i := range 10 {
		if err := tb.add(3, int64(i), int64(i-1), payloadOf(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := tb.batchRead(3, 0, 100, 1<<20)
	mustBatch(t, resp, err, 3, 0, 4)
	if _, err := tb.batchRead(3, 5, 100, 1<<20); !errors.Is(err, client.ErrCorrupt) {
		t.Fatalf("batch read from a corrupt entry: %v, want ErrCorrupt", err)
	}
	resp, err = tb.batchRead(3, 6, 100, 1<<20)
	mustBatch(t, resp, err, 3, 6, 9)
}

func TestInfoAnnouncesBatchRead(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	info, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpInfo})
	if err != nil || info.InfoFlags&bkproto.InfoBatchRead == 0 {
		t.Fatalf("info %+v, %v: want InfoBatchRead", info, err)
	}
	// The same answer through Handle, which in-process transports call.
	got := make(chan *bkproto.Response, 1)
	tb.core.Handle(&bkproto.Request{Op: bkproto.OpInfo}, func(r *bkproto.Response) { got <- r })
	if r := <-got; r.Status != bkproto.StatusOK || r.InfoFlags&bkproto.InfoBatchRead == 0 {
		t.Fatalf("info through Handle: %+v", r)
	}
}

// TestUnknownOpAnswered: an op of a later build gets "bad request" and the
// connection stays usable, so a newer client can fall back.
func TestUnknownOpAnswered(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	conn, err := net.Dial("tcp", tb.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	later := bkproto.AppendRequest(nil, &bkproto.Request{Op: bkproto.OpReadLAC, RequestID: 1, LedgerID: 1, EntryID: 2})
	later[5] = 200 // an op this build does not know
	later = append(later, "a body it cannot parse"...)
	later[3] += byte(len("a body it cannot parse"))
	info := bkproto.AppendRequest(nil, &bkproto.Request{Op: bkproto.OpInfo, RequestID: 2})
	if _, err := conn.Write(append(later, info...)); err != nil {
		t.Fatal(err)
	}
	answers := map[uint64]bkproto.Response{}
	for range 2 {
		r := readResponseHeader(t, conn)
		answers[r.RequestID] = r
	}
	if r := answers[1]; r.Op != 200 || r.Status != bkproto.StatusBadRequest || r.LedgerID != 1 || r.EntryID != 2 {
		t.Fatalf("answer to an unknown op: %+v", r)
	}
	if r := answers[2]; r.Op != bkproto.OpInfo || r.Status != bkproto.StatusOK {
		t.Fatalf("info after an unknown op: %+v", r)
	}
}

// readResponseHeader reads one response frame and returns its header
// fields (the body is skipped: this client may not know the op).
func readResponseHeader(t *testing.T, conn net.Conn) bkproto.Response {
	t.Helper()
	frame := make([]byte, 4)
	if _, err := io.ReadFull(conn, frame); err != nil {
		t.Fatalf("read answer: %v", err)
	}
	size := int(frame[0])<<24 | int(frame[1])<<16 | int(frame[2])<<8 | int(frame[3])
	frame = append(frame, make([]byte, size)...)
	if _, err := io.ReadFull(conn, frame[4:]); err != nil {
		t.Fatalf("read answer: %v", err)
	}
	var r bkproto.Response
	if err := bkproto.DecodeResponse(frame, &r); err != nil && !errors.Is(err, bkproto.ErrUnknownOp) {
		t.Fatalf("decode answer: %v", err)
	}
	return r
}
