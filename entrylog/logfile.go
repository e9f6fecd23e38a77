package entrylog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/engine"
)

// logFile is one open entry log. Readers pin it (refs) for the length of a
// read; a retired log is closed and removed only once no reader pins it.
type logFile struct {
	id   uint64
	path string
	f    engine.File

	// Guarded by logSet.mu.
	refs    int
	retired bool
	drained chan struct{} // closed once retired and unpinned
}

// logSet is a directory's entry logs: the open ones by id, and the writer
// of the current one.
//
// Lock rules: mu guards files and each logFile's refs/retired; nothing
// blocks under it. The writer fields (cur, off, nextID) belong to whoever
// holds the shard's writeMu; only rotation changes cur, under writeMu.
type logSet struct {
	fs    engine.FS
	dir   string
	limit int64
	step  int64     // preallocation step (Options.PreallocSize)
	space SpaceFunc // may be nil
	log   *slog.Logger
	hook  func(string)

	mu struct {
		sync.Mutex
		files map[uint64]*logFile
	}

	// Writer state, guarded by the shard's writeMu.
	cur       *logFile
	off       int64 // where the next record goes in cur
	allocated int64 // cur is preallocated up to here
	nextID    uint64
	// wbFrom is where the previous write into cur began: write() hands
	// the device that write and the new one together, waiting first for
	// the previous one's writeback, so a flush reaches the device one
	// chunk at a time and never queues more than a chunk or two in front
	// of the journal's syncs (the same device in small setups).
	wbFrom int64
	// direct: logs are written with direct I/O (Options.BufferedWrites
	// unset, and the file system has it). tail then holds the bytes of the
	// last partial block, from alignDown(off) to off, not yet written: a
	// direct write covers whole blocks only, and a block once written with
	// a record that may be committed is never written again (a torn
	// rewrite could damage it), so endWrite pads the tail to its block and
	// the next write starts on a fresh one.
	direct bool
	tail   []byte
	// directReads: records are read with direct I/O (shard.readSpan), set
	// while logs are written direct; cleared for good where the file system
	// has none. Read by every reader, so atomic.
	directReads atomic.Bool
}

func newLogSet(fs engine.FS, dir string, opts *Options, log *slog.Logger) *logSet {
	s := &logSet{fs: fs, dir: dir, limit: opts.LogSizeLimit, step: opts.PreallocSize, space: opts.Space,
		log: log, hook: opts.hook, direct: !opts.BufferedWrites}
	s.directReads.Store(s.direct)
	s.mu.files = make(map[uint64]*logFile)
	return s
}

func (s *logSet) path(id uint64) string { return filepath.Join(s.dir, logFileName(id)) }

// openExisting opens log id read-only and checks its header.
func (s *logSet) openExisting(id uint64) (*logFile, error) {
	p := s.path(id)
	f, err := s.fs.Open(p)
	if err != nil {
		return nil, fmt.Errorf("entry log %s: open: %w", p, err)
	}
	hdr := make([]byte, logHeaderUsed)
	if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("entry log %s: read header: %w", p, err)
	}
	h, err := decodeLogHeader(hdr, p)
	if err == nil && h.logID != id {
		err = engine.CorruptionErrorf("entry log %s: header names log %016x", p, h.logID)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &logFile{id: id, path: p, f: f}, nil
}

// releaseTail gives back the blocks preallocated past an existing log's
// end: every log found at open is sealed (a new one starts), and the one
// that was current when the storage stopped still holds its preallocated
// tail, which rotate releases for logs sealed while running. Without it
// every restart kept up to a preallocation step of disk until GC removed
// the log. Every log, not only the last: logs of earlier versions kept
// such tails from each restart, and a truncate to a log's own size is
// cheap and changes no byte of it.
func (s *logSet) releaseTail(path string, size int64) error {
	f, err := s.fs.OpenReadWrite(path)
	if err == nil {
		err = errors.Join(f.Truncate(size), f.Close())
	}
	if err != nil {
		return fmt.Errorf("entry log %s: release preallocated space: %w", path, err)
	}
	return nil
}

