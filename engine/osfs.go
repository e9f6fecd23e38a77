package engine

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// fileIO is what differs between the std and uring backends: how bytes move.
// The shared osFS/osFile code does namespace operations, bookkeeping, loops
// over short transfers and error wrapping.
type fileIO interface {
	name() string
	// attach/detach are called when a file is opened and closed (uring
	// registers the fd in its fixed-file table).
	attach(f *osFile)
	detach(f *osFile)
	// pwritev may write fewer bytes than asked without an error.
	pwritev(f *osFile, bufs [][]byte, off int64) (int, error)
	// writeSync writes (possibly short) and, only when the write was
	// complete, datasyncs. synced reports whether the datasync ran.
	writeSync(f *osFile, bufs [][]byte, off int64) (n int, synced bool, err error)
	pread(f *osFile, p []byte, off int64) (int, error)
	datasync(f *osFile) error
	fallocate(f *osFile, mode uint32, off, length int64) error
	close() error
}

// osFS implements FS over the operating system's file system; bytes move
// through its fileIO backend.
type osFS struct {
	io      fileIO
	bounces *bouncePool // aligned buffers for direct writes (direct.go)
}

func (o *osFS) Backend() string { return o.io.name() }

func (o *osFS) err(op, path string, err error) error { return wrapErr(o.io.name(), op, path, err) }

func (o *osFS) Create(name string) (File, error) {
	return o.open("create", name, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC)
}

func (o *osFS) Open(name string) (File, error) {
	return o.open("open", name, unix.O_RDONLY)
}

func (o *osFS) OpenReadWrite(name string) (File, error) {
	return o.open("open", name, unix.O_RDWR)
}

func (o *osFS) open(op, name string, flags int) (File, error) {
	fd, err := unix.Open(name, flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, o.err(op, name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, o.err("stat", name, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		unix.Close(fd)
		return nil, o.err(op, name, unix.EISDIR)
	}
	f := &osFile{fs: o, fd: fd, path: name, fixed: -1}
	f.size.Store(st.Size)
	o.io.attach(f)
	return f, nil
}

func (o *osFS) Remove(name string) error {
	err := unix.Unlink(name)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Rmdir(name)
	}
	return o.err("remove", name, err)
}

func (o *osFS) Rename(oldname, newname string) error {
	return o.err("rename", oldname+" -> "+newname, unix.Rename(oldname, newname))
}

func (o *osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, o.err("list", dir, unwrapPathError(err))
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (o *osFS) MkdirAll(dir string, perm fs.FileMode) error {
	return o.err("mkdir", dir, unwrapPathError(os.MkdirAll(dir, perm)))
}

func (o *osFS) SyncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return o.err("syncdir", dir, err)
	}
	defer unix.Close(fd)
	return o.err("syncdir", dir, unix.Fsync(fd))
}

func (o *osFS) Stat(name string) (FileInfo, error) {
	st, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, o.err("stat", name, unwrapPathError(err))
	}
	return FileInfo{Name: st.Name(), Size: st.Size(), Mode: st.Mode(), ModTime: st.ModTime()}, nil
}

