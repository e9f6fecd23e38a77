// Package errorfs wraps an engine.FS and injects faults, so every storage
// package can test its error paths: EIO, ENOSPC, short writes and failed
// syncs, chosen by operation index (for failure sweeps), by path pattern, or
// at random with a seed.
//
// A failed sync does not sync: the wrapped file keeps its data unsynced,
// which with the mem backend's crash model means it is lost on a crash, as
// on a real disk after an fsync error.
package errorfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/magnetar-io/magnetar/engine"
	"golang.org/x/sys/unix"
)

// Op is a kind of file-system operation.
type Op uint8

// The operations faults can be injected into.
const (
	OpCreate Op = iota
	OpOpen
	OpRemove
	OpRename
	OpList
	OpMkdirAll
	OpSyncDir
	OpStat
	OpFreeSpace
	OpWrite // WriteAt, Append and the write half of WriteAtSync
	OpRead
	OpSync // Datasync and the sync half of WriteAtSync
	OpPreallocate
	OpTruncate
	OpClose
	numOps
)

var opNames = [...]string{"create", "open", "remove", "rename", "list", "mkdir", "syncdir", "stat",
	"freespace", "write", "read", "sync", "preallocate", "truncate", "close"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ErrInjected matches every injected error (errors.Is).
var ErrInjected = errors.New("injected fault")

// Fault is what to inject.
type Fault struct {
	// Err is the error to return (default EIO).
	Err error
	// Short, for writes, first writes about half of the bytes, then fails.
	Short bool
}

// InjectedError is the error an injected fault returns. It matches
// ErrInjected and unwraps to the fault's error (unix.ENOSPC, ...).
type InjectedError struct {
	Op    Op
	Path  string
	Index int64 // the operation's index in this FS
	Err   error
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("%s %s: %v (injected fault at op #%d)", e.Op, e.Path, e.Err, e.Index)
}
func (e *InjectedError) Unwrap() error { return e.Err }

// SyncOp reports whether the fault was injected into an operation that
// flushes earlier writes (a sync or a close): engine.IsNoSpaceOnWrite
// tells those from a failed write.
func (e *InjectedError) SyncOp() bool         { return e.Op == OpSync || e.Op == OpSyncDir || e.Op == OpClose }
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// Injector decides, for each operation, whether it fails. index counts every
// operation of the FS and its files from 0.
type Injector interface {
	Inject(op Op, path string, index int64) (Fault, bool)
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, path string, index int64) (Fault, bool)

// Inject implements Injector.
func (f InjectorFunc) Inject(op Op, path string, index int64) (Fault, bool) {
	return f(op, path, index)
}

// None injects nothing (a pass-through wrapper that still counts ops).
var None = InjectorFunc(func(Op, string, int64) (Fault, bool) { return Fault{}, false })

// AtIndex fails the operation with index n (and only it).
func AtIndex(n int64, fault Fault) Injector {
	return InjectorFunc(func(_ Op, _ string, index int64) (Fault, bool) { return fault, index == n })
}

// OnOps fails every operation of the given kinds.
func OnOps(fault Fault, ops ...Op) Injector {
	return InjectorFunc(func(op Op, _ string, _ int64) (Fault, bool) { return fault, containsOp(ops, op) })
}

// OnPath fails operations of the given kinds (all kinds when none are given)
// on paths whose base name matches the glob pattern, or whose full path
// contains it when it is not a valid glob match.
func OnPath(pattern string, fault Fault, ops ...Op) Injector {
	return InjectorFunc(func(op Op, path string, _ int64) (Fault, bool) {
		if len(ops) > 0 && !containsOp(ops, op) {
			return Fault{}, false
		}
		matched, _ := filepath.Match(pattern, filepath.Base(path))
		return fault, matched || strings.Contains(path, pattern)
	})
}

func containsOp(ops []Op, op Op) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// Random fails each operation with probability p, reproducibly for a seed.
func Random(seed int64, p float64, fault Fault) Injector {
	var mu sync.Mutex
	rng := rand.New(rand.NewSource(seed))
	return InjectorFunc(func(Op, string, int64) (Fault, bool) {
		mu.Lock()
		defer mu.Unlock()
		return fault, rng.Float64() < p
	})
}

// Toggle wraps an injector so tests can switch it on and off.
type Toggle struct {
	Injector
	on atomic.Bool
}

// NewToggle returns a Toggle, initially on.
func NewToggle(inj Injector) *Toggle {
	t := &Toggle{Injector: inj}
	t.on.Store(true)
	return t
}

// Set turns injection on or off.
func (t *Toggle) Set(on bool) { t.on.Store(on) }

// Inject implements Injector.
func (t *Toggle) Inject(op Op, path string, index int64) (Fault, bool) {
	if !t.on.Load() {
		return Fault{}, false
	}
	return t.Injector.Inject(op, path, index)
}

// FS is an engine.FS that injects faults into another.
type FS struct {
	inner engine.FS
	inj   Injector
	ops   atomic.Int64
}

// Wrap returns inner wrapped with the injector.
func Wrap(inner engine.FS, inj Injector) *FS { return &FS{inner: inner, inj: inj} }

// Ops returns how many operations have been attempted so far.
func (e *FS) Ops() int64 { return e.ops.Load() }

// Unwrap returns the wrapped FS.
func (e *FS) Unwrap() engine.FS { return e.inner }

// check counts the operation and returns the fault to inject, if any.
func (e *FS) check(op Op, path string) (Fault, error) {
	idx := e.ops.Add(1) - 1
	fault, ok := e.inj.Inject(op, path, idx)
	if !ok {
		return Fault{}, nil
	}
	if fault.Err == nil {
		fault.Err = unix.EIO
	}
	return fault, &InjectedError{Op: op, Path: path, Index: idx, Err: fault.Err}
}

// Backend implements engine.FS.
func (e *FS) Backend() string { return "errorfs(" + e.inner.Backend() + ")" }

// Create implements engine.FS.
func (e *FS) Create(name string) (engine.File, error) {
	if _, err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.inner.Create(name)
	return e.wrapFile(f, err)
}

// Open implements engine.FS.
func (e *FS) Open(name string) (engine.File, error) {
	if _, err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.inner.Open(name)
	return e.wrapFile(f, err)
}

// OpenReadWrite implements engine.FS.
func (e *FS) OpenReadWrite(name string) (engine.File, error) {
	if _, err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.inner.OpenReadWrite(name)
	return e.wrapFile(f, err)
}

func (e *FS) wrapFile(f engine.File, err error) (engine.File, error) {
	if err != nil {
		return nil, err
	}
	return &file{inner: f, fs: e}, nil
}

// Remove implements engine.FS.
func (e *FS) Remove(name string) error {
	if _, err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

// Rename implements engine.FS.
func (e *FS) Rename(oldname, newname string) error {
	if _, err := e.check(OpRename, newname); err != nil {
		return err
	}
	return e.inner.Rename(oldname, newname)
}

// List implements engine.FS.
func (e *FS) List(dir string) ([]string, error) {
	if _, err := e.check(OpList, dir); err != nil {
		return nil, err
	}
	return e.inner.List(dir)
}

// MkdirAll implements engine.FS.
func (e *FS) MkdirAll(dir string, perm fs.FileMode) error {
	if _, err := e.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.inner.MkdirAll(dir, perm)
}

// SyncDir implements engine.FS.
func (e *FS) SyncDir(dir string) error {
	if _, err := e.check(OpSyncDir, dir); err != nil {
		return err
	}
	return e.inner.SyncDir(dir)
}

// Stat implements engine.FS.
func (e *FS) Stat(name string) (engine.FileInfo, error) {
	if _, err := e.check(OpStat, name); err != nil {
		return engine.FileInfo{}, err
	}
	return e.inner.Stat(name)
}

// FreeSpace implements engine.FS.
func (e *FS) FreeSpace(path string) (uint64, error) {
	if _, err := e.check(OpFreeSpace, path); err != nil {
		return 0, err
	}
	return e.inner.FreeSpace(path)
}

// Close implements engine.FS (never injected: tests always need to clean up).
func (e *FS) Close() error { return e.inner.Close() }

type file struct {
	inner  engine.File
	fs     *FS
	direct atomic.Bool // DirectWrites succeeded: short writes tear at a block
}

func (f *file) Name() string { return f.inner.Name() }

// shortWrite writes about half of bufs at off and returns the fault.
func (f *file) shortWrite(bufs [][]byte, off int64, err error) (int, error) {
	half := engineTotal(bufs) / 2
	if f.direct.Load() {
		half &^= engine.DirectAlign - 1 // a direct write is torn at a block, as a device tears it
	}
	n, werr := f.inner.WriteAt(truncateBufs(bufs, half), off)
	if werr != nil {
		return n, werr
	}
	return n, err
}

func (f *file) WriteAt(bufs [][]byte, off int64) (int, error) {
	if fault, err := f.fs.check(OpWrite, f.Name()); err != nil {
		if fault.Short {
			return f.shortWrite(bufs, off, err)
		}
		return 0, err
	}
	return f.inner.WriteAt(bufs, off)
}

func (f *file) Append(bufs [][]byte) (int64, error) {
	if fault, err := f.fs.check(OpWrite, f.Name()); err != nil {
		if fault.Short {
			off := f.inner.Size()
			_, err = f.shortWrite(bufs, off, err)
			return off, err
		}
		return 0, err
	}
	return f.inner.Append(bufs)
}

func (f *file) WriteAtSync(bufs [][]byte, off int64) (int, error) {
	if fault, err := f.fs.check(OpWrite, f.Name()); err != nil {
		if fault.Short {
			return f.shortWrite(bufs, off, err)
		}
		return 0, err
	}
	if _, err := f.fs.check(OpSync, f.Name()); err != nil {
		n, werr := f.inner.WriteAt(bufs, off) // written, but never synced
		if werr != nil {
			return n, werr
		}
		return n, err
	}
	return f.inner.WriteAtSync(bufs, off)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if _, err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *file) ReadDirect(p []byte, off int64) (int, error) {
	if _, err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.inner.ReadDirect(p, off)
}

func (f *file) Datasync() error {
	if _, err := f.fs.check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.inner.Datasync()
}

func (f *file) Preallocate(off, length int64) error {
	if _, err := f.fs.check(OpPreallocate, f.Name()); err != nil {
		return err
	}
	return f.inner.Preallocate(off, length)
}

func (f *file) Truncate(size int64) error {
	if _, err := f.fs.check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f *file) Size() int64      { return f.inner.Size() }
func (f *file) DropCache() error { return f.inner.DropCache() }

// DirectWrites implements engine.File (no fault of its own: it opens no new
// name; the writes after it meet the injected faults).
func (f *file) DirectWrites() error {
	if err := f.inner.DirectWrites(); err != nil {
		return err
	}
	f.direct.Store(true)
	return nil
}

func (f *file) WriteBack(off, length int64) error { return f.inner.WriteBack(off, length) }

// Close closes the inner file even when a fault is injected, so a failed
// close never leaks the descriptor.
func (f *file) Close() error {
	_, injected := f.fs.check(OpClose, f.Name())
	return errors.Join(f.inner.Close(), injected)
}

func engineTotal(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// truncateBufs returns the first n bytes of bufs as buffers.
func truncateBufs(bufs [][]byte, n int) [][]byte {
	var out [][]byte
	for _, b := range bufs {
		if n <= 0 {
			break
		}
		take := min(n, len(b))
		out = append(out, b[:take])
		n -= take
	}
	return out
}