// add registers an open log for reading.
func (s *logSet) add(lf *logFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.files[lf.id] = lf
}

// ids returns the open logs' ids.
func (s *logSet) ids() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, 0, len(s.mu.files))
	for id := range s.mu.files {
		out = append(out, id)
	}
	return out
}

// count returns how many logs are open.
func (s *logSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.files)
}

// acquire pins log id for a read. It fails if the log is not open: it was
// retired (the caller looks the entry up again) or never existed.
func (s *logSet) acquire(id uint64) (*logFile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf := s.mu.files[id]
	if lf == nil {
		return nil, false
	}
	lf.refs++
	return lf, true
}

// release unpins a log acquired for a read.
func (s *logSet) release(lf *logFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf.refs--
	if lf.retired && lf.refs == 0 {
		close(lf.drained)
	}
}

// retire takes log id out of the set: no new reader can pin it. The
// returned channel closes when the last reader unpins it.
func (s *logSet) retire(id uint64) (*logFile, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf := s.mu.files[id]
	if lf == nil {
		return nil, nil
	}
	delete(s.mu.files, id)
	lf.retired = true
	lf.drained = make(chan struct{})
	if lf.refs == 0 {
		close(lf.drained)
	}
	return lf, lf.drained
}

// remove closes and deletes a retired log once no reader pins it.
func (s *logSet) remove(ctx context.Context, lf *logFile, drained <-chan struct{}) error {
	select {
	case <-drained:
	case <-ctx.Done():
		// Readers pin a log for one read; should one take longer than
		// the caller's patience, leave the file to a later open's cleanup.
		return fmt.Errorf("entry log %s: waiting for readers: %w", lf.path, ctx.Err())
	}
	err := lf.f.Close()
	if rerr := s.fs.Remove(lf.path); rerr != nil && !engine.IsNotExist(rerr) {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("entry log %s: remove: %w", lf.path, err)
	}
	s.hook("gc:log-removed")
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("entry log %s: sync directory after remove: %w", s.dir, err)
	}
	return nil
}

// closeAll closes every open log.
func (s *logSet) closeAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for id, lf := range s.mu.files {
		err = errors.Join(err, lf.f.Close())
		delete(s.mu.files, id)
	}
	s.cur = nil
	return err
}

// startNew creates log nextID as the current log: header synced, a first
// step preallocated, name durable. A log it could not make is removed, so
// a full disk keeps no half-made file. Caller holds writeMu.
func (s *logSet) startNew() error {
	id := s.nextID
	p := s.path(id)
	step, err := s.allocStep(0)
	if err != nil {
		return fmt.Errorf("entry log %s: create: %w", p, err)
	}
	f, err := s.fs.Create(p)
	if err != nil {
		return fmt.Errorf("entry log %s: create: %w", p, err)
	}
	err = s.directWrites(f)
	if err == nil {
		err = s.initFile(f, step)
	}
	if err != nil {
		f.Close()
		if rerr := s.fs.Remove(p); rerr != nil && !engine.IsNotExist(rerr) {
			s.log.Warn("entry log: could not remove a log it failed to make", "log", p, "err", rerr)
		}
		return fmt.Errorf("entry log %s: initialise: %w", p, err)
	}
	s.nextID++
	lf := &logFile{id: id, path: p, f: f}
	s.add(lf)
	s.cur, s.off, s.allocated, s.wbFrom, s.tail = lf, LogHeaderSize, LogHeaderSize+step, LogHeaderSize, nil
	s.hook("log:created")
	return nil
}

