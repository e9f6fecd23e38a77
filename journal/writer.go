package journal

import (
	"time"

	"github.com/magnetar-io/magnetar/internal/invariants"
	"github.com/magnetar-io/magnetar/internal/stage"
)

// group is the adds one write carries.
type group struct {
	reqs  []*request
	bytes int // records bytes (headers + payloads)
}

// syncItem is a written group waiting for its datasync (pipeline mode).
type syncItem struct {
	seg        *segment
	end        Mark
	reqs       []*request
	closeAfter bool          // the segment was rotated away: close it once synced
	done       chan struct{} // closed once processed (rotation waits on it)
}

// writeLoop is the journal's single writer: it collects groups and
// commits them until Close, then drains what is queued.
func (j *Journal) writeLoop() {
	for {
		g, ok := j.collect()
		if !ok {
			return
		}
		if len(g.reqs) == 0 {
			continue
		}
		if err := j.failure(); err != nil {
			j.answer(g.reqs, Mark{}, err)
			continue
		}
		j.commit(g)
	}
}

// collect blocks for the first add, then takes whatever else is queued
// and lingers for more while the group is not full and adds keep coming.
func (j *Journal) collect() (group, bool) {
	var g group
	select {
	case r := <-j.queue:
		j.take(&g, r)
	case <-j.quit:
		select {
		case r := <-j.queue:
			j.take(&g, r)
		default:
			return g, false
		}
	case <-j.syncTick():
		j.periodicSync()
		return g, true
	}
	for !j.full(&g) {
		select {
		case r := <-j.queue:
			j.take(&g, r)
			continue
		default:
		}
		wait := j.linger(&g)
		if wait <= 0 {
			break
		}
		j.timer.Reset(wait)
		select {
		case r := <-j.queue:
			j.take(&g, r)
			if !j.timer.Stop() {
				<-j.timer.C
			}
			continue
		case <-j.timer.C:
		}
		break
	}
	return g, true
}

func (j *Journal) take(g *group, r *request) {
	j.opts.Stages.Since(stage.JournalQueue, r.enqueued)
	g.reqs = append(g.reqs, r)
	g.bytes += recordHeaderSize + len(r.payload)
	if len(g.reqs) > 1 {
		gap := max(r.enqueued.Sub(j.lastAdd), 0)
		j.arrival = (j.arrival*3 + gap) / 4
	}
	j.lastAdd = r.enqueued
}

func (j *Journal) full(g *group) bool {
	return g.bytes >= j.opts.BufferedWritesThreshold ||
		(j.opts.BufferedEntriesThreshold > 0 && len(g.reqs) >= j.opts.BufferedEntriesThreshold)
}

// linger says how long to wait for one more add: about two of the gaps
// between the adds of this group, so a burst that is still arriving is
// taken whole, and nothing once it pauses. A group of one add (a lone add,
// or the first of a burst already written) never waits, and no group
// waits past journalMaxGroupWaitMSec. Gaps between groups do not count:
// writers that wait for their previous add (a closed loop) would
// otherwise make the journal wait for adds that cannot come.
func (j *Journal) linger(g *group) time.Duration {
	if len(g.reqs) < 2 || j.opts.MaxGroupWait <= 0 {
		return 0
	}
	remaining := j.opts.MaxGroupWait - time.Since(g.reqs[0].enqueued)
	expect := 2 * j.arrival
	if expect > remaining {
		return 0
	}
	return max(expect, 5*time.Microsecond)
}

// syncTick fires the periodic datasync of SkipSync journals.
func (j *Journal) syncTick() <-chan time.Time {
	if !j.opts.SkipSync {
		return nil
	}
	return time.After(max(0, j.opts.SyncInterval-time.Since(j.lastSync)))
}

func (j *Journal) periodicSync() {
	j.lastSync = time.Now()
	if j.failure() != nil || j.cur == nil {
		return
	}
	if err := j.cur.f.Datasync(); err != nil {
		j.fail(err)
	}
}

