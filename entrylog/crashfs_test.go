package entrylog

import (
	"math/rand"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// crashDisks is an engine mem FS (entry logs) and the crashable Pebble mem
// FS (indexes) attached to it, which Open uses by default on the mem
// engine: CrashClone of the engine FS crashes both at one instant. Every
// durability operation on either (datasync, directory sync, Pebble syncs)
// also holds gate shared and image holds it exclusively, so no sync is
// half done in an image.
type crashDisks struct {
	gate sync.RWMutex
	efs  *engine.MemFS
	pfs  *vfs.MemFS
}

func newCrashDisks() *crashDisks { return withIndex(engine.NewMem()) }

func withIndex(efs *engine.MemFS) *crashDisks {
	return &crashDisks{efs: efs, pfs: memIndexFS(efs).(*vfs.MemFS)}
}

func (c *crashDisks) engineFS() engine.FS { return gatedFS{FS: c.efs, g: &c.gate} }
func (c *crashDisks) indexFS() vfs.FS     { return gatedVFS{FS: c.pfs, g: &c.gate} }

// image returns what a power failure now would leave. With seed >= 0 the
// unsynced writes of both are torn at random, reproducibly.
func (c *crashDisks) image(seed int64) *crashDisks {
	c.gate.Lock()
	defer c.gate.Unlock()
	eopts := engine.CrashOptions{}
	if seed >= 0 {
		eopts.Rand = rand.New(rand.NewSource(seed)) // tears the index's unsynced writes too
	}
	return withIndex(c.efs.CrashClone(eopts))
}

type gatedFS struct {
	engine.FS
	g *sync.RWMutex
}

func (f gatedFS) Create(n string) (engine.File, error)        { return f.wrap(f.FS.Create(n)) }
func (f gatedFS) Open(n string) (engine.File, error)          { return f.wrap(f.FS.Open(n)) }
func (f gatedFS) OpenReadWrite(n string) (engine.File, error) { return f.wrap(f.FS.OpenReadWrite(n)) }
func (f gatedFS) Unwrap() engine.FS                           { return f.FS }

func (f gatedFS) SyncDir(dir string) error {
	f.g.RLock()
	defer f.g.RUnlock()
	return f.FS.SyncDir(dir)
}

func (f gatedFS) wrap(file engine.File, err error) (engine.File, error) {
	if err != nil {
		return nil, err
	}
	return gatedFile{File: file, g: f.g}, nil
}

type gatedFile struct {
	engine.File
	g *sync.RWMutex
}

func (f gatedFile) Datasync() error {
	f.g.RLock()
	defer f.g.RUnlock()
	return f.File.Datasync()
}

func (f gatedFile) WriteAtSync(bufs [][]byte, off int64) (int, error) {
	f.g.RLock()
	defer f.g.RUnlock()
	return f.File.WriteAtSync(bufs, off)
}

type gatedVFS struct {
	vfs.FS
	g *sync.RWMutex
}

func (f gatedVFS) Create(n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.Create(n, c))
}

func (f gatedVFS) Open(n string, o ...vfs.OpenOption) (vfs.File, error) {
	return f.wrap(f.FS.Open(n, o...))
}

func (f gatedVFS) OpenReadWrite(n string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(n, c, o...))
}

func (f gatedVFS) OpenDir(n string) (vfs.File, error) { return f.wrap(f.FS.OpenDir(n)) }

func (f gatedVFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.ReuseForWrite(o, n, c))
}

func (f gatedVFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return gatedVFile{File: file, g: f.g}, nil
}

type gatedVFile struct {
	vfs.File
	g *sync.RWMutex
}

func (f gatedVFile) Sync() error {
	f.g.RLock()
	defer f.g.RUnlock()
	return f.File.Sync()
}

func (f gatedVFile) SyncData() error {
	f.g.RLock()
	defer f.g.RUnlock()
	return f.File.SyncData()
}

func (f gatedVFile) SyncTo(n int64) (bool, error) {
	f.g.RLock()
	defer f.g.RUnlock()
	return f.File.SyncTo(n)
}
