package perfkit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/journal"
)

// StorageOpener builds the ledger storage opener of an in-process bookie
// whose ledger directories are dirs. It is called once per bookie a tool
// starts; the OpenStorage it returns opens that bookie's storage at its
// first start and again at each restart. The command passes the real
// storage; tests pass an in-memory one.
type StorageOpener func(fs engine.FS, dirs []string) bookie.OpenStorage

// Bookie is a bookie in this process on real directories, served on
// loopback TCP: the load goes through the socket, the protocol and the
// server's worker queues as a remote client's would. Its journal's files
// are counted into Counts.
type Bookie struct {
	FS                    engine.FS
	JournalDir, LedgerDir string
	Counts                *Counters
	open                  bookie.OpenStorage
	log                   *slog.Logger
	core                  *bookie.Core
	srv                   *bookie.Server
}

// NewBookie creates journalDir and ledgerDir on fsys if missing and
// returns a bookie on them, not yet started.
func NewBookie(fsys engine.FS, storage StorageOpener, journalDir, ledgerDir string, counts *Counters, log *slog.Logger) (*Bookie, error) {
	for _, d := range []string{journalDir, ledgerDir} {
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return &Bookie{FS: fsys, JournalDir: journalDir, LedgerDir: ledgerDir, Counts: counts, log: log,
		open: storage(fsys, []string{ledgerDir})}, nil
}

// Start opens the bookie's core and serves it on a loopback port. Errors
// are returned as they came; callers say which bookie failed.
func (b *Bookie) Start() error {
	// The journal's files go through the counting wrapper (group sizes);
	// the storage gets the plain backend.
	jfs := NewCountingFS(b.FS, b.Counts)
	core, err := bookie.OpenCore(jfs, []string{b.JournalDir}, journal.Options{Logger: b.log}, b.open,
		bookie.Options{LedgerDirs: []string{b.LedgerDir}, Logger: b.log})
	if err != nil {
		return err
	}
	srv, err := bookie.Serve(core, bookie.ServerOptions{Addr: "127.0.0.1:0", Logger: b.log})
	if err != nil {
		return errors.Join(err, core.Close())
	}
	b.core, b.srv = core, srv
	return nil
}

// Addr is where the started bookie listens; a restart changes it.
func (b *Bookie) Addr() string { return b.srv.Addr() }

// Stop closes the server, then the core (flushing storage and
// checkpointing the journal). It does nothing if the bookie is not
// running, so failure paths may call it unconditionally.
func (b *Bookie) Stop() error {
	if b.core == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := errors.Join(b.srv.Close(ctx), b.core.Close())
	b.core, b.srv = nil, nil
	return err
}
