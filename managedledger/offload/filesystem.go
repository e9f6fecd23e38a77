package offload

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"sync"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
)

// fsOffloader is the "filesystem" driver: one file per copy under root,
// through an engine.FS (so tests run it on the mem backend with its crash
// model, or under errorfs).
type fsOffloader struct {
	fs     engine.FS
	root   string
	limits batchLimits
	busy   keyLocks
}

func newFilesystem(cfg Config) (*fsOffloader, error) {
	root, err := parseRoot(cfg.Root)
	if err != nil {
		return nil, err
	}
	fsys := cfg.FS
	if fsys == nil {
		fsys = engine.NewStd()
	}
	return &fsOffloader{fs: fsys, root: root, limits: cfg.limits()}, nil
}

func (o *fsOffloader) Driver() string { return DriverFilesystem }

// paths returns k's directory, its copy's path and its temporary path.
func (o *fsOffloader) paths(k Key) (dir, final, tmp string) {
	dir = filepath.Join(o.root, filepath.FromSlash(k.ManagedLedger))
	final = filepath.Join(dir, k.copyFileName())
	return dir, final, final + tempSuffix
}

// Offload implements Offloader: write the temporary file, sync it, rename
// it into place, sync the directory.
func (o *fsOffloader) Offload(ctx context.Context, k Key, meta map[string]string, src Source) error {
	if err := k.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("offload %v: %w", k, err)
	}
	metaJSON, err := encodeMeta(meta)
	if err != nil {
		return fmt.Errorf("offload %v: %w", k, err)
	}
	release, err := o.busy.claim(k)
	if err != nil {
		return err
	}
	defer release()
	dir, final, tmp := o.paths(k)
	if err := o.checkAbsent(k, final); err != nil {
		return err
	}
	if err := o.makeDirs(dir); err != nil {
		return fmt.Errorf("offload %v: make directory: %w", k, err)
	}
	if err := o.writeCopy(ctx, k, tmp, metaJSON, src); err != nil {
		return withCleanup(err, o.removeIfExists(tmp))
	}
	return o.publish(k, dir, tmp, final)
}

// checkAbsent fails with ErrExists if k already has a copy. Rename would
// replace it silently, and a copy is never rewritten.
func (o *fsOffloader) checkAbsent(k Key, final string) error {
	_, err := o.fs.Stat(final)
	switch {
	case err == nil:
		return fmt.Errorf("offload %v: %w", k, ErrExists)
	case errors.Is(err, iofs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("offload %v: look for an existing copy: %w", k, err)
	}
}

// makeDirs creates dir and makes the entries of the directories it
// created durable, so that a synced copy is not lost with its directory.
func (o *fsOffloader) makeDirs(dir string) error {
	top := dir // the deepest directory that exists already
	for {
		if _, err := o.fs.Stat(top); err == nil {
			break
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
		parent := filepath.Dir(top)
		if parent == top {
			break
		}
		top = parent
	}
	if top == dir {
		return nil
	}
	if err := o.fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Sync each created directory's parent, from the deepest up to top.
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if err := o.fs.SyncDir(d); err != nil {
			return err
		}
		if d == top || filepath.Dir(d) == d {
			return nil
		}
	}
}

// writeCopy writes k's whole copy to tmp and syncs it.
func (o *fsOffloader) writeCopy(ctx context.Context, k Key, tmp string, metaJSON []byte, src Source) error {
	f, err := o.fs.Create(tmp) // truncates what a crashed attempt left
	if err != nil {
		return fmt.Errorf("offload %v: create %s: %w", k, tmp, err)
	}
	w := &copyWriter{f: f, k: k}
	err = w.writeAll(ctx, metaJSON, src, o.limits)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("offload %v: close %s: %w", k, tmp, cerr)
	}
	return err
}

// publish renames tmp to final and syncs the directory. If the sync fails
// the copy is removed again, so that an error from Offload always means no
// copy is visible (unless the cleanup failed too, which the error says).
func (o *fsOffloader) publish(k Key, dir, tmp, final string) error {
	if err := o.fs.Rename(tmp, final); err != nil {
		return withCleanup(fmt.Errorf("offload %v: publish: %w", k, err), o.removeIfExists(tmp))
	}
	if err := o.fs.SyncDir(dir); err != nil {
		return withCleanup(fmt.Errorf("offload %v: sync directory after publishing: %w", k, err), o.removeIfExists(final))
	}
	return nil
}

