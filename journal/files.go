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
	seg, err := j.createSegment(j.nextID)
	if err != nil {
		return err
	}
	j.nextID++
	j.cur = seg
	j.mu.Lock()
	j.curID = seg.id
	if j.lastMark == (Mark{}) {
		j.lastMark = Mark{FileID: seg.id, Offset: BlockSize}
	}
	j.mu.Unlock()
	return nil
}

// rotateForWrite closes the current file once everything in it is durable
// and opens the next. In pipeline mode it waits for the sync loop to sync
// the old file first, so no group of the new file can become durable
// before the old file's last groups (replay stops at the first torn group).
func (j *Journal) rotateForWrite() error {
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
			return fmt.Errorf("journal %s: closing %s: %w", j.dir, fileName(old.id), err)
		}
	}
	if err := j.failure(); err != nil {
		return err
	}
	return j.rotate()
}

// createSegment makes journal file id durable with its header: a recycled
// file when one is available and reuse is on, else a new preallocated one.
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
	name := j.path(fileName(id))
	f, err := j.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", name, err)
	}
	if err := j.initFile(f, hdr, true); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: init %s: %w", name, err)
	}
	j.addLive(id)
	return &segment{id: id, f: f, offset: BlockSize, allocated: BlockSize + j.opts.PreallocSize}, nil
}

// initFile writes and syncs a header (and preallocates a fresh file), then
// makes the file's name durable.
func (j *Journal) initFile(f engine.File, hdr []byte, fresh bool) error {
	if _, err := f.WriteAt([][]byte{hdr}, 0); err != nil {
		return err
	}
	if fresh {
		if err := f.Preallocate(BlockSize, j.opts.PreallocSize); err != nil {
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
	return &segment{id: id, f: f, offset: BlockSize, allocated: max(f.Size(), BlockSize)}, nil
}

// ensureAllocated grows the current file's preallocation to hold span
// more bytes.
func (j *Journal) ensureAllocated(span int64) error {
	seg := j.cur
	if seg.offset+span <= seg.allocated {
		return nil
	}
	grow := max(j.opts.PreallocSize, alignUp(seg.offset+span-seg.allocated))
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
	j.mu.Lock()
	j.recycled = append(j.recycled, id)
	slices.Sort(j.recycled)
	j.mu.Unlock()
	return nil
}
