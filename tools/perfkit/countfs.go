package perfkit

import (
	"strings"
	"sync/atomic"

	"github.com/magnetar-io/magnetar/engine"
)

// JournalHeaderEnd is the journal file's header block: writes below it
// are file headers, not groups.
const JournalHeaderEnd = 4096

// Counters are what journals did to their files, seen from below: the
// group size is measured from the datasyncs that reached the backend, not
// taken from the journal's internals (which the benchmarks must not
// change).
type Counters struct {
	Syncs atomic.Int64 // datasyncs that covered group data
	Bytes atomic.Int64 // bytes of groups written (headers, records, padding)
}

// CountingFS wraps a journal's engine.FS and counts, for journal files
// only, the datasyncs and bytes written. Other files (checkpoints, ledger
// storage) are not counted: they are not group commits.
type CountingFS struct {
	engine.FS
	c *Counters
}

// NewCountingFS counts into c what journals on fsys write.
func NewCountingFS(fsys engine.FS, c *Counters) *CountingFS { return &CountingFS{FS: fsys, c: c} }

// Create creates name, counted if it is a journal file.
func (fs *CountingFS) Create(name string) (engine.File, error) { return fs.wrap(fs.FS.Create(name)) }

// Open opens name, counted if it is a journal file.
func (fs *CountingFS) Open(name string) (engine.File, error) { return fs.wrap(fs.FS.Open(name)) }

// OpenReadWrite opens name, counted if it is a journal file.
func (fs *CountingFS) OpenReadWrite(name string) (engine.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name))
}

// Unwrap lets engine helpers (RegisterBuffers) reach the real backend.
func (fs *CountingFS) Unwrap() engine.FS { return fs.FS }

func (fs *CountingFS) wrap(f engine.File, err error) (engine.File, error) {
	if err != nil || !strings.HasSuffix(f.Name(), ".journal") {
		return f, err
	}
	return &countingFile{File: f, c: fs.c}, nil
}

// countingFile counts a datasync only when group data was written since
// the previous one, so the header's sync at creation and the final sync
// at Close do not shrink the measured group size.
type countingFile struct {
	engine.File
	c     *Counters
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
		f.c.Syncs.Add(1)
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
		f.c.Syncs.Add(1)
	}
	return err
}

func (f *countingFile) wrote(n int, off int64) {
	if off >= JournalHeaderEnd && n > 0 {
		f.c.Bytes.Add(int64(n))
		f.dirty.Store(true)
	}
}