func (o *osFS) FreeSpace(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, o.err("statfs", path, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

func (o *osFS) Close() error {
	o.bounces.close()
	return o.err("close", "fs", o.io.close())
}

// unwrapPathError strips os.PathError so that our *Error is the only layer
// naming the path.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// osFile is an open file of an osFS.
//
// Lock rules: every operation holds ops.RLock for its whole duration (so a
// backend never sees the fd closed under it); Close takes ops.Lock.
type osFile struct {
	fs    *osFS
	fd    int
	path  string
	fixed int32 // uring fixed-file slot, or -1
	// direct is the same file opened with O_DIRECT once DirectWrites was
	// called: every write goes through it (direct.go). Set and cleared under
	// ops.Lock, read under ops.RLock.
	direct *osFile
	// directRead is the file opened O_RDONLY|O_DIRECT for ReadDirect, on
	// its first call (under readMu); closed by Close.
	directRead atomic.Pointer[osFile]
	readMu     sync.Mutex

	size   atomic.Int64 // logical end: max written end, or truncated size
	ops    sync.RWMutex
	closed bool // guarded by ops
}

func (f *osFile) Name() string { return f.path }

func (f *osFile) err(op string, err error) error { return f.fs.err(op, f.path, err) }

// begin takes the operation lock and fails if the file is closed.
func (f *osFile) begin(op string) error {
	f.ops.RLock()
	if f.closed {
		f.ops.RUnlock()
		return f.err(op, ErrClosed)
	}
	return nil
}

func (f *osFile) end() { f.ops.RUnlock() }

func (f *osFile) WriteAt(bufs [][]byte, off int64) (int, error) {
	if err := f.begin("write"); err != nil {
		return 0, err
	}
	defer f.end()
	if f.direct != nil {
		n, err := f.writeDirect(bufs, off, false)
		if n > 0 {
			f.noteEnd(off + int64(n))
		}
		return n, f.err("write", err)
	}
	n, err := f.writeFully(bufs, off)
	return n, f.err("write", err)
}

func (f *osFile) writeFully(bufs [][]byte, off int64) (int, error) {
	total := totalLen(bufs)
	done := 0
	for done < total {
		n, err := f.fs.io.pwritev(f, bufs, off+int64(done))
		done += n
		f.noteEnd(off + int64(done))
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, io.ErrShortWrite
		}
		bufs = advanceBufs(bufs, n)
	}
	return done, nil
}

// noteEnd raises the logical size to end if end is beyond it.
func (f *osFile) noteEnd(end int64) {
	for {
		cur := f.size.Load()
		if end <= cur || f.size.CompareAndSwap(cur, end) {
			return
		}
	}
}

func (f *osFile) Append(bufs [][]byte) (int64, error) {
	if err := f.begin("append"); err != nil {
		return 0, err
	}
	defer f.end()
	n := int64(totalLen(bufs))
	off := f.size.Add(n) - n
	var err error
	if f.direct != nil {
		_, err = f.writeDirect(bufs, off, false)
	} else {
		_, err = f.writeFully(bufs, off)
	}
	return off, f.err("append", err)
}

func (f *osFile) WriteAtSync(bufs [][]byte, off int64) (int, error) {
	if err := f.begin("write+datasync"); err != nil {
		return 0, err
	}
	defer f.end()
	if f.direct != nil {
		n, err := f.writeDirect(bufs, off, true)
		if n > 0 {
			f.noteEnd(off + int64(n))
		}
		return n, f.err("write+datasync", err)
	}
	n, synced, err := f.fs.io.writeSync(f, bufs, off)
	f.noteEnd(off + int64(n))
	if err != nil {
		return n, f.err("write+datasync", err)
	}
	if synced {
		return n, nil
	}
	// The write came back short, which broke the chain before the sync:
	// finish the write, then sync on its own.
	rest, err := f.writeFully(advanceBufs(bufs, n), off+int64(n))
	if err != nil {
		return n + rest, f.err("write+datasync", err)
	}
	return n + rest, f.err("datasync", f.fs.io.datasync(f))
}

func (f *osFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.begin("read"); err != nil {
		return 0, err
	}
	defer f.end()
	return f.readFull(f, p, off, "read")
}

// readFull reads p from off through from (f itself, or its direct read
// descriptor) until p is full or the file ends (io.EOF). A direct read
// stops short only at the end of the file (the next one would start
// unaligned there), so a short read that ends off a block ends the file
// too. Caller holds ops.RLock.
func (f *osFile) readFull(from *osFile, p []byte, off int64, op string) (int, error) {
	done := 0
	for done < len(p) {
		n, err := f.fs.io.pread(from, p[done:], off+int64(done))
		done += n
		if err != nil {
			return done, f.err(op, err)
		}
		if n == 0 || (from != f && done%DirectAlign != 0) {
			return done, io.EOF
		}
	}
	return done, nil
}

func (f *osFile) Datasync() error {
	if err := f.begin("datasync"); err != nil {
		return err
	}
	defer f.end()
	return f.err("datasync", f.fs.io.datasync(f))
}

func (f *osFile) Preallocate(off, length int64) error {
	if err := f.begin("preallocate"); err != nil {
		return err
	}
	defer f.end()
	return f.err("preallocate", f.fs.io.fallocate(f, unix.FALLOC_FL_KEEP_SIZE, off, length))
}

func (f *osFile) Truncate(size int64) error {
	if err := f.begin("truncate"); err != nil {
		return err
	}
	defer f.end()
	if err := unix.Ftruncate(f.fd, size); err != nil {
		return f.err("truncate", err)
	}
	f.size.Store(size)
	return nil
}

func (f *osFile) Size() int64 { return f.size.Load() }

func (f *osFile) WriteBack(off, length int64) error {
	if err := f.begin("sync_file_range"); err != nil {
		return err
	}
	defer f.end()
	err := unix.SyncFileRange(f.fd, off, length, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ESPIPE) {
		return nil // a file system without it: the next Datasync does the work
	}
	return f.err("sync_file_range", err)
}

func (f *osFile) DropCache() error {
	if err := f.begin("fadvise"); err != nil {
		return err
	}
	defer f.end()
	return f.err("fadvise", unix.Fadvise(f.fd, 0, 0, unix.FADV_DONTNEED))
}

func (f *osFile) Close() error {
	f.ops.Lock()
	defer f.ops.Unlock()
	if f.closed {
		return f.err("close", ErrClosed)
	}
	f.closed = true
	derr := f.closeDirect()
	f.fs.io.detach(f)
	return f.err("close", errors.Join(derr, unix.Close(f.fd)))
}
