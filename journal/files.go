package journal

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/magnetar-io/magnetar/engine"
)

func (j *Journal) path(name string) string { return filepath.Join(j.dir, name) }

// rotate opens the next journal file as the current one (at Open).
func (j *Journal) rotate() error {
	seg, err := j.createSegment(j.takeID())
	if err != nil {
		return err
	}
	j.use(seg)
	return nil
}

// use makes seg the current file.
func (j *Journal) use(seg *segment) {
	j.cur = seg
	j.mu.Lock()
	j.curID = seg.id
	if j.lastMark == (Mark{}) {
		j.lastMark = Mark{FileID: seg.id, Offset: BlockSize}
	}
	j.mu.Unlock()
	j.wakeSpareFiller() // the pool may be empty now
}

// takeID returns a new file id. An id taken for a file that was not made
// leaves a gap, which replay does not mind.
func (j *Journal) takeID() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	id := j.nextID
	j.nextID++
	return id
}

// rotateForWrite opens the next file, then closes the current one once
// everything in it is durable. In pipeline mode it waits for the sync loop
// to sync the old file first, so no group of the new file can become
// durable before the old file's last groups (replay stops at the first
// torn group). The next file is made first so that a full disk leaves the
// current file in place (commit tries again with the next group).
func (j *Journal) rotateForWrite() error {
	seg, err := j.createSegment(j.takeID())
	if err != nil {
		return err
	}
	old := j.cur
	j.cur = nil // closed below whatever happens; Close must not close it again
	switch {
	case j.syncq != nil:
		done := make(chan struct{})
		j.syncq <- syncItem{seg: old, closeAfter: true, done: done}
		<-done
	default:
		var err error
		if j.opts.SkipSync {
			err = old.f.Datasync()
		}
		if err = errors.Join(err, old.f.Close()); err != nil {
			seg.f.Close()
			return fmt.Errorf("journal %s: closing %s: %w", j.dir, fileName(old.id), err)
		}
	}
	if err := j.failure(); err != nil {
		seg.f.Close()
		return err
	}
	j.use(seg)
	return nil
}

// createSegment makes journal file id durable with its header: a recycled
// file when one is available and reuse is on (it needs no new space), else
// a new one preallocated as the disk allows. A new file that could not be
// made is removed, so a full disk keeps no half-made file.
func (j *Journal) createSegment(id uint64) (*segment, error) {
	j.filesMu.Lock()
	defer j.filesMu.Unlock()
	hdr := fileHeader{fileID: id, created: time.Now().UnixNano()}.encode()
	if r, ok := j.popRecycled(); ok {
		seg, err := j.reuse(r, id, hdr)
		if err != nil {
			return nil, fmt.Errorf("journal: reuse %s as %s: %w", recycledName(r), fileName(id), err)
		}
		return seg, nil
	}
	step, err := j.allocStep(0)
	if err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", fileName(id), err)
	}
	name := j.path(fileName(id))
	f, err := j.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", name, err)
	}
	err = j.directWrites(f)
	if err == nil {
		err = j.initFile(f, hdr, step)
	}
	if err != nil {
		f.Close()
		if rerr := j.fs.Remove(name); rerr != nil && !engine.IsNotExist(rerr) {
			j.log.Warn("journal: could not remove a file it failed to make", "file", name, "err", rerr)
		}
		return nil, fmt.Errorf("journal: init %s: %w", name, err)
	}
	j.addLive(id)
	return &segment{id: id, f: f, offset: BlockSize, allocated: BlockSize + step, written: BlockSize}, nil
}

// preallocFreeShare: no preallocation takes more than this share of the
// free space, so a small disk starts and a nearly full one keeps the rest
// for checkpoints and the ledger storage's own flushes.
const preallocFreeShare = 8

// allocStep returns how many bytes to preallocate when at least need are
// required: the configured step, at most a share of the free space, then
// as Options.Space decides. Fewer than need fails with ErrNoSpace.
func (j *Journal) allocStep(need int64) (int64, error) {
	want := max(j.opts.PreallocSize, need)
	if free, err := j.fs.FreeSpace(j.dir); err == nil {
		want = min(want, max(need, alignDown(int64(free)/preallocFreeShare)))
	}
	if j.opts.Space != nil {
		got, err := j.opts.Space(j.dir, need, want)
		if err != nil {
			return 0, err
		}
		want = min(want, got)
	}
	if want < need {
		return 0, fmt.Errorf("%w: %s needs %d bytes to grow, the disk allows %d", ErrNoSpace, j.dir, need, want)
	}
	return want, nil
}

