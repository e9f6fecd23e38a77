package perfbookie

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/journal"
)

// localBookie is a bookie the tool runs in-process on real directories,
// served on loopback TCP: the load goes through the socket, the protocol
// and the server's worker queues as a remote client's would.
type localBookie struct {
	fs                    engine.FS
	journalDir, ledgerDir string
	open                  bookie.OpenStorage
	log                   *slog.Logger
	counts                *counters
	core                  *bookie.Core
	srv                   *bookie.Server
}

// startLocal starts a bookie on journalDir and ledgerDir (created if
// missing).
func startLocal(fsys engine.FS, storage StorageOpener, journalDir, ledgerDir string, log *slog.Logger) (*localBookie, error) {
	for _, d := range []string{journalDir, ledgerDir} {
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	b := &localBookie{fs: fsys, journalDir: journalDir, ledgerDir: ledgerDir, log: log, counts: &counters{},
		open: storage(fsys, []string{ledgerDir})}
	return b, b.start()
}

func (b *localBookie) start() error {
	// The journal's files go through the counting wrapper (group sizes);
	// the storage gets the plain backend.
	jfs := &countingFS{FS: b.fs, c: b.counts}
	core, err := bookie.OpenCore(jfs, []string{b.journalDir}, journal.Options{Logger: b.log}, b.open,
		bookie.Options{LedgerDirs: []string{b.ledgerDir}, Logger: b.log})
	if err != nil {
		return fmt.Errorf("start the in-process bookie: %w", err)
	}
	srv, err := bookie.Serve(core, bookie.ServerOptions{Addr: "127.0.0.1:0", Logger: b.log})
	if err != nil {
		return errors.Join(fmt.Errorf("start the in-process bookie: %w", err), core.Close())
	}
	b.core, b.srv = core, srv
	return nil
}

func (b *localBookie) addr() string { return b.srv.Addr() }

// stop closes the server, then the core (flushing storage and
// checkpointing the journal).
func (b *localBookie) stop() error {
	if b.core == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := errors.Join(b.srv.Close(ctx), b.core.Close())
	b.core, b.srv = nil, nil
	if err != nil {
		return fmt.Errorf("stop the in-process bookie: %w", err)
	}
	return nil
}

// restart stops the bookie, evicts its files from the page cache, and
// starts it again on the same directories, so the next reads find every
// cache cold. It returns why eviction failed, if it did; that does not
// fail the restart.
func (b *localBookie) restart() (dropErr error, err error) {
	if err := b.stop(); err != nil {
		return nil, err
	}
	dropErr = dropCaches(b.fs, b.journalDir, b.ledgerDir)
	return dropErr, b.start()
}

// dropCaches asks the kernel to evict every file under dirs from the page
// cache (POSIX_FADV_DONTNEED). It works on clean pages only, which these
// are once the bookie has closed (storage flushed, journal synced).
func dropCaches(fsys engine.FS, dirs ...string) error {
	var errs []error
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := fsys.Open(path)
			if err != nil {
				return err
			}
			return errors.Join(f.DropCache(), f.Close())
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeAll removes a point's directories.
func removeAll(dirs ...string) error {
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// counters are what the journal did to its files, seen from below, so the
// group size is measured without reaching into the journal.
type counters struct {
	syncs atomic.Int64 // datasyncs that covered group data
	bytes atomic.Int64 // bytes of groups written
}

// countingFS wraps the bookie's engine.FS and counts datasyncs and bytes
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

// journalHeaderEnd is the journal file's header block: writes below it
// are not groups.
const journalHeaderEnd = 4096

// countingFile counts a datasync only when group data was written since
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
		var n int
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
