package journal

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/magnetar-io/magnetar/engine"
)

// scanWindow is how much replay reads at a time.
const scanWindow = 1 << 20

// recover lists the directory, reads the checkpoint, replays every file
// from it, truncates torn tails and retires files the checkpoint covers.
func (j *Journal) recover(replay func(Entry) error) error {
	ids, err := j.listFiles()
	if err != nil {
		return err
	}
	mark, hasMark, err := j.readCheckpoint()
	if err != nil {
		return err
	}
	j.nextID = 1
	for _, id := range append(slices.Clone(ids), j.recycled...) {
		j.nextID = max(j.nextID, id+1)
	}
	if hasMark {
		j.nextID = max(j.nextID, mark.FileID+1)
		j.lastMark, j.checkpointed = mark, mark
	}
	for i, id := range ids {
		if hasMark && id < mark.FileID {
			j.live = append(j.live, id)
			continue
		}
		from := int64(BlockSize)
		if hasMark && id == mark.FileID {
			from = mark.Offset
		}
		end, keep, err := j.replayFile(id, from, i == len(ids)-1, replay)
		if err != nil {
			return err
		}
		if keep {
			j.live = append(j.live, id)
			j.lastMark = Mark{FileID: id, Offset: end}
		}
	}
	if hasMark {
		j.filesMu.Lock()
		defer j.filesMu.Unlock()
		return j.retireBefore(mark.FileID)
	}
	return nil
}

// listFiles returns the journal file ids in order and fills j.recycled.
func (j *Journal) listFiles() ([]uint64, error) {
	names, err := j.fs.List(j.dir)
	if err != nil {
		return nil, fmt.Errorf("journal %s: list: %w", j.dir, err)
	}
	var ids []uint64
	for _, n := range names {
		if id, ok := parseFileName(n); ok {
			ids = append(ids, id)
		} else if id, ok := parseRecycledName(n); ok {
			j.recycled = append(j.recycled, id)
		} else if isSpareName(n) {
			// A spare being filled when the bookie stopped: never a
			// journal file, so nothing to keep.
			if err := j.fs.Remove(j.path(n)); err != nil && !engine.IsNotExist(err) {
				return nil, fmt.Errorf("journal %s: remove unfinished spare %s: %w", j.dir, n, err)
			}
		}
	}
	slices.Sort(ids)
	slices.Sort(j.recycled)
	return ids, nil
}

func (j *Journal) readCheckpoint() (Mark, bool, error) {
	b, err := engine.ReadFile(j.fs, j.path(checkpointFile))
	if engine.IsNotExist(err) {
		return Mark{}, false, nil
	}
	if err != nil {
		return Mark{}, false, fmt.Errorf("journal %s: read checkpoint: %w", j.dir, err)
	}
	m, err := decodeMark(b, j.path(checkpointFile))
	return m, err == nil, err
}

// replayFile replays one file from offset from and returns the end of its
// valid groups. keep is false for a last file whose header never became
// durable (a crash while creating it): it is removed.
func (j *Journal) replayFile(id uint64, from int64, last bool, replay func(Entry) error) (end int64, keep bool, err error) {
	name := j.path(fileName(id))
	f, err := j.fs.OpenReadWrite(name)
	if err != nil {
		return 0, false, fmt.Errorf("journal: open %s: %w", name, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("journal: close %s after replay: %w", name, cerr)
		}
	}()
	hdr := make([]byte, BlockSize)
	n, rerr := f.ReadAt(hdr, 0)
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		return 0, false, fmt.Errorf("journal: read header of %s: %w", name, rerr)
	}
	h, herr := decodeFileHeader(hdr[:n], name)
	switch {
	case herr != nil && last && allZero(hdr[:n]):
		j.log.Warn("journal: removing a file whose creation did not complete", "file", name)
		return 0, false, j.fs.Remove(name)
	case herr != nil:
		return 0, false, fmt.Errorf("journal: %w", herr)
	case h.fileID != id:
		return 0, false, engine.CorruptionErrorf("journal %s: header says file %016x", name, h.fileID)
	}
	end, err = j.replayGroups(f, id, from, replay)
	return end, true, err
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// replayGroups replays groups from off until the first invalid one, then
// decides whether that is the end of the log (truncated if it holds
// anything) or corruption of durable data.
func (j *Journal) replayGroups(f engine.File, id uint64, off int64, replay func(Entry) error) (int64, error) {
	size := f.Size()
	var buf []byte
	for off < size {
		h, reason, err := j.replayGroup(f, id, off, size, &buf, replay)
		if err != nil {
			return 0, err
		}
		if reason != "" {
			return off, j.endOfLog(f, id, off, size, reason)
		}
		j.seq = max(j.seq, h.seq)
		off += groupSpan(int(h.recordsLen))
	}
	return off, nil
}

