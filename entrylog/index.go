package entrylog

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/pebblelog"
)

// indexFormatMajor pins Pebble's on-disk format, so a Pebble upgrade never
// silently ratchets the index to a format an older build cannot open.
const indexFormatMajor = pebble.FormatTableFormatV6

// index is a directory's Pebble database: entry locations, ledger state,
// tombstones and per-log usage (see the package doc for the keys).
type index struct {
	db   *pebble.DB
	lock *pebble.Lock
	dir  string
}

type indexOptions struct {
	fs           vfs.FS
	cacheSize    int64
	memTableSize int64
	log          *slog.Logger
}

// openIndex opens (creating if needed) the index in dir, which one process
// at a time may hold.
func openIndex(dir string, o indexOptions) (*index, error) {
	if err := mkdirDurable(o.fs, dir); err != nil {
		return nil, fmt.Errorf("entry index %s: create directory: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, o.fs)
	if err != nil {
		return nil, fmt.Errorf("entry index %s: lock (is the directory open elsewhere?): %w", dir, err)
	}
	db, err := openPebble(dir, &pebble.Options{
		FS:                 o.fs,
		Lock:               lock,
		Logger:             pebblelog.Logger{Log: o.log, Component: "entrylog/index", Dir: dir},
		CacheSize:          o.cacheSize,
		MemTableSize:       uint64(o.memTableSize),
		FormatMajorVersion: indexFormatMajor,
	})
	if err != nil {
		return nil, errors.Join(indexError(dir, "open", err), lock.Close())
	}
	x := &index{db: db, lock: lock, dir: dir}
	if err := x.checkFormat(); err != nil {
		return nil, errors.Join(err, x.close())
	}
	return x, nil
}

// mkdirDurable creates dir and makes its entry (and its parent's) durable,
// as Pebble syncs only the directory it is given.
func mkdirDurable(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(filepath.Dir(dir)), filepath.Dir(dir)} {
		f, err := fs.OpenDir(d)
		if err != nil {
			return err
		}
		err = errors.Join(f.Sync(), f.Close())
		if err != nil {
			return err
		}
	}
	return nil
}

func openPebble(dir string, o *pebble.Options) (db *pebble.DB, err error) {
	defer pebblelog.Recover(&err)
	return pebble.Open(dir, o)
}

// checkFormat accepts format version 1 and stamps a new, empty index. An
// index with keys but no format key is damaged, not new.
func (x *index) checkFormat() error {
	v, found, err := x.get([]byte(formatKey))
	if err != nil {
		return err
	}
	if found {
		if len(v) != formatValueLen || v[0] != FormatVersion {
			return corruptKey(x.dir, []byte(formatKey), "format value %x, this build reads version %d", v, FormatVersion)
		}
		return nil
	}
	it, err := x.db.NewIter(nil)
	if err != nil {
		return indexError(x.dir, "scan", err)
	}
	if it.First() {
		k := append([]byte(nil), it.Key()...)
		it.Close()
		return corruptKey(x.dir, k, "index has keys but no format key")
	}
	if err := it.Close(); err != nil {
		return indexError(x.dir, "scan", err)
	}
	b := x.db.NewBatch()
	_ = b.Set([]byte(formatKey), []byte{FormatVersion}, nil)
	return x.commit(b, true)
}

// get returns a copy of key's value.
func (x *index) get(key []byte) ([]byte, bool, error) {
	v, closer, err := x.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, indexError(x.dir, "get", err)
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

// commit applies b (synced when asked) and closes it. Pebble reports a
// failed WAL write through Logger.Fatalf, which pebblelog.Logger turns into a
// panic that pebblelog.Recover turns back into an error here.
func (x *index) commit(b *pebble.Batch, sync bool) error {
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
		if b.Empty() {
			// Pebble skips an empty batch, sync included; callers rely on
			// a synced commit covering every earlier unsynced one.
			_ = b.LogData(nil, nil)
		}
	}
	if err := commitBatch(b, opts); err != nil {
		// b is not closed: after a failed commit Pebble may still hold it.
		return indexError(x.dir, "commit", err)
	}
	return b.Close()
}

func commitBatch(b *pebble.Batch, o *pebble.WriteOptions) (err error) {
	defer pebblelog.Recover(&err)
	return b.Commit(o)
}

// syncWAL makes every earlier commit durable.
func (x *index) syncWAL() (err error) {
	defer pebblelog.Recover(&err)
	if err := x.db.LogData(nil, pebble.Sync); err != nil {
		return indexError(x.dir, "sync", err)
	}
	return nil
}

// iter opens an iterator over [lower, upper).
func (x *index) iter(lower, upper []byte) (*pebble.Iterator, error) {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, indexError(x.dir, "iterate", err)
	}
	return it, nil
}

// scan calls fn for each key in [lower, upper) until fn returns false or
// an error.
func (x *index) scan(lower, upper []byte, fn func(k, v []byte) (bool, error)) (err error) {
	it, err := x.iter(lower, upper)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = indexError(x.dir, "iterate", cerr)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return indexError(x.dir, "read", err)
		}
		more, err := fn(it.Key(), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (x *index) close() error {
	err := closePebble(x.db)
	if err != nil {
		err = indexError(x.dir, "close", err)
	}
	if errors.As(err, new(pebblelog.Fatal)) {
		return err // Pebble may still touch the files: keep the lock
	}
	return errors.Join(err, x.lock.Close())
}

func closePebble(db *pebble.DB) (err error) {
	defer pebblelog.Recover(&err)
	return db.Close()
}

// corruptKey reports a damaged index key or value.
func corruptKey(dir string, key []byte, format string, args ...any) error {
	return fmt.Errorf("entry index %s: key %x: %w", dir, key, engine.CorruptionErrorf(format, args...))
}

// indexError wraps a Pebble failure; corruption Pebble found in its own
// files also matches engine.ErrCorruption.
func indexError(dir, op string, err error) error {
	if errors.Is(err, pebble.ErrCorruption) {
		return fmt.Errorf("entry index %s: %s: %w (%w)", dir, op, err, engine.ErrCorruption)
	}
	return fmt.Errorf("entry index %s: %s: %w", dir, op, err)
}
