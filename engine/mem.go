package engine

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// MemOptions configure a MemFS.
type MemOptions struct {
	// Capacity is the space the file system pretends to have (default
	// 1 TiB). Writes and preallocations past it fail with ENOSPC after
	// writing what fits, as a real full disk does.
	Capacity int64
}

// MemFS is the in-memory backend with a crash model (see CrashClone).
//
// Known simplifications: durability of directory entries is tracked by path,
// so a crash after renaming a non-empty directory keeps its children only
// under paths that were synced (storage code renames files, not
// directories); space written to a removed but still open file is not
// released.
//
// Lock rules: one mutex (mu) guards the whole file system, its nodes and
// every open file's state. Operations are short; nothing blocks under mu.
type MemFS struct {
	mu       sync.Mutex
	capacity int64
	used     int64               // sum over files of max(len(data), allocated)
	nodes    map[string]*memNode // the namespace as processes see it
	durable  map[string]*memNode // the namespace a crash would leave (SyncDir)
	attached map[any]MemAttachment
	closed   bool
}

// MemAttachment is state that lives beside a MemFS and crashes with it:
// another in-memory store a component keeps next to its files (entrylog's
// Pebble index on the mem engine). CrashClone clones every attachment while
// it holds the MemFS's lock, so no change to the MemFS falls between the two
// clones: together they show one instant.
type MemAttachment interface {
	// CrashCloneAttachment returns what a power failure now would leave;
	// opts are the MemFS's (tear unsynced writes when opts.Rand is set).
	// It must not call the MemFS.
	CrashCloneAttachment(opts CrashOptions) MemAttachment
}

// Attach returns the attachment stored under key, storing create() there
// first if there is none (create must not call the MemFS). Crash clones
// carry clones of the attachments under the same keys.
func (m *MemFS) Attach(key any, create func() MemAttachment) MemAttachment {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.attached[key]; ok {
		return a
	}
	if m.attached == nil {
		m.attached = map[any]MemAttachment{}
	}
	a := create()
	m.attached[key] = a
	return a
}

type memNode struct {
	dir       bool
	modTime   time.Time
	data      []byte     // contents as processes see them
	synced    []byte     // contents a crash would leave (Datasync)
	pending   []memWrite // changes since the last Datasync, in order
	allocated int64      // preallocated size
}

// memWrite is one unsynced change: a write, or a truncate when trunc is set.
type memWrite struct {
	off   int64
	data  []byte
	trunc bool
}

// NewMem returns an empty in-memory file system.
func NewMem() *MemFS { return NewMemWithOptions(MemOptions{}) }

