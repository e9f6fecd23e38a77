package ledger

// Batch reads: consecutive entries read with OpBatchRead from one bookie
// that holds them all (BookKeeper 4.17's batched reads).
//
// Behaviour:
//   - Only where every bookie of an ensemble holds every entry (Qw == E).
//     Striped ensembles, and reads of one entry, read an entry a request.
//   - The range is cut at ensemble changes (a bookie's entries outside its
//     fragments are never used) and into chunks of at most batchEntries
//     (chunkSize); up to batchesInFlight chunks are read at once. A chunk
//     asks the first bookie of its first entry's write set for its
//     entries, at most batchBytes an answer; after a short answer it asks
//     for the rest.
//   - Every entry of an answer is verified as a single read's is
//     (decodeEntry). What a batch does not bring, because the bookie
//     failed, did not answer in ReadTimeout, lacks the entry or sent one
//     that fails its digest, is read entry by entry (readEntry: the other
//     replicas, speculative reads). So failures end exactly as without
//     batches: ErrNoEntry only when every replica lacks the entry,
//     corruption and unreachable replicas as what they are.
//   - A bookie whose batch failed gets no more batches in that Read.
//   - Bookies built before OpBatchRead close the connection on it, failing
//     everything else in flight there, so a bookie gets batches only once
//     its OpInfo answer carried InfoBatchRead (batchCaps). One that refuses
//     them anyway (StatusBadRequest) is taken at its word.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

const (
	// batchEntries and batchBytes bound one batch read's answer; an answer
	// fits the client's default frame limit (5 MiB) unless a single entry
	// is larger, as it would for a single read.
	batchEntries = 256
	batchBytes   = 4 << 20
	// batchesInFlight chunks of a long range are read at once, so the
	// bookie's read workers and disk always have the next batch to serve.
	batchesInFlight = 4
	// minChunk: a chunk is not cut smaller than this to spread a short
	// range over batchesInFlight requests.
	minChunk = 16
	// entryWindow single-entry reads are in flight per Read.
	entryWindow = 64
	// capsRecheck: a bookie found not to serve batch reads is asked again
	// this much later (it may have been upgraded, or was unreachable).
	capsRecheck = 30 * time.Second
)

// rangeRead is one ReadHandle.Read in progress. out[i] is entry first+i;
// each is written by one goroutine, read once all are done.
type rangeRead struct {
	r     *ReadHandle
	md    *Metadata
	first int64
	out   []Entry
	sem   chan struct{} // single-entry reads in flight

	mu struct {
		sync.Mutex
		err   error           // the first failure, which the Read returns
		avoid map[string]bool // bookies whose batch failed in this Read
	}
}

func newRangeRead(r *ReadHandle, first, last int64) *rangeRead {
	rd := &rangeRead{r: r, md: r.Metadata(), first: first, out: make([]Entry, last-first+1), sem: make(chan struct{}, entryWindow)}
	rd.mu.avoid = make(map[string]bool)
	return rd
}

func (rd *rangeRead) fail(err error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.mu.err == nil {
		rd.mu.err = err
	}
}

func (rd *rangeRead) failure() error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.mu.err
}

// batchable reports whether a range of this ledger can be read in batches.
func (rd *rangeRead) batchable(first, last int64) bool {
	return last > first && rd.md.WriteQuorumSize == rd.md.EnsembleSize && !rd.r.c.cfg.DisableBatchRead
}

// readEach reads from..to one entry a request, entryWindow at a time
// (shared by the whole Read); it stops starting reads after a failure.
func (rd *rangeRead) readEach(ctx context.Context, from, to int64) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for e := from; e <= to && rd.failure() == nil; e++ {
		select {
		case rd.sem <- struct{}{}:
		case <-ctx.Done():
			rd.fail(ctx.Err())
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-rd.sem; wg.Done() }()
			ent, err := rd.r.readEntry(ctx, e)
			if err != nil {
				rd.fail(err)
				return
			}
			rd.out[e-rd.first] = ent
		}()
	}
}

