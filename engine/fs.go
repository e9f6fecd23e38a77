// Package engine is the file-system layer under all of Magnetar's storage
// (journal, entry logs, entry index, embedded metadata). Every byte a bookie
// stores goes through an engine.FS.
//
// Backends:
//
//	uring  io_uring through our own binding (engine/internal/iouring): vectored writes,
//	       reads, fdatasync and fallocate as SQEs; a write and its datasync are
//	       submitted as one linked chain (IOSQE_IO_LINK). Waiting goroutines
//	       take turns reaping completions for all (leader/followers);
//	       Separate gives a user (a bookie's journals) a ring of its own.
//	std    pwritev / pread / fdatasync / fallocate system calls.
//	mem    in memory, for tests, with a crash model: CrashClone keeps only
//	       what was made durable (file data by Datasync, directory entries by
//	       SyncDir), optionally tearing the unsynced writes at a random byte.
//
// The wrapper engine/errorfs injects faults (EIO, ENOSPC, short writes,
// failed syncs) into any FS by operation index or path pattern.
//
// Durability contract (the same for every backend, and what the mem crash
// model enforces):
//   - File data written by WriteAt/Append survives a crash only after a
//     successful Datasync or WriteAtSync on that file.
//   - A created, renamed or removed name survives a crash only after a
//     successful SyncDir of its parent directory.
//   - After a failed Datasync the state of unsynced data is unknown; callers
//     must treat the file as broken (the "fsyncgate" rule) and never retry the
//     sync hoping it now covers the earlier writes.
//
// Errors are *Error values naming the operation and path; errors.Is works
// against the underlying errno (unix.ENOSPC, fs.ErrNotExist, ...).
package engine

import (
	"io/fs"
	"time"
)

// FS is the file-system interface every storage package uses.
//
// Names are plain paths (absolute, or relative to the process's working
// directory). Implementations are safe for concurrent use.
type FS interface {
	// Create creates the named file for reading and writing, truncating it
	// if it exists.
	Create(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing without
	// truncating it (for example to reuse a preallocated journal file).
	OpenReadWrite(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// List returns the names in a directory, sorted.
	List(dir string) ([]string, error)
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable.
	SyncDir(dir string) error
	// Stat describes the named file or directory.
	Stat(name string) (FileInfo, error)
	// FreeSpace returns the bytes available to this process on the file
	// system holding path.
	FreeSpace(path string) (uint64, error)
	// Backend names the implementation: "uring", "std", "mem", or a
	// wrapper's name around one of those.
	Backend() string
	// Close releases the backend's resources (for uring: the ring). Files
	// must be closed first.
	Close() error
}

// File is an open file. Methods are safe for concurrent use; concurrent
// writes to overlapping ranges have no defined order.
type File interface {
	// Name returns the path the file was opened with.
	Name() string
	// WriteAt writes bufs, in order, contiguously from off. It returns the
	// bytes written; n < total always comes with an error.
	WriteAt(bufs [][]byte, off int64) (n int, err error)
	// Append writes bufs at the file's logical end and returns the offset
	// of their first byte. Concurrent appends get disjoint ranges. After an
	// error the range reserved for the failed append may hold any bytes.
	Append(bufs [][]byte) (off int64, err error)
	// WriteAtSync writes bufs at off and then makes the file's data durable
	// as Datasync does. The uring backend submits both as one linked chain.
	WriteAtSync(bufs [][]byte, off int64) (n int, err error)
	// ReadAt reads len(p) bytes from off, as io.ReaderAt: n < len(p) comes
	// with an error, io.EOF at the end of the file.
	ReadAt(p []byte, off int64) (n int, err error)
	// Datasync makes the file's data, and the metadata needed to read it
	// back, durable (fdatasync(2)).
	Datasync() error
	// Preallocate reserves disk blocks for [off, off+length) without
	// changing the file's size (fallocate with FALLOC_FL_KEEP_SIZE).
	Preallocate(off, length int64) error
	// Truncate sets the file's size.
	Truncate(size int64) error
	// Size returns the file's logical size as this handle sees it
	// (updated by writes, appends and truncates through it).
	Size() int64
	// WriteBack starts writing the range's dirty pages to the device
	// (sync_file_range SYNC_FILE_RANGE_WRITE), first waiting for the
	// range's writeback already under way (SYNC_FILE_RANGE_WAIT_BEFORE).
	// It is not a durability barrier (Datasync is): it lets a large write
	// reach the device in steps as it is made, instead of all at once at
	// the next Datasync, where it would stall other files' syncs on the
	// same device (the journal's). A no-op where there is no page cache.
	WriteBack(off, length int64) error
	// DirectWrites sends every later write past the page cache (O_DIRECT):
	// from then on each write's offset and length must be multiples of
	// DirectAlign, or it fails with ErrUnaligned; buffers may sit anywhere
	// (direct.go says why and how). Reads are unaffected. It fails with
	// ErrDirectUnsupported where the file system has no direct I/O; the
	// file then stays as it was.
	DirectWrites() error
	// ReadDirect reads into p from off past the page cache (O_DIRECT), in
	// any mode: p's address, len(p) and off must be multiples of
	// DirectAlign (AlignedBuffer gives such a buffer), or it fails with
	// ErrUnaligned. Like ReadAt it returns io.EOF when the file ends
	// before p is full. It fails with ErrDirectUnsupported where the file
	// system has no direct I/O. For files written with DirectWrites, whose
	// pages are never cached: a buffered read would fill new cache pages
	// (direct.go says what that costs).
	ReadDirect(p []byte, off int64) (int, error)
	// DropCache asks the kernel to evict the file's clean cached pages
	// (posix_fadvise DONTNEED), so later reads measure or exercise the disk.
	DropCache() error
	// Close closes the file. It waits for operations in flight.
	Close() error
}

// FileInfo describes a file or directory.
type FileInfo struct {
	Name    string // base name
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
}

// IsDir reports whether the entry is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// totalLen returns the sum of the buffers' lengths.
func totalLen(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// advanceBufs drops the first n bytes from bufs, returning the remaining
// buffers (sharing memory with the input).
func advanceBufs(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 && n > 0 {
		rest := make([][]byte, len(bufs))
		copy(rest, bufs)
		rest[0] = rest[0][n:]
		return rest
	}
	return bufs
}
