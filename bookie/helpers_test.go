package bookie

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

var testKey = []byte("master-key")

// testBookie is a core and a server on the mem engine, plus a client.
type testBookie struct {
	t      *testing.T
	fs     *engine.MemFS
	core   *Core
	srv    *Server
	cl     *client.Client
	opts   Options
	sopts  ServerOptions
	open   OpenStorage
	diskMu sync.Mutex
	used   float64 // fraction of the fake disk in use
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// startTestBookie starts a bookie over open (default: a Memory storage
// that never checkpoints, so the journal keeps everything for replay).
func startTestBookie(t *testing.T, fs *engine.MemFS, open OpenStorage, sopts ServerOptions) *testBookie {
	t.Helper()
	if fs == nil {
		fs = engine.NewMem()
	}
	if open == nil {
		open = func(entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(nil), nil }
	}
	tb := &testBookie{t: t, fs: fs, open: open, sopts: sopts}
	tb.opts = Options{
		LedgerDirs: []string{"/ledgers"},
		DiskUsage: func(string) (uint64, uint64, error) {
			tb.diskMu.Lock()
			defer tb.diskMu.Unlock()
			return uint64((1 - tb.used) * (1 << 40)), 1 << 40, nil
		},
		DiskCheckInterval: 10 * time.Millisecond,
		Logger:            quietLogger(),
	}
	tb.start()
	t.Cleanup(tb.stop)
	return tb
}

func (tb *testBookie) start() {
	tb.t.Helper()
	core, err := OpenCore(tb.fs, []string{"/journal"}, journal.Options{Logger: quietLogger()}, tb.open, tb.opts)
	if err != nil {
		tb.t.Fatalf("open core: %v", err)
	}
	sopts := tb.sopts
	sopts.Addr = "127.0.0.1:0"
	if sopts.Logger == nil {
		sopts.Logger = quietLogger()
	}
	srv, err := Serve(core, sopts)
	if err != nil {
		core.Close()
		tb.t.Fatalf("serve: %v", err)
	}
	cl, err := client.Dial(context.Background(), srv.Addr(), client.Options{})
	if err != nil {
		tb.t.Fatalf("dial: %v", err)
	}
	tb.core, tb.srv, tb.cl = core, srv, cl
}

func (tb *testBookie) stop() {
	if tb.core == nil {
		return
	}
	tb.cl.Close()
	if err := tb.srv.Close(context.Background()); err != nil {
		tb.t.Errorf("close server: %v", err)
	}
	if err := tb.core.Close(); err != nil {
		tb.t.Errorf("close core: %v", err)
	}
	tb.core = nil
}

func (tb *testBookie) setDiskUsed(f float64) {
	tb.diskMu.Lock()
	tb.used = f
	tb.diskMu.Unlock()
}

// entry builds entry data in the ledger client's format.
func entry(ledgerID, entryID, lac int64, payload string) []byte {
	b := make([]byte, bkproto.EntryHeadLen+len(payload))
	bkproto.PutEntryHead(b, bkproto.EntryHead{LedgerID: ledgerID, EntryID: entryID, LAC: lac})
	copy(b[bkproto.EntryHeadLen:], payload)
	return b
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (tb *testBookie) add(ledgerID, entryID, lac int64, payload string, flags uint16) error {
	_, err := tb.cl.Do(ctxT(tb.t), &bkproto.Request{
		Op: bkproto.OpAdd, Flags: flags, LedgerID: ledgerID, EntryID: entryID,
		MasterKey: testKey, Data: entry(ledgerID, entryID, lac, payload),
	})
	return err
}

func (tb *testBookie) read(ledgerID, entryID int64) (*bkproto.Response, error) {
	return tb.cl.Do(ctxT(tb.t), &bkproto.Request{Op: bkproto.OpRead, LedgerID: ledgerID, EntryID: entryID})
}

func (tb *testBookie) fence(ledgerID int64) error {
	_, err := tb.cl.Do(ctxT(tb.t), &bkproto.Request{
		Op: bkproto.OpRead, Flags: bkproto.FlagFence, LedgerID: ledgerID, EntryID: 0, MasterKey: testKey,
	})
	if errors.Is(err, client.ErrNoEntry) {
		return nil
	}
	return err
}

func mustPayload(t *testing.T, resp *bkproto.Response, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if got := string(resp.Data[bkproto.EntryHeadLen:]); got != want {
		t.Fatalf("read payload %q, want %q", got, want)
	}
}

func payloadOf(i int) string { return fmt.Sprintf("payload-%06d", i) }

func engineCrashOpts() engine.CrashOptions { return engine.CrashOptions{} }