// readBatched reads first..last in chunks, batchesInFlight at a time.
func (rd *rangeRead) readBatched(ctx context.Context, first, last int64) {
	size := chunkSize(last - first + 1)
	chunks := make(chan [2]int64)
	var wg sync.WaitGroup
	for range min(batchesInFlight, (last-first)/size+1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range chunks {
				rd.readChunk(ctx, c[0], c[1])
			}
		}()
	}
	defer wg.Wait()
	defer close(chunks)
	for from := first; from <= last && rd.failure() == nil; {
		to := min(last, from+size-1, rd.md.fragmentEnd(from))
		select {
		case chunks <- [2]int64{from, to}:
		case <-ctx.Done():
			rd.fail(ctx.Err())
			return
		}
		from = to + 1
	}
}

// chunkSize spreads n entries over batchesInFlight chunks of at most
// batchEntries: a short range of large entries (which batchBytes would
// cut into answers one after another) is read by several batches at once
// too. Chunks are not made smaller than minChunk entries.
func chunkSize(n int64) int64 {
	return min(batchEntries, max(minChunk, (n+batchesInFlight-1)/batchesInFlight))
}

// readChunk reads from..to, all in one fragment: in batches while they
// bring entries, then whatever is left entry by entry.
func (rd *rangeRead) readChunk(ctx context.Context, from, to int64) {
	for from <= to && rd.failure() == nil {
		b := rd.batchBookie(ctx, from)
		if b == "" {
			break
		}
		n, err := rd.readBatch(ctx, b, from, to)
		from += n
		if err != nil {
			if ctx.Err() != nil {
				rd.fail(err)
				return
			}
			rd.r.c.log.Debug("ledger batch read failed; reading entry by entry", "ledger", rd.r.id, "from", from, "to", to, "err", err)
			rd.batchFailed(b, err)
			break
		}
	}
	if from <= to {
		rd.readEach(ctx, from, to)
	}
}

// batchBookie picks the bookie for a batch from entry: the first of its
// write set that has not failed a batch in this Read and serves batch
// reads; "" if none.
func (rd *rangeRead) batchBookie(ctx context.Context, entry int64) string {
	for _, b := range rd.r.c.health.readOrder(writeSet(rd.md, entry)) { // a stalled bookie last
		rd.mu.Lock()
		avoid := rd.mu.avoid[b]
		rd.mu.Unlock()
		if !avoid && rd.r.c.caps.serves(ctx, b, rd.r.c.cfg.SpeculativeReadTimeout) {
			return b
		}
	}
	return ""
}

// batchFailed notes why bookie b's batch failed.
func (rd *rangeRead) batchFailed(b string, err error) {
	switch {
	case errors.Is(err, client.ErrNoEntry):
		return // a gap in b's copy (a lost add); b serves the rest
	case errors.Is(err, client.ErrBadRequest):
		rd.r.c.caps.refused(b)
	case errors.Is(err, client.ErrDisconnected):
		rd.r.c.caps.forget(b) // it may come back as another build
	}
	rd.mu.Lock()
	rd.mu.avoid[b] = true
	rd.mu.Unlock()
}

// readBatch asks bookie b for entries from..to and keeps the verified
// start of its answer; n is how many entries it kept. err is why it kept
// no more: the request failed, the answer broke the protocol, or entry
// from+n failed verification. A short answer is no error.
func (rd *rangeRead) readBatch(ctx context.Context, b string, from, to int64) (n int64, err error) {
	r := rd.r
	want := min(to-from+1, batchEntries)
	resp, err := r.sendBatch(ctx, b, &bkproto.Request{Op: bkproto.OpBatchRead, LedgerID: r.id, EntryID: from,
		MaxCount: uint32(want), MaxBytes: batchBytes})
	if err != nil {
		return 0, err
	}
	if got := int64(len(resp.Entries)); got == 0 || got > want {
		return 0, fmt.Errorf("bookie %s: batch read of ledger %d from entry %d: %d entries, asked for 1 to %d", b, r.id, from, got, want)
	}
	for i, data := range resp.Entries {
		e := from + int64(i)
		ent, err := r.dig.decodeEntry(r.id, e, data)
		if err != nil {
			return int64(i), fmt.Errorf("bookie %s: %w", b, err)
		}
		rd.out[e-rd.first] = ent
	}
	return int64(len(resp.Entries)), nil
}