// commit writes one group: rotating or growing the file first if needed,
// then either write+datasync and answer (serial), or write and hand the
// group to the sync loop (pipeline).
func (j *Journal) commit(g group) {
	span := groupSpan(g.bytes)
	if j.cur.offset+span > j.opts.MaxFileSize && j.cur.offset > BlockSize {
		if err := j.rotateForWrite(); err != nil {
			j.answer(g.reqs, Mark{}, j.fail(err))
			return
		}
	}
	if err := j.ensureAllocated(span); err != nil {
		j.answer(g.reqs, Mark{}, j.fail(err))
		return
	}
	bufs := j.encodeGroup(g, span)
	seg, off := j.cur, j.cur.offset
	if invariants.Enabled && (off%BlockSize != 0 || span%BlockSize != 0 || span < groupSpan(g.bytes)) {
		invariants.Failf("journal group at offset %d spanning %d bytes (%d of records) is not block-aligned", off, span, g.bytes)
	}
	end := Mark{FileID: seg.id, Offset: off + span}
	var err error
	written := time.Now()
	switch {
	case j.syncq != nil:
		_, err = seg.f.WriteAt(bufs, off)
		clear(bufs)
		if err == nil {
			j.opts.Stages.Since(stage.JournalWrite, written)
			seg.offset = end.Offset
			j.syncq <- syncItem{seg: seg, end: end, reqs: g.reqs}
			return
		}
	case j.opts.SkipSync:
		_, err = seg.f.WriteAt(bufs, off)
	default:
		_, err = seg.f.WriteAtSync(bufs, off)
	}
	j.opts.Stages.Since(stage.JournalWrite, written)
	clear(bufs) // the payloads are not the journal's to keep
	if err != nil {
		j.answer(g.reqs, Mark{}, j.fail(err))
		return
	}
	seg.offset = end.Offset
	j.acknowledge(end, g.reqs)
}

// encodeGroup lays the group out for one vectored write, without copying
// the payloads (Add's callers keep them unchanged until answered): the
// group header and the record headers go into the reusable header
// buffer, each payload is a buffer of its own, and zero padding ends the
// group at the block boundary. The bytes written are the format's, as if
// laid out in one buffer.
func (j *Journal) encodeGroup(g group, span int64) [][]byte {
	n := len(g.reqs)
	need := groupHeaderSize + n*recordHeaderSize
	if cap(j.hdrs) < need {
		j.hdrs = make([]byte, need)
	}
	h := j.hdrs[:need]
	j.seq++
	groupHeader{fileID: j.cur.id, durableBefore: uint64(j.durableBefore()), recordsLen: uint32(g.bytes),
		count: uint32(n), seq: j.seq}.put(h)
	iov := j.iov[:0]
	start, p := 0, groupHeaderSize // h[start:p] is the headers not yet in iov
	for _, r := range g.reqs {
		putRecordHeader(h[p:], r.ledgerID, r.entryID, r.payload, r.sum)
		p += recordHeaderSize
		if len(r.payload) > 0 {
			iov = append(iov, h[start:p], r.payload)
			start = p
		}
	}
	if start < p {
		iov = append(iov, h[start:p])
	}
	if pad := span - int64(groupHeaderSize+g.bytes); pad > 0 {
		iov = append(iov, zeroBlock[:pad])
	}
	j.iov = iov
	return iov
}

// zeroBlock pads groups to the block boundary (never written to).
var zeroBlock [BlockSize]byte

// durableBefore is the offset in the current file below which everything
// is durable: the group's own offset when every group is synced before the
// next is written, the last synced mark when writes overlap syncs.
func (j *Journal) durableBefore() int64 {
	if j.syncq == nil && !j.opts.SkipSync {
		return j.cur.offset
	}
	m := j.LastMark()
	if m.FileID == j.cur.id {
		return m.Offset
	}
	return BlockSize
}

// acknowledge records the new durable mark and answers the group's adds.
func (j *Journal) acknowledge(end Mark, reqs []*request) {
	j.mu.Lock()
	j.lastMark = end
	j.mu.Unlock()
	j.answer(reqs, end, nil)
}

func (j *Journal) answer(reqs []*request, m Mark, err error) {
	for _, r := range reqs {
		r.cb(m, err)
	}
}

// syncLoop makes written groups durable in pipeline mode: it takes every
// group written so far, datasyncs each file they touch once, in order, and
// answers them.
func (j *Journal) syncLoop(done chan struct{}) {
	defer close(done)
	for item, ok := <-j.syncq; ok; item, ok = <-j.syncq {
		items := []syncItem{item}
		for len(j.syncq) > 0 {
			items = append(items, <-j.syncq)
		}
		j.syncItems(items)
	}
}

func (j *Journal) syncItems(items []syncItem) {
	err := j.failure()
	for i, it := range items {
		if err == nil && (i == len(items)-1 || items[i+1].seg != it.seg) {
			start := time.Now()
			if serr := it.seg.f.Datasync(); serr != nil {
				err = j.fail(serr)
			}
			j.opts.Stages.Since(stage.JournalSync, start)
		}
		if it.closeAfter {
			if cerr := it.seg.f.Close(); cerr != nil && err == nil {
				err = j.fail(cerr)
			}
		}
	}
	for _, it := range items {
		switch {
		case err != nil:
			j.answer(it.reqs, Mark{}, err)
		case it.reqs != nil:
			j.acknowledge(it.end, it.reqs)
		}
		if it.done != nil {
			close(it.done)
		}
	}
}
