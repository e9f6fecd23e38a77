// Local store format.
//
// The local: backend keeps the persistent nodes of the tree in a Pebble
// database in its directory; ephemeral nodes live only in memory, so a
// restart loses them as a ZooKeeper session expiry would. The whole tree is
// loaded into memory on open, and every later change is written through.
//
// Keys and values (every constant here is frozen for format version 1):
//
//	key                       value
//	"format"                  1 byte: the format version, 1
//	"n" + path  ("n/", "n/admin", "n/admin/clusters/c1", ...)
//	                          node record:
//
//	+--------+-------------+--------------+----------------+-----------------+-------------+
//	| format | version     | cversion     | created        | modified        | value       |
//	| 1 byte | uvarint     | uvarint      | varint unix-ms | varint unix-ms  | rest, bytes |
//	| = 1    | value edits | child edits  |                |                 | <= 1 MiB    |
//	+--------+-------------+--------------+----------------+-----------------+-------------+
//
// cversion counts child creations and deletions, ephemeral children
// included, because it names sequential nodes: persisting it keeps a
// sequential suffix from ever being handed out twice. Children lists are
// not stored; they are rebuilt from the paths. Each operation writes one
// batch, synced, before it is acknowledged or its events are delivered.
//
// Anything else found on open (a record that does not decode, a key that is
// not "format" or "n" + a valid path, a node whose parent is missing) is
// corruption: Open fails with an error matching both ErrStoreFailed and
// engine.ErrCorruption that names the key. Nothing is skipped.

package metadata

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/pebblelog"
)

// Pebble sizing: metadata is small and written one node at a time, so the
// defaults meant for a database engine would only waste memory.
const (
	localMemTableSize = 4 << 20
	localCacheSize    = 4 << 20
)

// LocalOptions tune OpenLocal.
type LocalOptions struct {
	// Logger receives Pebble's messages: informational ones at Debug,
	// errors at Error. Nil means slog.Default().
	Logger *slog.Logger

	// MinFreeBytes is the store's reserve: writes of persistent nodes are
	// refused (ErrNoSpace) while its file system has less free, capped at
	// 1% of the file system (default DefaultLocalMinFree; negative: never
	// refuse). See localspace.go.
	MinFreeBytes int64
	// DiskUsage measures the store's file system (default statfs; tests
	// fill disks here).
	DiskUsage func(dir string) (free, total uint64, err error)

	fs vfs.FS // nil: the operating system's; tests inject faults here
}

// LocalServer is the local: backend: the MemoryServer tree, persisted in a
// Pebble database in one directory, which one process at a time may open.
// Sessions and watches are in-process, with the memory backend's semantics.
type LocalServer struct {
	dir     string
	mem     *MemoryServer
	db      *pebble.DB
	lock    *pebble.Lock
	persist *pebblePersister

	closeOnce sync.Once
	closeErr  error
}