// sendBatch sends a batch read and waits for the answer, at most
// ReadTimeout.
func (r *ReadHandle) sendBatch(ctx context.Context, b string, req *bkproto.Request) (*bkproto.Response, error) {
	type answer struct {
		resp *bkproto.Response
		err  error
	}
	ch := make(chan answer, 1)
	r.c.transport.Send(b, req, func(resp *bkproto.Response, err error) { ch <- answer{resp, err} })
	timer := time.NewTimer(r.c.cfg.ReadTimeout)
	defer timer.Stop()
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, fmt.Errorf("bookie %s: batch read of ledger %d from entry %d: %w", b, r.id, req.EntryID, a.err)
		}
		return a.resp, nil
	case <-timer.C:
		return nil, fmt.Errorf("bookie %s: batch read of ledger %d from entry %d: no answer in %v", b, r.id, req.EntryID, r.c.cfg.ReadTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("ledger %d: batch read from entry %d: %w", r.id, req.EntryID, ctx.Err())
	}
}

// batchCaps remembers which bookies serve OpBatchRead, from their OpInfo
// answers. Lock rule: mu guards the map and every batchCap's fields until
// its ready is closed; after that they are only read.
type batchCaps struct {
	transport Transport
	timeout   time.Duration // an OpInfo unanswered this long counts as "no"

	mu struct {
		sync.Mutex
		caps map[string]*batchCap
	}
}

type batchCap struct {
	ready chan struct{} // closed once decided
	ok    bool
	until time.Time // a "no" is asked again after it
}

func newBatchCaps(t Transport, timeout time.Duration) *batchCaps {
	c := &batchCaps{transport: t, timeout: timeout}
	c.mu.caps = make(map[string]*batchCap)
	return c
}

// serves reports whether bookie b serves batch reads, asking it first if
// no answer is known; it waits at most wait (false if the answer is later).
func (c *batchCaps) serves(ctx context.Context, b string, wait time.Duration) bool {
	bc := c.get(b)
	select {
	case <-bc.ready:
		return bc.ok
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-bc.ready:
		return bc.ok
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// get returns b's entry, asking b (outside mu: a transport may answer at
// once, on this goroutine) when there is none or its "no" is old.
func (c *batchCaps) get(b string) *batchCap {
	c.mu.Lock()
	bc := c.mu.caps[b]
	if bc != nil && !bc.staleLocked(time.Now()) {
		c.mu.Unlock()
		return bc
	}
	bc = &batchCap{ready: make(chan struct{})}
	c.mu.caps[b] = bc
	c.mu.Unlock()
	timeout := time.AfterFunc(c.timeout, func() { c.decide(bc, false) })
	c.transport.Send(b, &bkproto.Request{Op: bkproto.OpInfo}, func(resp *bkproto.Response, err error) {
		timeout.Stop()
		c.decide(bc, err == nil && resp.InfoFlags&bkproto.InfoBatchRead != 0)
	})
	return bc
}

func (bc *batchCap) staleLocked(now time.Time) bool {
	select {
	case <-bc.ready:
		return !bc.ok && now.After(bc.until)
	default:
		return false
	}
}

// decide settles bc once; later calls do nothing.
func (c *batchCaps) decide(bc *batchCap, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-bc.ready:
		return
	default:
	}
	bc.ok, bc.until = ok, time.Now().Add(capsRecheck)
	close(bc.ready)
}

// refused records that b answered a batch read "bad request".
func (c *batchCaps) refused(b string) {
	bc := &batchCap{ready: make(chan struct{})}
	c.decide(bc, false)
	c.mu.Lock()
	c.mu.caps[b] = bc
	c.mu.Unlock()
}

// forget drops what is known of b: its connection broke, and what answers
// next may be another build.
func (c *batchCaps) forget(b string) {
	c.mu.Lock()
	delete(c.mu.caps, b)
	c.mu.Unlock()
}