// directWrites switches a journal file's writes past the page cache unless
// the journal writes buffered. A file system without direct I/O turns the
// journal to buffered writes for good, said once. Caller holds filesMu.
func (j *Journal) directWrites(f engine.File) error {
	if j.buffered {
		return nil
	}
	err := f.DirectWrites()
	if errors.Is(err, engine.ErrDirectUnsupported) {
		j.buffered = true
		j.log.Warn("journal: the file system has no direct I/O; writing through the page cache", "dir", j.dir, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: direct writes to %s: %w", f.Name(), err)
	}
	return nil
}

func alignDown(n int64) int64 { return max(n, 0) &^ (BlockSize - 1) }

// initFile writes and syncs a header and preallocates prealloc bytes after
// it, then makes the file's name durable.
func (j *Journal) initFile(f engine.File, hdr []byte, prealloc int64) error {
	if _, err := f.WriteAt([][]byte{hdr}, 0); err != nil {
		return err
	}
	if prealloc > 0 {
		if err := f.Preallocate(BlockSize, prealloc); err != nil {
			return err
		}
	}
	if err := f.Datasync(); err != nil {
		return err
	}
	return j.fs.SyncDir(j.dir)
}

// reuse turns recycled file r into journal file id. The new header is
// durable before the rename, so a file under a journal name always
// carries its own id, and its stale groups fail the fileID check.
func (j *Journal) reuse(r, id uint64, hdr []byte) (*segment, error) {
	old, name := j.path(recycledName(r)), j.path(fileName(id))
	f, err := j.fs.OpenReadWrite(old)
	if err != nil {
		return nil, err
	}
	if err := j.directWrites(f); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.WriteAt([][]byte{hdr}, 0); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Datasync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := j.fs.Rename(old, name); err != nil {
		f.Close()
		return nil, err
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		f.Close()
		return nil, err
	}
	j.addLive(id)
	size := max(f.Size(), BlockSize)
	return &segment{id: id, f: f, offset: BlockSize, allocated: size, written: size}, nil
}

// ensureAllocated grows the current file's preallocation to hold span
// more bytes, by a step sized to the disk (allocStep).
func (j *Journal) ensureAllocated(span int64) error {
	seg := j.cur
	if seg.offset+span <= seg.allocated {
		return nil
	}
	grow, err := j.allocStep(alignUp(seg.offset + span - seg.allocated))
	if err != nil {
		return fmt.Errorf("journal: grow %s: %w", fileName(seg.id), err)
	}
	if err := seg.f.Preallocate(seg.allocated, grow); err != nil {
		return fmt.Errorf("journal: preallocate %s: %w", fileName(seg.id), err)
	}
	seg.allocated += grow
	return nil
}

func (j *Journal) addLive(id uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.live = append(j.live, id)
}

// leaveForWritten reports whether the writer should move to a pooled file
// before writing span more bytes: ZeroFill is on, the group would leave
// the current file's written blocks, and the pool has a file.
func (j *Journal) leaveForWritten(span int64) bool {
	if j.spare == nil || j.cur.offset == BlockSize || j.cur.offset+span <= j.cur.written {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.recycled) > 0
}

// addRecycled puts file id in the recycled pool, kept in id order.
func (j *Journal) addRecycled(id uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recycled = append(j.recycled, id)
	slices.Sort(j.recycled)
}

func (j *Journal) popRecycled() (uint64, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.opts.NoFileReuse || len(j.recycled) == 0 {
		return 0, false
	}
	r := j.recycled[0]
	j.recycled = j.recycled[1:]
	return r, true
}

// Checkpoint records that everything before m is durable elsewhere (the
// ledger storage flushed it). The mark is persisted first; then files
// wholly before it are recycled or deleted. Marks older than the last
// checkpoint are ignored.
func (j *Journal) Checkpoint(m Mark) error {
	if m.Offset < BlockSize || m.Offset%BlockSize != 0 {
		return fmt.Errorf("journal %s: checkpoint %v is not a group boundary", j.dir, m)
	}
	j.filesMu.Lock()
	defer j.filesMu.Unlock()
	if !j.checkpointed.Before(m) {
		return nil // a checkpoint going backwards would point into retired files
	}
	if err := engine.WriteFileAtomic(j.fs, j.path(checkpointFile), encodeMark(m)); err != nil {
		if engine.IsNoSpaceOnWrite(err) {
			// The old checkpoint stands; files are retired by a later one.
			return fmt.Errorf("%w: %s: write checkpoint: %w", ErrNoSpace, j.dir, err)
		}
		return fmt.Errorf("journal %s: write checkpoint: %w", j.dir, err)
	}
	j.checkpointed = m
	return j.retireBefore(m.FileID)
}

// retireBefore recycles or deletes every live file with an id below id.
// Caller holds filesMu.
func (j *Journal) retireBefore(id uint64) error {
	j.mu.Lock()
	var old []uint64
	for len(j.live) > 0 && j.live[0] < id && j.live[0] != j.curID {
		old = append(old, j.live[0])
		j.live = j.live[1:]
	}
	j.mu.Unlock()
	if len(old) == 0 {
		return nil
	}
	for _, f := range old {
		if err := j.retire(f); err != nil {
			return err
		}
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return fmt.Errorf("journal %s: sync dir after retiring files: %w", j.dir, err)
	}
	return nil
}

func (j *Journal) retire(id uint64) error {
	j.mu.Lock()
	recycle := !j.opts.NoFileReuse && len(j.recycled) < j.opts.MaxRecycledFiles
	j.mu.Unlock()
	name := j.path(fileName(id))
	if !recycle {
		if err := j.fs.Remove(name); err != nil && !engine.IsNotExist(err) {
			return fmt.Errorf("journal: remove %s: %w", name, err)
		}
		return nil
	}
	if err := j.fs.Rename(name, j.path(recycledName(id))); err != nil {
		return fmt.Errorf("journal: recycle %s: %w", name, err)
	}
	j.addRecycled(id)
	return nil
}
