package perfledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/metadata"
)

// cluster is what one point writes to: bookies started for it with their
// metadata server, or a running cluster's store.
type cluster struct {
	meta    *metadata.MemoryServer // nil for a running cluster
	remote  metadata.Store         // the running cluster's store (not ours to close)
	bookies []*localBookie
	counts  *counters
	clients []metadata.Store // sessions handed to ledger clients, closed with the cluster
	dir     string           // the point's directory, removed with the cluster
}

// startCluster starts n bookies under dir, each with its own io backend
// (as separate processes would have), registered in a fresh in-memory
// metadata store.
func startCluster(n int, dir, backend string, storage StorageOpener, log *slog.Logger) (*cluster, error) {
	c := &cluster{meta: metadata.NewMemoryServer(), counts: &counters{}, dir: dir}
	for i := range n {
		b, err := startBookie(c, i, backend, storage, log)
		if err != nil {
			return nil, errors.Join(err, c.close())
		}
		c.bookies = append(c.bookies, b)
	}
	return c, nil
}

// session returns a metadata session for a ledger client.
func (c *cluster) session() metadata.Store {
	if c.remote != nil {
		return c.remote
	}
	s := c.meta.NewSession()
	c.clients = append(c.clients, s)
	return s
}

// close stops the bookies and removes the point's directory. Ledger
// clients must be closed first.
func (c *cluster) close() error {
	var errs []error
	for _, s := range c.clients {
		errs = append(errs, s.Close())
	}
	for _, b := range c.bookies {
		errs = append(errs, b.stop())
	}
	if c.dir != "" {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	c.clients, c.bookies = nil, nil
	return errors.Join(errs...)
}

// localBookie is a bookie in this process on real directories, served on
// loopback TCP and registered under its own metadata session: the load
// goes through the socket, the protocol and the server's worker queues as
// a remote client's would.
type localBookie struct {
	id    string
	fs    engine.FS
	core  *bookie.Core
	srv   *bookie.Server
	store metadata.Store // the registration's session: closing it unregisters
}

func startBookie(c *cluster, i int, backend string, storage StorageOpener, log *slog.Logger) (*localBookie, error) {
	id := fmt.Sprintf("perf-bookie-%d", i)
	journalDir := filepath.Join(c.dir, id, "journal")
	ledgerDir := filepath.Join(c.dir, id, "ledgers")
	fsys, err := engine.New(engine.Options{Backend: backend, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	b := &localBookie{id: id, fs: fsys}
	if err := b.start(c, journalDir, ledgerDir, storage, log); err != nil {
		return nil, errors.Join(fmt.Errorf("start bookie %s: %w", id, err), b.stop())
	}
	return b, nil
}

func (b *localBookie) start(c *cluster, journalDir, ledgerDir string, storage StorageOpener, log *slog.Logger) error {
	for _, d := range []string{journalDir, ledgerDir} {
		if err := b.fs.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// The journal's files go through the counting wrapper; the storage
	// gets the plain backend.
	jfs := &countingFS{FS: b.fs, c: c.counts}
	core, err := bookie.OpenCore(jfs, []string{journalDir}, journal.Options{Logger: log}, storage(b.fs, []string{ledgerDir}),
		bookie.Options{LedgerDirs: []string{ledgerDir}, Logger: log})
	if err != nil {
		return err
	}
	b.core = core
	if b.srv, err = bookie.Serve(core, bookie.ServerOptions{Addr: "127.0.0.1:0", Logger: log}); err != nil {
		return err
	}
	b.store = c.meta.NewSession()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = bookie.Register(ctx, b.store, bookie.Registration{BookieID: b.id, Address: b.srv.Addr()}, log)
	return err
}

// stop unregisters the bookie, closes its server, then its core (flushing
// storage and checkpointing the journal), then its io backend.
func (b *localBookie) stop() error {
	var errs []error
	if b.store != nil {
		errs = append(errs, b.store.Close())
	}
	if b.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		errs = append(errs, b.srv.Close(ctx))
		cancel()
	}
	if b.core != nil {
		errs = append(errs, b.core.Close())
	}
	errs = append(errs, b.fs.Close())
	b.store, b.srv, b.core = nil, nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop bookie %s: %w", b.id, err)
	}
	return nil
}

// counters are what the bookies' journals did to their files, seen from
// below, so the bytes each entry cost on disk and the group sizes are
// measured without reaching into the journal.
type counters struct {
	syncs atomic.Int64 // datasyncs that covered journal data
	bytes atomic.Int64 // bytes of journal data written (headers, records, padding)
}

// journalHeaderEnd is the journal file's header block: writes below it
// are not groups.
const journalHeaderEnd = 4096

// countingFS wraps a bookie's engine.FS and counts datasyncs and bytes
// written for journal files only.
type countingFS struct {
	engine.FS
	c *counters
}

func (c *countingFS) Create(name string) (engine.File, error) { return c.wrap(c.FS.Create(name)) }
func (c *countingFS) Open(name string) (engine.File, error)   { return c.wrap(c.FS.Open(name)) }
func (c *countingFS) OpenReadWrite(name string) (engine.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name))
}

// Unwrap lets engine helpers (RegisterBuffers) reach the real backend.
func (c *countingFS) Unwrap() engine.FS { return c.FS }

func (c *countingFS) wrap(f engine.File, err error) (engine.File, error) {
	if err != nil || !strings.HasSuffix(f.Name(), ".journal") {
		return f, err
	}
	return &countingFile{File: f, c: c.c}, nil
}

// countingFile counts a datasync only when journal data was written since
// the previous one, so header and closing syncs do not shrink the group.
type countingFile struct {
	engine.File
	c     *counters
	dirty atomic.Bool
}

func (f *countingFile) WriteAt(bufs [][]byte, off int64) (int, error) {
	n, err := f.File.WriteAt(bufs, off)
	f.wrote(n, off)
	return n, err
}

func (f *countingFile) WriteAtSync(bufs [][]byte, off int64) (int, error) {
	n, err := f.File.WriteAtSync(bufs, off)
	f.wrote(n, off)
	if err == nil && f.dirty.Swap(false) {
		f.c.syncs.Add(1)
	}
	return n, err
}

func (f *countingFile) Append(bufs [][]byte) (int64, error) {
	off, err := f.File.Append(bufs)
	if err == nil {
		n := 0
		for _, b := range bufs {
			n += len(b)
		}
		f.wrote(n, off)
	}
	return off, err
}

func (f *countingFile) Datasync() error {
	// Cleared before the sync: a write landing during it may not be
	// covered, so it must make the next sync count.
	was := f.dirty.Swap(false)
	err := f.File.Datasync()
	if err == nil && was {
		f.c.syncs.Add(1)
	}
	return err
}

func (f *countingFile) wrote(n int, off int64) {
	if off >= journalHeaderEnd && n > 0 {
		f.c.bytes.Add(int64(n))
		f.dirty.Store(true)
	}
}
