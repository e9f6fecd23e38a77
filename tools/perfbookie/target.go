package perfbookie

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// localBookie is the in-process bookie a point runs against, with the
// directories it removes afterwards.
type localBookie struct {
	*perfkit.Bookie
}

// startLocal starts a bookie on journalDir and ledgerDir (created if
// missing).
func startLocal(fsys engine.FS, storage StorageOpener, journalDir, ledgerDir string, log *slog.Logger) (*localBookie, error) {
	b, err := perfkit.NewBookie(fsys, storage, journalDir, ledgerDir, &perfkit.Counters{}, log)
	if err != nil {
		return nil, err
	}
	l := &localBookie{Bookie: b}
	return l, l.start()
}

func (b *localBookie) start() error {
	if err := b.Start(); err != nil {
		return fmt.Errorf("start the in-process bookie: %w", err)
	}
	return nil
}

func (b *localBookie) addr() string { return b.Addr() }

// stop closes the server, then the core (flushing storage and
// checkpointing the journal).
func (b *localBookie) stop() error {
	if err := b.Stop(); err != nil {
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
	dropErr = dropCaches(b.FS, b.JournalDir, b.LedgerDir)
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
