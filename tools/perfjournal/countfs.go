package perfjournal

import (
	"strings"
	"sync/atomic"

	"github.com/magnetar-io/magnetar/engine"
)

// counters are what the journal did to its files, seen from below: the
// group size is measured from the datasyncs that reached the backend, not
// taken from the journal's internals (which this tool must not change).
type counters struct {
	syncs atomic.Int64 // datasyncs that covered group data
	bytes atomic.Int64 // bytes of groups written (headers, records, padding)
}

// countingFS wraps the journal's engine.FS and counts, for journal files
// only, the datasyncs and bytes written. Checkpoint files are not counted:
// they are the benchmark's housekeeping, not group commits.
type countingFS struct {
	engine.FS
	c *counters
}

func (fs *countingFS) Create(name string) (engine.File, error) {
	return fs.wrap(fs.FS.Create(name))
}

func (fs *countingFS) Open(name string) (engine.File, error) {
	return fs.wrap(fs.FS.Open(name))
}

func (fs *countingFS) OpenReadWrite(name string) (engine.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name))
}

// Unwrap lets engine helpers (RegisterBuffers) reach the real backend.
func (fs *countingFS) Unwrap() engine.FS { return fs.FS }

func (fs *countingFS) wrap(f engine.File, err error) (engine.File, error) {
	if err != nil || !strings.HasSuffix(f.Name(), ".journal") {
		return f, err
	}
	return &countingFile{File: f, c: fs.c}, nil
}

// countingFile counts a datasync only when group data was written since
// the last one, so the file header's sync at creation and the final sync
// at Close do not shrink the measured group size.
type countingFile struct {
	engine.File
	c     *counters
	dirty atomic.Bool
}

// headerEnd is the journal's header block: writes below it are file
// headers, not groups.
const headerEnd = 4096

func (f *countingFile) WriteAt(bufs [][]byte, off int64) (int, error) {
	n, err := f.File.WriteAt(bufs, off)
	f.wrote(n, off)
	return n, err
}

func (f *countingFile) WriteAtSync(bufs [][]byte, off int64) (int, error) {
	n, err := f.File.WriteAtSync(bufs, off)
	f.wrote(n, off)
	if err == nil {
		f.synced()
	}
	return n, err
}

func (f *countingFile) Datasync() error {
	// Clear before syncing: a write that lands during the sync may not be
	// covered by it, so it must make the next sync count.
	was := f.dirty.Swap(false)
	err := f.File.Datasync()
	if err == nil && was {
		f.c.syncs.Add(1)
	}
	return err
}

func (f *countingFile) wrote(n int, off int64) {
	if off >= headerEnd && n > 0 {
		f.c.bytes.Add(int64(n))
		f.dirty.Store(true)
	}
}

func (f *countingFile) synced() {
	if f.dirty.Swap(false) {
		f.c.syncs.Add(1)
	}
}