// removeIfExists removes name; a name already gone is no error.
func (o *fsOffloader) removeIfExists(name string) error {
	if err := o.fs.Remove(name); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	return nil
}

// withCleanup adds a failed cleanup to the error that made it necessary.
func withCleanup(err, cleanupErr error) error {
	if cleanupErr == nil {
		return err
	}
	return errors.Join(err, fmt.Errorf("offload: cleanup failed, Delete the key to retry it: %w", cleanupErr))
}

// Open implements Offloader.
func (o *fsOffloader) Open(ctx context.Context, k Key) (Reader, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("offload: open %v: %w", k, err)
	}
	_, final, _ := o.paths(k)
	f, err := o.fs.Open(final)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("offload: open %v: %w", k, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("offload: open %v: %w", k, err)
	}
	r, err := openFileReader(f, k)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return r, nil
}

// Delete implements Offloader: it removes the copy and any temporary file
// a failed or crashed Offload of the key left. Deleting a key while it is
// being offloaded is a race the caller must not start (the Offload fails or
// the copy survives): callers delete a key after its Offload returned.
func (o *fsOffloader) Delete(ctx context.Context, k Key) error {
	if err := k.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("offload: delete %v: %w", k, err)
	}
	dir, final, tmp := o.paths(k)
	removed := false
	for _, name := range []string{final, tmp} {
		err := o.fs.Remove(name)
		switch {
		case err == nil:
			removed = true
		case !errors.Is(err, iofs.ErrNotExist):
			return fmt.Errorf("offload: delete %v: %w", k, err)
		}
	}
	if !removed {
		return nil
	}
	if err := o.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("offload: delete %v: sync directory: %w", k, err)
	}
	return nil
}

// copyWriter appends a copy's records to its file and remembers their
// offsets for the index.
type copyWriter struct {
	f       engine.File
	k       Key
	off     int64    // where the next record goes
	offsets []uint64 // of the records written so far
	total   uint64   // their payload bytes
}

// writeAll writes the header, every entry of src and the index and footer,
// and syncs the file.
func (w *copyWriter) writeAll(ctx context.Context, metaJSON []byte, src Source, lim batchLimits) error {
	if err := w.write([][]byte{encodeHeader(w.k.LedgerID, metaJSON)}); err != nil {
		return err
	}
	if err := copyEntries(ctx, w.k, src, lim, w.writeBatch); err != nil {
		return err
	}
	trailer := encodeTrailer(w.k.LedgerID, w.offsets, uint64(w.off), w.total)
	if _, err := w.f.WriteAtSync([][]byte{trailer}, w.off); err != nil {
		return fmt.Errorf("offload %v: write index and sync: %w", w.k, err)
	}
	return nil
}

// writeBatch writes a batch's records with one vectored write; payloads go
// to the file from the caller's buffers, uncopied.
func (w *copyWriter) writeBatch(ents []ledger.Entry) error {
	headers := make([]byte, recordHeaderSize*len(ents))
	bufs := make([][]byte, 0, 2*len(ents))
	pos := uint64(w.off)
	for i, e := range ents {
		h := headers[i*recordHeaderSize : (i+1)*recordHeaderSize]
		putRecordHeader(h, e.EntryID, e.Payload)
		bufs = append(bufs, h)
		if len(e.Payload) > 0 {
			bufs = append(bufs, e.Payload)
		}
		w.offsets = append(w.offsets, pos)
		pos += recordHeaderSize + uint64(len(e.Payload))
		w.total += uint64(len(e.Payload))
	}
	return w.write(bufs)
}

func (w *copyWriter) write(bufs [][]byte) error {
	n, err := w.f.WriteAt(bufs, w.off)
	if err != nil {
		return fmt.Errorf("offload %v: write at %d: %w", w.k, w.off, err)
	}
	w.off += int64(n)
	return nil
}

// keyLocks keeps two Offloads of one key in one offloader from writing the
// same temporary file.
type keyLocks struct {
	mu   sync.Mutex
	busy map[Key]bool // guarded by mu
}

// claim marks k busy until release is called; ErrBusy if it is already.
func (l *keyLocks) claim(k Key) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[k] {
		return nil, fmt.Errorf("offload %v: %w", k, ErrBusy)
	}
	if l.busy == nil {
		l.busy = map[Key]bool{}
	}
	l.busy[k] = true
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.busy, k)
	}, nil
}