// OpenLocal opens (creating if needed) the store in dir and loads its tree.
func OpenLocal(dir string, opts LocalOptions) (*LocalServer, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	fsys := opts.fs
	if fsys == nil {
		fsys = vfs.Default
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("metadata local store %s: create directory: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, fsys)
	if err != nil {
		return nil, lockError(dir, err)
	}
	db, err := openPebble(dir, pebbleOptions(fsys, lock, pebblelog.Logger{Log: log, Component: "metadata/local", Dir: dir}))
	if err != nil {
		return nil, errors.Join(pebbleError(dir, "open", err), lock.Close())
	}
	l := &LocalServer{dir: dir, db: db, lock: lock, mem: newMemoryServer(millisNow)}
	if err := l.load(); err != nil {
		return nil, errors.Join(err, db.Close(), lock.Close())
	}
	l.mem.guard = newSpaceGuard(dir, opts)
	return l, nil
}

func pebbleOptions(fsys vfs.FS, lock *pebble.Lock, log pebble.Logger) *pebble.Options {
	return &pebble.Options{
		FS:           fsys,
		Lock:         lock,
		Logger:       log,
		MemTableSize: localMemTableSize,
		CacheSize:    localCacheSize,
	}
}

// openPebble opens the database; a fatal error Pebble meets on the way (a
// damaged MANIFEST, say) comes back as an error rather than a crash.
func openPebble(dir string, o *pebble.Options) (db *pebble.DB, err error) {
	defer pebblelog.Recover(&err)
	return pebble.Open(dir, o)
}

// lockError explains a failure to lock dir. Another holder makes fcntl fail
// with EAGAIN or EACCES (another process) or Pebble refuse with "lock held
// by current process"; failing to create the lock file is a *fs.PathError
// and is reported as it is.
func lockError(dir string, err error) error {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return fmt.Errorf("metadata local store %s: lock: %w", dir, err)
	}
	return fmt.Errorf("metadata local store %s: the directory is in use by another process "+
		"(or already open in this one); only one may open it at a time: %w", dir, err)
}

// millisNow is the local store's clock: times are stored in milliseconds,
// so they are kept in milliseconds in memory too and read back identical.
func millisNow() time.Time { return time.UnixMilli(time.Now().UnixMilli()) }

// NewSession opens a session (a Store) on the server.
func (l *LocalServer) NewSession() Store { return l.mem.NewSession() }

// ExpireSession ends a session as a ZooKeeper expiry would (see
// MemoryServer.ExpireSession); tests use it.
func (l *LocalServer) ExpireSession(s Store) { l.mem.ExpireSession(s) }

// Close closes every session (deleting their ephemeral nodes), then the
// database. Later operations on any session fail with ErrClosed.
func (l *LocalServer) Close() error {
	l.closeOnce.Do(func() {
		err := l.mem.shutdown()
		l.closeErr = errors.Join(err, l.closeDB())
	})
	return l.closeErr
}

// closeDB closes Pebble, then releases the directory. If Pebble stopped
// half-way with a fatal error, the lock stays held: its goroutines may
// still touch the files, so no one else may open them until this process
// exits.
func (l *LocalServer) closeDB() error {
	err := closePebble(l.db)
	if errors.As(err, new(pebblelog.Fatal)) {
		return fmt.Errorf("metadata local store %s: close: %w", l.dir, err)
	}
	if err != nil {
		err = fmt.Errorf("metadata local store %s: close: %w", l.dir, err)
	}
	if uerr := l.lock.Close(); uerr != nil {
		err = errors.Join(err, fmt.Errorf("metadata local store %s: unlock: %w", l.dir, uerr))
	}
	return err
}

// closePebble closes db; Pebble's Close may meet the fatal error that
// failed the store again.
func closePebble(db *pebble.DB) (err error) {
	defer pebblelog.Recover(&err)
	return db.Close()
}

// load checks the format and builds the tree from the node records. It runs
// before the server is shared, so it sets the tree without the lock.
func (l *LocalServer) load() error {
	if err := l.checkFormat(); err != nil {
		return err
	}
	nodes, err := l.readNodes()
	if err != nil {
		return err
	}
	if err := l.linkChildren(nodes); err != nil {
		return err
	}
	if len(nodes) > 0 { // else a fresh store: keep the new root
		l.mem.nodes = nodes
		for _, n := range nodes { // creation ids live as long as the process
			l.mem.creates++
			n.createID = l.mem.creates
		}
	}
	l.persist = &pebblePersister{db: l.db, dir: l.dir}
	l.mem.dirty = map[string]struct{}{}
	l.mem.persist = l.persist
	return nil
}

// checkFormat accepts format version 1 and stamps a new, empty store.
func (l *LocalServer) checkFormat() error {
	v, closer, err := l.db.Get([]byte(localFormatKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return l.initFormat()
	}
	if err != nil {
		return pebbleError(l.dir, "read format", err)
	}
	defer closer.Close()
	switch {
	case len(v) != 1:
		return corruptKey(l.dir, []byte(localFormatKey), "format value of %d bytes, want 1", len(v))
	case v[0] != localFormatVersion:
		return fmt.Errorf("metadata local store %s: format version %d, this build reads %d: open it with a newer build",
			l.dir, v[0], localFormatVersion)
	}
	return nil
}

// initFormat writes the format key into an empty store. Keys without it
// mean a damaged store, not a new one: re-stamping would hide that.
func (l *LocalServer) initFormat() error {
	iter, err := l.db.NewIter(nil)
	if err != nil {
		return pebbleError(l.dir, "scan", err)
	}
	if iter.First() {
		key := append([]byte(nil), iter.Key()...)
		iter.Close()
		return corruptKey(l.dir, key, "store has keys but no %q key", localFormatKey)
	}
	if err := iter.Close(); err != nil {
		return pebbleError(l.dir, "scan", err)
	}
	if err := syncSet(l.db, []byte(localFormatKey), []byte{localFormatVersion}); err != nil {
		return pebbleError(l.dir, "write format", err)
	}
	return nil
}

// syncSet writes one key durably; a failed WAL write is fatal to Pebble,
// and comes back as an error (see internal/pebblelog).
func syncSet(db *pebble.DB, key, value []byte) (err error) {
	defer pebblelog.Recover(&err)
	return db.Set(key, value, pebble.Sync)
}

// readNodes decodes every node record.
func (l *LocalServer) readNodes() (nodes map[string]*memNode, err error) {
	iter, err := l.db.NewIter(nil)
	if err != nil {
		return nil, pebbleError(l.dir, "scan", err)
	}
	defer func() {
		if cerr := iter.Close(); cerr != nil && err == nil {
			err = pebbleError(l.dir, "scan", cerr)
		}
	}()
	nodes = map[string]*memNode{}
	for iter.First(); iter.Valid(); iter.Next() {
		key := iter.Key()
		if string(key) == localFormatKey {
			continue
		}
		path, ok := strings.CutPrefix(string(key), nodeKeyPrefix)
		if !ok || ValidatePath(path) != nil {
			return nil, corruptKey(l.dir, key, "not %q and not %q followed by a valid path", localFormatKey, nodeKeyPrefix)
		}
		value, err := iter.ValueAndErr()
		if err != nil {
			return nil, pebbleError(l.dir, "read "+path, err)
		}
		n, err := decodeRecord(value)
		if err != nil {
			return nil, corruptKey(l.dir, key, "%v", err)
		}
		nodes[path] = n
	}
	return nodes, nil
}

// linkChildren rebuilds the children sets from the paths. Every operation
// writes a node together with its missing parents and deletes only leaves,
// so a node without a parent means a damaged store.
func (l *LocalServer) linkChildren(nodes map[string]*memNode) error {
	paths := make([]string, 0, len(nodes))
	for p := range nodes {
		paths = append(paths, p)
	}
	sort.Strings(paths) // report the same key every time
	for _, p := range paths {
		if p == "/" {
			continue
		}
		parent, ok := nodes[parentOf(p)]
		if !ok {
			return corruptKey(l.dir, nodeKey(p), "parent %s is missing", parentOf(p))
		}
		parent.children[p[strings.LastIndexByte(p, '/')+1:]] = struct{}{}
	}
	return nil
}

// pebblePersister writes an operation's changes as one synced batch.
type pebblePersister struct {
	db  *pebble.DB
	dir string
	// beforeCommit is a failpoint at the durability boundary: tests set it
	// (under the server lock) to fail the write as a dead disk would.
	beforeCommit func() error
}

func (p *pebblePersister) persist(changes []nodeChange) error {
	b := p.db.NewBatch()
	for _, c := range changes {
		var err error
		if c.node == nil {
			err = b.Delete(nodeKey(c.path), nil)
		} else {
			err = b.Set(nodeKey(c.path), encodeRecord(c.node), nil)
		}
		if err != nil {
			return fmt.Errorf("local store %s: batch %s: %w", p.dir, c.path, err)
		}
	}
	if err := p.commit(b); err != nil {
		// b is not closed: after a failed commit Pebble may still hold it.
		return fmt.Errorf("local store %s: commit: %w", p.dir, err)
	}
	return b.Close()
}

// commit writes b durably. Pebble reports a failed WAL write or sync
// through Logger.Fatalf; see internal/pebblelog for how that becomes an error.
func (p *pebblePersister) commit(b *pebble.Batch) (err error) {
	defer pebblelog.Recover(&err)
	if p.beforeCommit != nil {
		if err := p.beforeCommit(); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// corruptKey reports a damaged key: it matches ErrStoreFailed and
// engine.ErrCorruption, never ErrNotFound.
func corruptKey(dir string, key []byte, format string, args ...any) error {
	return fmt.Errorf("%w: local store %s: key %q: %w", ErrStoreFailed, dir, key, engine.CorruptionErrorf(format, args...))
}

// pebbleError wraps a Pebble failure; corruption Pebble detected in its own
// files (WAL, MANIFEST, tables) also matches engine.ErrCorruption.
func pebbleError(dir, op string, err error) error {
	if errors.Is(err, pebble.ErrCorruption) {
		return fmt.Errorf("%w: local store %s: %s: %w (%w)", ErrStoreFailed, dir, op, err, engine.ErrCorruption)
	}
	return fmt.Errorf("metadata local store %s: %s: %w", dir, op, err)
}

// ownedStore is the session metadata.Open returns for "local:": the
// process's session, which owns the server and closes it with itself.
type ownedStore struct {
	Store
	srv *LocalServer
}

func (s ownedStore) Close() error { return errors.Join(s.Store.Close(), s.srv.Close()) }

// openLocalStore opens dir and one session on it.
func openLocalStore(dir string, opts LocalOptions) (Store, error) {
	srv, err := OpenLocal(dir, opts)
	if err != nil {
		return nil, err
	}
	return ownedStore{Store: srv.NewSession(), srv: srv}, nil
}