// NewMemWithOptions returns an empty in-memory file system.
func NewMemWithOptions(opts MemOptions) *MemFS {
	if opts.Capacity <= 0 {
		opts.Capacity = 1 << 40
	}
	return &MemFS{capacity: opts.Capacity, nodes: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// CrashOptions choose what a simulated crash keeps beyond synced state.
type CrashOptions struct {
	// Rand, when set, tears unsynced writes: for each file a random number
	// of its unsynced changes survive whole, and the next one survives cut
	// at a random byte (a prefix). When nil, only synced data survives.
	Rand *rand.Rand
}

// CrashClone returns the file system a machine would find after a power
// failure now: directory entries as of each directory's last SyncDir, file
// contents as of each file's last Datasync (plus torn writes if asked).
// The receiver is left as it is; handles opened on it stay bound to it.
// Attachments (see Attach) are crash-cloned with it, at the same instant.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMemWithOptions(MemOptions{Capacity: m.capacity})
	copies := map[*memNode]*memNode{}
	paths := make([]string, 0, len(m.durable))
	for p := range m.durable {
		paths = append(paths, p)
	}
	sort.Strings(paths) // deterministic order for seeded tearing
	for _, p := range paths {
		if !m.durablePathLocked(p) {
			continue
		}
		n := m.durable[p]
		c, ok := copies[n]
		if !ok {
			c = n.crashCopy(opts.Rand)
			copies[n] = c
			out.used += max(int64(len(c.data)), c.allocated)
		}
		out.nodes[p], out.durable[p] = c, c
	}
	if len(m.attached) > 0 {
		keys := make([]any, 0, len(m.attached))
		for k := range m.attached {
			keys = append(keys, k)
		}
		// Deterministic order for seeded tearing (keys of one type are
		// ordered by their formatted value).
		sort.Slice(keys, func(i, j int) bool {
			return fmt.Sprintf("%T%v", keys[i], keys[i]) < fmt.Sprintf("%T%v", keys[j], keys[j])
		})
		out.attached = make(map[any]MemAttachment, len(keys))
		for _, k := range keys {
			out.attached[k] = m.attached[k].CrashCloneAttachment(opts)
		}
	}
	return out
}

// durablePathLocked reports whether p and all its ancestors have durable
// entries (a durable entry in a directory that was itself never made
// durable does not survive).
func (m *MemFS) durablePathLocked(p string) bool {
	for {
		if _, ok := m.durable[p]; !ok {
			return false
		}
		parent := filepath.Dir(p)
		if isRoot(parent) {
			return true
		}
		p = parent
	}
}

func (n *memNode) crashCopy(rng *rand.Rand) *memNode {
	c := &memNode{dir: n.dir, modTime: n.modTime, allocated: n.allocated}
	if n.dir {
		return c
	}
	c.data = append([]byte(nil), n.synced...)
	if rng != nil && len(n.pending) > 0 {
		whole := rng.Intn(len(n.pending) + 1)
		for _, w := range n.pending[:whole] {
			c.data = w.applyTo(c.data)
		}
		if whole < len(n.pending) {
			torn := n.pending[whole]
			if !torn.trunc {
				torn.data = torn.data[:rng.Intn(len(torn.data)+1)]
			}
			c.data = torn.applyTo(c.data)
		}
	}
	c.synced = append([]byte(nil), c.data...)
	return c
}

func (w memWrite) applyTo(data []byte) []byte {
	if w.trunc {
		return resize(data, w.off)
	}
	end := w.off + int64(len(w.data))
	if end > int64(len(data)) {
		data = resize(data, end)
	}
	copy(data[w.off:], w.data)
	return data
}

func resize(data []byte, size int64) []byte {
	if size <= int64(len(data)) {
		return data[:size]
	}
	if size <= int64(cap(data)) {
		old := len(data)
		data = data[:size]
		clear(data[old:])
		return data
	}
	grown := make([]byte, size, max(size, 2*int64(cap(data))))
	copy(grown, data)
	return grown
}

func isRoot(p string) bool { return p == "/" || p == "." }

func cleanPath(p string) string { return filepath.Clean(p) }

func (m *MemFS) err(op, path string, err error) error { return wrapErr("mem", op, path, err) }

// Backend implements FS.
func (m *MemFS) Backend() string { return "mem" }

// lookupLocked returns the node at p (roots are implicit directories).
func (m *MemFS) lookupLocked(p string) (*memNode, bool) {
	if isRoot(p) {
		return &memNode{dir: true}, true
	}
	n, ok := m.nodes[p]
	return n, ok
}

// checkParentLocked fails unless p's parent exists and is a directory.
func (m *MemFS) checkParentLocked(p string) error {
	parent, ok := m.lookupLocked(filepath.Dir(p))
	switch {
	case !ok:
		return unix.ENOENT
	case !parent.dir:
		return unix.ENOTDIR
	}
	return nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	p := cleanPath(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, m.err("create", name, ErrClosed)
	}
	if err := m.checkParentLocked(p); err != nil {
		return nil, m.err("create", name, err)
	}
	n, ok := m.nodes[p]
	switch {
	case ok && n.dir:
		return nil, m.err("create", name, unix.EISDIR)
	case ok:
		m.used -= max(int64(len(n.data)), n.allocated)
		n.data = n.data[:0]
		n.pending = append(n.pending, memWrite{trunc: true})
		m.used += n.allocated
	default:
		n = &memNode{modTime: time.Now()}
		m.nodes[p] = n
	}
	return &memFile{fs: m, node: n, name: name, writable: true}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false) }

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open("open", name, true) }