// directWrites switches a new log's writes past the page cache when the
// set writes direct. A file system without direct I/O turns the set to
// buffered writes for good, said once. Caller holds writeMu.
func (s *logSet) directWrites(f engine.File) error {
	if !s.direct {
		return nil
	}
	err := f.DirectWrites()
	if errors.Is(err, engine.ErrDirectUnsupported) {
		s.direct = false
		s.directReads.Store(false)
		s.log.Warn("entry log: the file system has no direct I/O; writing through the page cache", "dir", s.dir, "err", err)
		return nil
	}
	return err
}

// initFile writes the header durably, preallocates the first step and
// makes the log's name durable: an index entry may point into it only
// after all three.
func (s *logSet) initFile(f engine.File, step int64) error {
	hdr := logHeader{logID: s.nextID, created: time.Now().UnixNano()}.encode()
	if _, err := f.WriteAtSync([][]byte{hdr}, 0); err != nil {
		return err
	}
	if step > 0 {
		if err := f.Preallocate(LogHeaderSize, step); err != nil {
			return err
		}
	}
	return s.fs.SyncDir(s.dir)
}

// preallocFreeShare: no preallocation takes more than this share of the
// free space, so a small disk starts and a nearly full one keeps the rest
// for the index and the journal.
const preallocFreeShare = 8

// allocStep returns how many bytes to preallocate when at least need are
// required: the step, at most a share of the free space, then as the
// SpaceFunc decides. Fewer than need fails with ErrNoSpace.
func (s *logSet) allocStep(need int64) (int64, error) {
	want := max(s.step, need)
	if free, err := s.fs.FreeSpace(s.dir); err == nil {
		want = min(want, max(need, int64(free)/preallocFreeShare))
	}
	if s.space != nil {
		got, err := s.space(s.dir, need, want)
		if err != nil {
			return 0, err
		}
		want = min(want, got)
	}
	if want < need {
		return 0, fmt.Errorf("%w: %s needs %d bytes, the disk allows %d", ErrNoSpace, s.dir, need, want)
	}
	return want, nil
}

// ensureAllocated grows the current log's preallocation to hold n more
// bytes at off, so a full disk is met here and not half-way through a
// write. Caller holds writeMu.
func (s *logSet) ensureAllocated(n int64) error {
	if s.off+n <= s.allocated {
		return nil
	}
	grow, err := s.allocStep(s.off + n - s.allocated)
	if err != nil {
		return fmt.Errorf("entry log %s: grow: %w", s.cur.path, err)
	}
	if err := s.cur.f.Preallocate(s.allocated, grow); err != nil {
		return fmt.Errorf("entry log %s: preallocate %d bytes at %d: %w", s.cur.path, grow, s.allocated, err)
	}
	s.allocated += grow
	return nil
}

// rewind moves the write position back to off in log id, if that is still
// the current log: bytes written there were never committed, and writing
// them again after a full disk should not take new space.
func (s *logSet) rewind(id uint64, off int64) {
	if s.cur != nil && s.cur.id == id {
		s.off = off
		s.wbFrom = min(s.wbFrom, off)
		s.tail = nil // off is where a write started: block-aligned when direct
	}
}

// room reports whether a record of n bytes fits in the current log after
// pending bytes not yet written. An empty log takes any one record, so an
// entry larger than the limit still has a home.
func (s *logSet) room(pending, n int64) bool {
	end := s.off + pending + n
	if s.direct {
		end = alignBlock(end) // endWrite pads the last block
	}
	return end <= s.limit || (s.off == LogHeaderSize && pending == 0)
}

// alignBlock rounds n up to a direct write's block.
func alignBlock(n int64) int64 { return (n + engine.DirectAlign - 1) &^ (engine.DirectAlign - 1) }