// replayGroup reads and replays the group at off; reason is non-empty when
// it is invalid.
func (j *Journal) replayGroup(f engine.File, id uint64, off, size int64, buf *[]byte, replay func(Entry) error) (groupHeader, string, error) {
	hb, err := readAt(f, buf, off, min(groupHeaderSize, size-off))
	if err != nil {
		return groupHeader{}, "", err
	}
	h, reason := parseGroupHeader(hb, id)
	if reason != "" {
		return h, reason, nil
	}
	if off+groupHeaderSize+int64(h.recordsLen) > size {
		return h, "group runs past the end of the file", nil
	}
	b, err := readAt(f, buf, off, groupHeaderSize+int64(h.recordsLen))
	if err != nil {
		return h, "", err
	}
	reason, err = parseRecords(b[groupHeaderSize:], h.count, replay)
	if err != nil {
		return h, "", fmt.Errorf("journal: replaying %s at %d: %w", fileName(id), off, err)
	}
	return h, reason, nil
}

// readAt reads n bytes at off into *buf (grown as needed).
func readAt(f engine.File, buf *[]byte, off, n int64) ([]byte, error) {
	if int64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("journal: read %s at %d: %w", f.Name(), off, err)
	}
	return b, nil
}

// endOfLog handles an invalid group at off. If a valid group later in the
// file claims bytes at or past off were durable, durable data is damaged:
// corruption. Otherwise off is the end of the log and a torn tail there
// is truncated.
func (j *Journal) endOfLog(f engine.File, id uint64, off, size int64, reason string) error {
	claimAt, claim, err := findDurableClaim(f, id, off, size)
	if err != nil {
		return err
	}
	if claimAt > 0 {
		return engine.CorruptionErrorf("journal %s: invalid group at offset %d (%s), but the group at %d was written after everything below %d was durable",
			f.Name(), off, reason, claimAt, claim)
	}
	if reason == "no group magic" || strings.HasPrefix(reason, staleGroupReason) {
		return nil // never written, zeros from preallocation, or a recycled file's old groups
	}
	j.log.Warn("journal: truncating a torn tail", "file", f.Name(), "offset", off, "reason", reason)
	if err := f.Truncate(off); err != nil {
		return fmt.Errorf("journal: truncate %s at %d: %w", f.Name(), off, err)
	}
	if err := f.Datasync(); err != nil {
		return fmt.Errorf("journal: sync %s after truncating: %w", f.Name(), err)
	}
	return nil
}

// findDurableClaim scans the block boundaries after bad for a valid group
// of this file whose durableBefore is past bad.
func findDurableClaim(f engine.File, id uint64, bad, size int64) (int64, uint64, error) {
	buf := make([]byte, scanWindow)
	for start := bad + BlockSize; start < size; start += scanWindow {
		n := min(scanWindow, size-start)
		if _, err := f.ReadAt(buf[:n], start); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("journal: scan %s at %d: %w", f.Name(), start, err)
		}
		for p := int64(0); p+groupHeaderSize <= n; p += BlockSize {
			h, reason := parseGroupHeader(buf[p:n], id)
			if reason == "" && h.durableBefore > uint64(bad) {
				return start + p, h.durableBefore, nil
			}
		}
	}
	return 0, 0, nil
}
