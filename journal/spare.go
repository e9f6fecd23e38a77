package journal

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/engine"
)

// A journal file made by preallocation is unwritten extents on ext4 and
// XFS: every group written there makes its datasync commit the file
// system's extent conversion as well, a second device write and flush (one
// writer of 1 KiB adds: p50 298 µs against 195 µs over written blocks;
// TUNING.md, "Journal files zero-filled ahead of the writer"). Recycled files are written blocks, but a new bookie has none
// until its first checkpoints, and every file past the pool is new.
//
// So with Options.ZeroFill a goroutine keeps the recycled pool from being
// empty: it writes a spare file of zeros (spareMaxSize, at most
// MaxFileSize) under a spare name, at a bounded pace (ZeroFillRate, in
// small writes, so that a group's flush never waits behind much of it),
// syncs it, and renames it into the pool. The writer moves to a pooled
// file as soon as a group would leave the current file's written blocks,
// and reuses it as it reuses any recycled file: so the first file, made at
// Open by preallocation, is left once the first spare is ready, and files
// are then about spareMaxSize long while the filler keeps up. The spare is a file of its own, not the writer's: fill
// writes into the current file would leave its inode with conversions to
// commit, and the writer's next datasync would commit them.
//
// A spare name is never a journal file: Open removes leftovers of a crash.
// Zeros are what replay finds past the last group of any file anyway.

// spareChunk is one fill write. spareMaxSize keeps a fill short (four
// seconds at the default rate), so that the first spare is soon ready.
const (
	spareChunk   = 256 << 10
	spareMaxSize = 128 << 20
)

// errSpareStopped: Close stopped a fill in progress.
var errSpareStopped = errors.New("journal: spare fill stopped")

type spareFiller struct {
	wake chan struct{} // capacity 1: a wake-up while busy is kept
	quit chan struct{}
	done chan struct{}
	buf  []byte // zeros, aligned for direct writes
}

func spareName(id uint64) string { return fmt.Sprintf("spare-%016x.journal", id) }

func isSpareName(name string) bool {
	return strings.HasPrefix(name, "spare-") && strings.HasSuffix(name, ".journal")
}

func (j *Journal) startSpareFiller() {
	s := &spareFiller{wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		buf: engine.AlignedBuffer(spareChunk)}
	j.spare = s
	go j.fillSpares(s)
	j.wakeSpareFiller()
}

// wakeSpareFiller asks the filler to look at the pool (never blocks).
func (j *Journal) wakeSpareFiller() {
	if j.spare == nil {
		return
	}
	select {
	case j.spare.wake <- struct{}{}:
	default:
	}
}

// stopSpareFiller stops the filler and waits for it; a spare being filled
// is removed.
func (j *Journal) stopSpareFiller() {
	if j.spare != nil {
		close(j.spare.quit)
		<-j.spare.done
	}
}

func (j *Journal) fillSpares(s *spareFiller) {
	defer close(s.done)
	for {
		select {
		case <-s.quit:
			return
		case <-s.wake:
		}
		if !j.needsSpare() {
			continue
		}
		if err := j.makeSpare(s); err != nil {
			if errors.Is(err, errSpareStopped) {
				return
			}
			if !outOfSpace(err) {
				j.log.Warn("journal: could not prepare a spare file; new files are preallocated instead", "err", err)
			}
		}
	}
}

// needsSpare: the pool is empty and the journal writes direct and works.
func (j *Journal) needsSpare() bool {
	j.filesMu.Lock()
	buffered := j.buffered
	j.filesMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	return !buffered && j.failed == nil && len(j.recycled) == 0
}

// makeSpare writes, syncs and pools one spare file; on any failure the
// half-made file is removed.
func (j *Journal) makeSpare(s *spareFiller) error {
	size, err := j.spareSize()
	if err != nil || size == 0 {
		return err
	}
	id := j.takeID()
	name := j.path(spareName(id))
	f, err := j.fs.Create(name)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	err = j.fillSpare(s, f, size)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", name, cerr)
	}
	if err == nil {
		err = j.poolSpare(name, id)
	}
	if err != nil {
		if rerr := j.fs.Remove(name); rerr != nil && !engine.IsNotExist(rerr) {
			j.log.Warn("journal: could not remove a spare file it failed to make", "file", name, "err", rerr)
		}
	}
	return err
}

// spareSize is spareMaxSize (at most MaxFileSize) when the disk has room
// for it under the rule that one preallocation takes at most an eighth of
// the free space, and Options.Space allows it; else 0: no spare, new files
// are preallocated as they grow.
func (j *Journal) spareSize() (int64, error) {
	size := alignUp(min(j.opts.MaxFileSize, spareMaxSize))
	free, err := j.fs.FreeSpace(j.dir)
	if err != nil {
		return 0, fmt.Errorf("free space of %s: %w", j.dir, err)
	}
	if size > int64(free)/preallocFreeShare {
		return 0, nil
	}
	if j.opts.Space != nil {
		got, err := j.opts.Space(j.dir, size, size)
		if err != nil || got < size {
			return 0, nil // the disk's threshold says no; the writer meets it itself
		}
	}
	return size, nil
}

// fillSpare preallocates size bytes of f, writes zeros over them at
// ZeroFillRate and syncs them once at the end (a datasync every 16 MiB at
// 128 MiB/s measured a worse tail: TUNING.md).
func (j *Journal) fillSpare(s *spareFiller, f engine.File, size int64) error {
	if err := f.DirectWrites(); err != nil {
		return fmt.Errorf("direct writes to %s: %w", f.Name(), err)
	}
	if err := f.Preallocate(0, size); err != nil {
		return fmt.Errorf("preallocate %s: %w", f.Name(), err)
	}
	start := time.Now()
	for off := int64(0); off < size; {
		n := min(int64(len(s.buf)), size-off)
		if _, err := f.WriteAt([][]byte{s.buf[:n]}, off); err != nil {
			return fmt.Errorf("fill %s at %d: %w", f.Name(), off, err)
		}
		off += n
		// Paced: the fill is ahead of its rate only by what it just wrote.
		due := start.Add(time.Duration(float64(off) / float64(j.opts.ZeroFillRate) * float64(time.Second)))
		if err := s.sleepUntil(due); err != nil {
			return err
		}
	}
	return f.Datasync()
}

// sleepUntil waits until t (at once when t has passed) unless Close comes.
func (s *spareFiller) sleepUntil(t time.Time) error {
	select {
	case <-s.quit:
		return errSpareStopped
	case <-time.After(time.Until(t)):
		return nil
	}
}

// poolSpare renames a filled spare into the recycled pool.
func (j *Journal) poolSpare(name string, id uint64) error {
	j.filesMu.Lock()
	defer j.filesMu.Unlock()
	if err := j.fs.Rename(name, j.path(recycledName(id))); err != nil {
		return fmt.Errorf("pool %s: %w", name, err)
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return fmt.Errorf("pool %s: sync dir: %w", name, err)
	}
	j.addRecycled(id)
	return nil
}