func (m *MemFS) open(op, name string, writable bool) (File, error) {
	p := cleanPath(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, m.err(op, name, ErrClosed)
	}
	n, ok := m.nodes[p]
	switch {
	case !ok:
		return nil, m.err(op, name, unix.ENOENT)
	case n.dir:
		return nil, m.err(op, name, unix.EISDIR)
	}
	return &memFile{fs: m, node: n, name: name, writable: writable}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	p := cleanPath(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[p]
	switch {
	case m.closed:
		return m.err("remove", name, ErrClosed)
	case !ok:
		return m.err("remove", name, unix.ENOENT)
	case n.dir && len(m.childrenLocked(p)) > 0:
		return m.err("remove", name, unix.ENOTEMPTY)
	}
	delete(m.nodes, p)
	if !m.referencedLocked(n) {
		m.used -= max(int64(len(n.data)), n.allocated)
	}
	return nil
}

func (m *MemFS) referencedLocked(n *memNode) bool {
	for _, other := range m.nodes {
		if other == n {
			return true
		}
	}
	return false
}

func (m *MemFS) childrenLocked(dir string) []string {
	var names []string
	for p := range m.nodes {
		if filepath.Dir(p) == dir && p != dir {
			names = append(names, filepath.Base(p))
		}
	}
	sort.Strings(names)
	return names
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	from, to := cleanPath(oldname), cleanPath(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	opPath := oldname + " -> " + newname
	n, ok := m.nodes[from]
	if m.closed {
		return m.err("rename", opPath, ErrClosed)
	}
	if !ok {
		return m.err("rename", opPath, unix.ENOENT)
	}
	if err := m.checkParentLocked(to); err != nil {
		return m.err("rename", opPath, err)
	}
	if dst, ok := m.nodes[to]; ok && dst.dir != n.dir {
		return m.err("rename", opPath, unix.EISDIR)
	}
	if from == to {
		return nil
	}
	prefix := from + string(filepath.Separator)
	if n.dir && strings.HasPrefix(to, prefix) {
		return m.err("rename", opPath, unix.EINVAL) // into its own subtree
	}
	if dst, ok := m.nodes[to]; ok && dst.dir && len(m.childrenLocked(to)) > 0 {
		return m.err("rename", opPath, unix.ENOTEMPTY)
	}
	if old, ok := m.nodes[to]; ok && old != n {
		m.used -= max(int64(len(old.data)), old.allocated)
	}
	delete(m.nodes, from)
	m.nodes[to] = n
	if n.dir { // move the subtree; collect first, the map must not change while ranging
		var moved []string
		for p := range m.nodes {
			if strings.HasPrefix(p, prefix) {
				moved = append(moved, p)
			}
		}
		for _, p := range moved {
			child := m.nodes[p]
			delete(m.nodes, p)
			m.nodes[to+string(filepath.Separator)+p[len(prefix):]] = child
		}
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	p := cleanPath(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.lookupLocked(p)
	switch {
	case m.closed:
		return nil, m.err("list", dir, ErrClosed)
	case !ok:
		return nil, m.err("list", dir, unix.ENOENT)
	case !n.dir:
		return nil, m.err("list", dir, unix.ENOTDIR)
	}
	names := m.childrenLocked(p)
	if names == nil {
		names = []string{}
	}
	return names, nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string, _ fs.FileMode) error {
	p := cleanPath(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return m.err("mkdir", dir, ErrClosed)
	}
	var missing []string
	for q := p; !isRoot(q); q = filepath.Dir(q) {
		n, ok := m.nodes[q]
		if ok && !n.dir {
			return m.err("mkdir", dir, unix.ENOTDIR)
		}
		if ok {
			break
		}
		missing = append(missing, q)
	}
	for _, q := range missing {
		m.nodes[q] = &memNode{dir: true, modTime: time.Now()}
	}
	return nil
}

// SyncDir implements FS: the directory's current entries become durable.
func (m *MemFS) SyncDir(dir string) error {
	p := cleanPath(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.lookupLocked(p)
	switch {
	case m.closed:
		return m.err("syncdir", dir, ErrClosed)
	case !ok:
		return m.err("syncdir", dir, unix.ENOENT)
	case !n.dir:
		return m.err("syncdir", dir, unix.ENOTDIR)
	}
	for q := range m.durable {
		if filepath.Dir(q) == p && q != p {
			delete(m.durable, q)
		}
	}
	for q, child := range m.nodes {
		if filepath.Dir(q) == p && q != p {
			m.durable[q] = child
		}
	}
	return nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (FileInfo, error) {
	p := cleanPath(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.lookupLocked(p)
	if m.closed {
		return FileInfo{}, m.err("stat", name, ErrClosed)
	}
	if !ok {
		return FileInfo{}, m.err("stat", name, unix.ENOENT)
	}
	fi := FileInfo{Name: filepath.Base(p), Size: int64(len(n.data)), ModTime: n.modTime, Mode: 0o644}
	if n.dir {
		fi.Mode, fi.Size = fs.ModeDir|0o755, 0
	}
	return fi, nil
}

// FreeSpace implements FS.
func (m *MemFS) FreeSpace(string) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(max(m.capacity-m.used, 0)), nil
}

// Close implements FS. CrashClone still works on a closed MemFS.
func (m *MemFS) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return m.err("close", "fs", ErrClosed)
	}
	m.closed = true
	return nil
}

// memFile is an open MemFS file. Its state is guarded by fs.mu.
type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	writable bool
	closed   bool
	direct   bool // DirectWrites: writes must be DirectAlign-aligned, as on a real disk
}

func (f *memFile) Name() string { return f.name }

// beginLocked checks the handle can do op; the caller holds fs.mu.
func (f *memFile) beginLocked(op string, write bool) error {
	switch {
	case f.closed || f.fs.closed:
		return f.fs.err(op, f.name, ErrClosed)
	case write && !f.writable:
		return f.fs.err(op, f.name, unix.EBADF)
	}
	return nil
}

func (f *memFile) WriteAt(bufs [][]byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("write", true); err != nil {
		return 0, err
	}
	return f.writeLocked("write", bufs, off)
}

func (f *memFile) writeLocked(op string, bufs [][]byte, off int64) (int, error) {
	if off < 0 {
		return 0, f.fs.err(op, f.name, unix.EINVAL)
	}
	if f.direct {
		if err := checkDirect(off, totalLen(bufs)); err != nil {
			return 0, f.fs.err(op, f.name, err)
		}
	}
	n := f.node
	data := joinBufs(bufs)
	var err error
	if room := f.fs.roomLocked(n, off, int64(len(data))); room < int64(len(data)) {
		data, err = data[:room], unix.ENOSPC
	}
	if len(data) > 0 {
		before := max(int64(len(n.data)), n.allocated)
		w := memWrite{off: off, data: data}
		n.data = w.applyTo(n.data)
		n.pending = append(n.pending, w)
		n.modTime = time.Now()
		f.fs.used += max(int64(len(n.data)), n.allocated) - before
	}
	return len(data), f.fs.err(op, f.name, err)
}

// roomLocked returns how many of length bytes at off fit on the "disk".
func (m *MemFS) roomLocked(n *memNode, off, length int64) int64 {
	footprint := max(int64(len(n.data)), n.allocated)
	growth := max(off+length-footprint, 0)
	free := m.capacity - m.used
	if growth <= free {
		return length
	}
	return max(length-(growth-free), 0)
}

func joinBufs(bufs [][]byte) []byte {
	out := make([]byte, 0, totalLen(bufs))
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}

func (f *memFile) Append(bufs [][]byte) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("append", true); err != nil {
		return 0, err
	}
	off := int64(len(f.node.data))
	_, err := f.writeLocked("append", bufs, off)
	return off, err
}

func (f *memFile) WriteAtSync(bufs [][]byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("write+datasync", true); err != nil {
		return 0, err
	}
	n, err := f.writeLocked("write+datasync", bufs, off)
	if err == nil {
		f.node.syncLocked()
	}
	return n, err
}

func (n *memNode) syncLocked() {
	n.synced = append(n.synced[:0], n.data...)
	n.pending = nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("read", false); err != nil {
		return 0, err
	}
	return f.readLocked(p, off)
}

// ReadDirect implements File: there is no page cache to bypass, but the
// alignment rule is enforced, as DirectWrites does.
func (f *memFile) ReadDirect(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("read direct", false); err != nil {
		return 0, err
	}
	if err := checkDirectRead(p, off); err != nil {
		return 0, f.fs.err("read direct", f.name, err)
	}
	return f.readLocked(p, off)
}

func (f *memFile) readLocked(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, f.fs.err("read", f.name, unix.EINVAL)
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Datasync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("datasync", false); err != nil {
		return err
	}
	f.node.syncLocked()
	return nil
}

func (f *memFile) Preallocate(off, length int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("preallocate", true); err != nil {
		return err
	}
	n := f.node
	if room := f.fs.roomLocked(n, off, length); room < length {
		return f.fs.err("preallocate", f.name, unix.ENOSPC)
	}
	before := max(int64(len(n.data)), n.allocated)
	n.allocated = max(n.allocated, off+length)
	f.fs.used += max(int64(len(n.data)), n.allocated) - before
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("truncate", true); err != nil {
		return err
	}
	n := f.node
	if size < 0 {
		return f.fs.err("truncate", f.name, unix.EINVAL)
	}
	if room := f.fs.roomLocked(n, 0, size); room < size {
		return f.fs.err("truncate", f.name, unix.ENOSPC)
	}
	before := max(int64(len(n.data)), n.allocated)
	w := memWrite{off: size, trunc: true}
	n.data = w.applyTo(n.data)
	n.pending = append(n.pending, w)
	// As Linux's: blocks past the new end are freed, preallocated ones
	// (fallocate with KEEP_SIZE) too.
	n.allocated = min(n.allocated, size)
	f.fs.used += max(int64(len(n.data)), n.allocated) - before
	return nil
}

func (f *memFile) Size() int64 {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.node.data))
}

// WriteBack is a no-op: the mem backend has no page cache.
func (f *memFile) WriteBack(off, length int64) error { return nil }

func (f *memFile) DropCache() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.beginLocked("fadvise", false)
}

// DirectWrites implements File: the memory has no page cache to bypass, but
// the alignment rule is enforced, so a caller that breaks it fails in tests
// run on MemFS as it would on a disk.
func (f *memFile) DirectWrites() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("open direct", true); err != nil {
		return err
	}
	f.direct = true
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return f.fs.err("close", f.name, ErrClosed)
	}
	f.closed = true
	return nil
}
