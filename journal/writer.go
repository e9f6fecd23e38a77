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

// maxGroupsPerCommit bounds the full groups one write + datasync carries
// when adds queue behind a full group (4 MiB at the default 512 KiB
// threshold): one group per datasync capped the journal at
// journalBufferedWritesThreshold per datasync, 110 MiB/s at the durable
// maximum on this machine's disk.
const maxGroupsPerCommit = 8

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
		gs := j.queuedGroups(g)
		if err := j.failure(); err != nil {
			for _, g := range gs {
				j.answer(g.reqs, Mark{}, err)
			}
		} else {
			j.commit(gs)
		}
		clear(gs) // the payloads are not the journal's to keep
	}
}

// queuedGroups returns first and, while the last group is full and adds
// are already queued, further groups of them (at most maxGroupsPerCommit
// in all), without waiting for any.
func (j *Journal) queuedGroups(first group) []group {
	gs := append(j.groups[:0], first)
	for len(gs) < maxGroupsPerCommit && j.full(&gs[len(gs)-1]) {
		var g group
		for !j.full(&g) && j.takeQueued(&g) {
		}
		if len(g.reqs) == 0 {
			break
		}
		gs = append(gs, g)
	}
	j.groups = gs
	return gs
}

// takeQueued takes one add into g if one is queued.
func (j *Journal) takeQueued(g *group) bool {
	select {
	case r := <-j.queue:
		j.take(g, r)
		return true
	default:
		return false
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

// commit writes groups back to back in one write: rotating or growing the
// file first if needed, then either write+datasync and answer (serial), or
// write and hand them to the sync loop (pipeline).
func (j *Journal) commit(gs []group) {
	span, n := int64(0), 0
	for _, g := range gs {
		span += groupSpan(g.bytes)
		n += len(g.reqs)
	}
	reqs := gs[0].reqs
	if len(gs) > 1 {
		reqs = make([]*request, 0, n)
		for _, g := range gs {
			reqs = append(reqs, g.reqs...)
		}
	}
	if (j.cur.offset+span > j.opts.MaxFileSize && j.cur.offset > BlockSize) || j.leaveForWritten(span) {
		if err := j.rotateForWrite(); err != nil {
			j.answer(reqs, Mark{}, j.fail(err))
			return
		}
	}
	if err := j.ensureAllocated(span); err != nil {
		j.answer(reqs, Mark{}, j.fail(err))
		return
	}
	bufs := j.encodeGroups(gs)
	seg, off := j.cur, j.cur.offset
	if invariants.Enabled && (off%BlockSize != 0 || span%BlockSize != 0) {
		invariants.Failf("journal groups at offset %d spanning %d bytes are not block-aligned", off, span)
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
			j.syncq <- syncItem{seg: seg, end: end, reqs: reqs}
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
		j.answer(reqs, Mark{}, j.fail(err))
		return
	}
	seg.offset = end.Offset
	j.acknowledge(end, reqs)
}

// encodeGroups lays groups out back to back for one vectored write,
// without copying the payloads (Add's callers keep them unchanged until
// answered): group and record headers go into the reusable header buffer,
// each payload is a buffer of its own, and zero padding ends each group
// at a block boundary. The bytes written are the format's, as if laid out
// in one buffer. Every group's durableBefore is what was durable before
// the write: none of them is until the write's datasync, so a crash may
// tear any of them, and replay must take that for a torn tail, not for
// damage to durable bytes.
func (j *Journal) encodeGroups(gs []group) [][]byte {
	need := 0
	for _, g := range gs {
		need += groupHeaderSize + len(g.reqs)*recordHeaderSize
	}
	if cap(j.hdrs) < need {
		j.hdrs = make([]byte, need)
	}
	h := j.hdrs[:need]
	durable := uint64(j.durableBefore())
	iov := j.iov[:0]
	p := 0
	for _, g := range gs {
		j.seq++
		groupHeader{fileID: j.cur.id, durableBefore: durable, recordsLen: uint32(g.bytes),
			count: uint32(len(g.reqs)), seq: j.seq}.put(h[p:])
		start := p // h[start:p] is the headers not yet in iov
		p += groupHeaderSize
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
		if pad := groupSpan(g.bytes) - int64(groupHeaderSize+g.bytes); pad > 0 {
			iov = append(iov, zeroBlock[:pad])
		}
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