// write appends bufs (n bytes) to the current log at off. When direct, the
// whole blocks among the tail and bufs are written and the rest becomes the
// tail; endWrite must follow before the bytes are synced. Caller holds
// writeMu.
func (s *logSet) write(bufs [][]byte, n int64) error {
	if n == 0 {
		return nil
	}
	if err := s.ensureAllocated(n); err != nil {
		return err
	}
	if s.direct {
		return s.writeBlocks(bufs, n)
	}
	if _, err := s.cur.f.WriteAt(bufs, s.off); err != nil {
		return fmt.Errorf("entry log %s: write at %d: %w", s.cur.path, s.off, err)
	}
	if err := s.cur.f.WriteBack(s.wbFrom, s.off+n-s.wbFrom); err != nil {
		return fmt.Errorf("entry log %s: start writeback at %d: %w", s.cur.path, s.wbFrom, err)
	}
	s.wbFrom = s.off
	s.off += n
	return nil
}

// writeBlocks is write for a direct log.
func (s *logSet) writeBlocks(bufs [][]byte, n int64) error {
	start := s.off - int64(len(s.tail))
	all := append([][]byte{s.tail}, bufs...)
	total := int64(len(s.tail)) + n
	whole := total &^ (engine.DirectAlign - 1)
	if whole > 0 {
		if _, err := s.cur.f.WriteAt(headBufs(all, whole), start); err != nil {
			return fmt.Errorf("entry log %s: write at %d: %w", s.cur.path, start, err)
		}
	}
	tail := make([]byte, 0, engine.DirectAlign)
	for _, b := range skipBufs(all, whole) {
		tail = append(tail, b...)
	}
	s.tail = tail
	s.off += n
	return nil
}

// endWrite writes the tail of a direct log padded with zeros to its block,
// so everything written is on the device once synced and the next write
// starts on a block of its own. Caller holds writeMu.
func (s *logSet) endWrite() error {
	if !s.direct || len(s.tail) == 0 {
		return nil
	}
	start := s.off - int64(len(s.tail))
	pad := engine.DirectAlign - int64(len(s.tail))
	if err := s.ensureAllocated(pad); err != nil {
		return err
	}
	block := append(s.tail, make([]byte, pad)...)
	if _, err := s.cur.f.WriteAt([][]byte{block}, start); err != nil {
		return fmt.Errorf("entry log %s: write at %d: %w", s.cur.path, start, err)
	}
	s.off, s.tail = start+engine.DirectAlign, nil
	return nil
}

// headBufs returns the first n bytes of bufs (n at most their total).
func headBufs(bufs [][]byte, n int64) [][]byte {
	out := make([][]byte, 0, len(bufs))
	for _, b := range bufs {
		if n <= 0 {
			break
		}
		k := min(int64(len(b)), n)
		out = append(out, b[:k])
		n -= k
	}
	return out
}

// skipBufs returns bufs without their first n bytes.
func skipBufs(bufs [][]byte, n int64) [][]byte {
	for len(bufs) > 0 && n >= int64(len(bufs[0])) {
		n -= int64(len(bufs[0]))
		bufs = bufs[1:]
	}
	if len(bufs) > 0 && n > 0 {
		bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
	}
	return bufs
}

// rotate seals the current log (its data made durable, preallocated space
// past its end released) and starts the next. Sealing syncs, so whoever
// wrote into the old log needs only sync the current one afterwards.
func (s *logSet) rotate() error {
	old := s.cur
	if err := s.endWrite(); err != nil {
		return err
	}
	if err := old.f.Truncate(s.off); err != nil {
		return fmt.Errorf("entry log %s: release preallocated space: %w", old.path, err)
	}
	s.allocated = s.off // should startNew find no space, old stays current
	if err := old.f.Datasync(); err != nil {
		return fmt.Errorf("entry log %s: datasync on seal: %w", old.path, err)
	}
	s.log.Debug("entry log sealed", "log", old.path, "bytes", s.off)
	return s.startNew()
}

// sync makes everything written to the current log durable.
func (s *logSet) sync() error {
	if err := s.cur.f.Datasync(); err != nil {
		return fmt.Errorf("entry log %s: datasync: %w", s.cur.path, err)
	}
	return nil
}

// currentID is the id of the log being written. Caller holds writeMu.
func (s *logSet) currentID() uint64 { return s.cur.id }
