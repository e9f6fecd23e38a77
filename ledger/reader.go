package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// ReadHandle reads a ledger: a closed one up to its last entry, an open
// one (without recovery) never past the last add confirmed it has seen.
type ReadHandle struct {
	c   *Client
	id  int64
	dig digester
	key []byte

	mu struct {
		sync.Mutex
		md  *Metadata
		lac int64
	}
}

// OpenNoRecovery opens a ledger for reading without disturbing its writer
// (tailing readers): reads stay at or below the LAC, which ReadLAC and
// WaitLAC advance.
func (c *Client) OpenNoRecovery(ctx context.Context, id int64, password []byte) (*ReadHandle, error) {
	md, _, err := c.meta.read(ctx, id)
	if err != nil {
		return nil, err
	}
	r, err := c.newReadHandle(id, md, password)
	if err != nil {
		return nil, err
	}
	if md.State != StateClosed {
		if _, err := r.ReadLAC(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (c *Client) newReadHandle(id int64, md *Metadata, password []byte) (*ReadHandle, error) {
	if string(md.Password) != string(password) {
		return nil, fmt.Errorf("ledger %d: %w", id, ErrUnauthorized)
	}
	dig, err := newDigester(md.DigestType, password)
	if err != nil {
		return nil, fmt.Errorf("ledger %d: %w", id, err)
	}
	r := &ReadHandle{c: c, id: id, dig: dig, key: masterKey(password)}
	r.mu.md, r.mu.lac = md, -1
	if md.State == StateClosed {
		r.mu.lac = md.LastEntryID
	}
	return r, nil
}

// ID is the ledger id.
func (r *ReadHandle) ID() int64 { return r.id }

// LastAddConfirmed is the highest entry known to be readable.
func (r *ReadHandle) LastAddConfirmed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.lac
}

// Metadata returns a copy of the metadata the handle knows.
func (r *ReadHandle) Metadata() *Metadata {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.md.clone()
}

// IsClosed reports whether the ledger was closed when opened (or refreshed).
func (r *ReadHandle) IsClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.md.State == StateClosed
}

func (r *ReadHandle) noteLAC(lac int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.md.State != StateClosed && lac > r.mu.lac {
		r.mu.lac = lac
	}
	return r.mu.lac
}

// Read returns entries first..last, verified, pipelined: in batch reads
// where one bookie holds them all (batchread.go), else one read per entry.
// Reading past the LAC of an open ledger is ErrReadBeyondLAC.
func (r *ReadHandle) Read(ctx context.Context, first, last int64) ([]Entry, error) {
	lac := r.LastAddConfirmed()
	if first < 0 || last < first {
		return nil, fmt.Errorf("ledger %d: bad range %d..%d", r.id, first, last)
	}
	if last > lac {
		return nil, fmt.Errorf("ledger %d: read %d..%d, LAC %d: %w", r.id, first, last, lac, ErrReadBeyondLAC)
	}
	rd := newRangeRead(r, first, last)
	if rd.batchable(first, last) {
		rd.readBatched(ctx, first, last)
	} else {
		rd.readEach(ctx, first, last)
	}
	if err := rd.failure(); err != nil {
		return nil, err
	}
	return rd.out, nil
}

// replicaResult is one replica's answer to a read.
type replicaResult struct {
	bookie string
	resp   *bkproto.Response
	entry  Entry
	err    error
}

// writeSet returns the bookies holding entry, in preference order.
func writeSet(md *Metadata, entry int64) []string {
	ens := md.ensembleAt(entry).Bookies
	out := make([]string, md.WriteQuorumSize)
	for k := range out {
		out[k] = ens[(int(entry%int64(md.EnsembleSize))+k)%md.EnsembleSize]
	}
	return out
}

// readEntry reads one entry from its write set: one replica first, the
// next on an error or after the speculative timeout; the first verified
// answer wins.
func (r *ReadHandle) readEntry(ctx context.Context, entry int64) (Entry, error) {
	ws := r.c.health.readOrder(writeSet(r.Metadata(), entry))
	results := make(chan replicaResult, len(ws))
	ctx, cancel := context.WithTimeout(ctx, r.c.cfg.ReadTimeout*time.Duration(len(ws)))
	defer cancel()
	next, outstanding := 0, 0
	ask := func() {
		b := ws[next]
		next++
		outstanding++
		r.sendRead(b, &bkproto.Request{Op: bkproto.OpRead, LedgerID: r.id, EntryID: entry}, entry, results)
	}
	ask()
	spec := time.NewTimer(r.c.cfg.SpeculativeReadTimeout)
	defer spec.Stop()
	var errs []error
	for outstanding > 0 {
		select {
		case res := <-results:
			outstanding--
			if res.err == nil {
				return res.entry, nil
			}
			errs = append(errs, fmt.Errorf("bookie %s: %w", res.bookie, res.err))
			if next < len(ws) {
				ask()
			}
		case <-spec.C:
			if next < len(ws) {
				ask()
				spec.Reset(r.c.cfg.SpeculativeReadTimeout)
			}
		case <-ctx.Done():
			return Entry{}, fmt.Errorf("ledger %d entry %d: %w", r.id, entry, ctx.Err())
		}
	}
	return Entry{}, readFailure(r.id, entry, errs)
}

// readFailure summarizes replicas' errors: all "no entry" is ErrNoEntry;
// anything else (corruption, digest mismatch, unreachable) is reported
// as it is, never as a missing entry.
func readFailure(id, entry int64, errs []error) error {
	allMissing := true
	for _, err := range errs {
		if !errors.Is(err, client.ErrNoEntry) && !errors.Is(err, client.ErrNoLedger) {
			allMissing = false
		}
	}
	joined := errors.Join(errs...)
	if allMissing {
		return fmt.Errorf("ledger %d entry %d: %w: %v", id, entry, ErrNoEntry, joined)
	}
	return fmt.Errorf("ledger %d entry %d: no replica answered: %w", id, entry, joined)
}

// sendRead sends one read and verifies the entry in the answer.
func (r *ReadHandle) sendRead(b string, req *bkproto.Request, entry int64, out chan<- replicaResult) {
	r.c.transport.Send(b, req, func(resp *bkproto.Response, err error) {
		res := replicaResult{bookie: b, resp: resp, err: err}
		if err == nil && (entry != bkproto.EntryLAC || len(resp.Data) > 0) {
			id := entry
			if entry == bkproto.EntryLAC {
				h, herr := bkproto.ParseEntryHead(resp.Data)
				if herr != nil {
					res.err = fmt.Errorf("%w: %v", ErrDigestMismatch, herr)
					out <- res
					return
				}
				id = h.EntryID
			}
			res.entry, res.err = r.dig.decodeEntry(r.id, id, resp.Data)
		}
		out <- res
	})
}

// ReadLAC asks the last ensemble for the LAC (the highest of piggybacked
// and explicit LACs), as BookKeeper's readLastAddConfirmed.
func (r *ReadHandle) ReadLAC(ctx context.Context) (int64, error) {
	md := r.Metadata()
	if md.State == StateClosed {
		return md.LastEntryID, nil
	}
	bookies := md.last().Bookies
	results := make(chan replicaResult, len(bookies))
	for _, b := range bookies {
		r.c.transport.Send(b, &bkproto.Request{Op: bkproto.OpReadLAC, LedgerID: r.id}, func(resp *bkproto.Response, err error) {
			results <- replicaResult{bookie: b, resp: resp, err: err}
		})
	}
	lac, answered := int64(-1), 0
	heard := map[string]bool{}
	var errs []error
	var grace <-chan time.Time
collect:
	for range bookies {
		var res replicaResult
		select {
		case res = <-results:
		case <-grace:
			break collect
		case <-ctx.Done():
			return r.LastAddConfirmed(), ctx.Err()
		}
		if res.err != nil {
			if !errors.Is(res.err, client.ErrNoLedger) {
				errs = append(errs, res.err)
				continue
			}
		} else {
			lac = max(lac, r.lacFrom(res.resp))
		}
		answered++
		heard[res.bookie] = true
		if grace == nil && covers(md, heard) {
			// Qw-Qa+1 answers in every write set include one that saw
			// each acknowledged entry's LAC, as BookKeeper's quorum
			// coverage; the rest get decidedGrace, so a stopped bookie
			// does not hold the reader.
			t := time.NewTimer(decidedGrace)
			defer t.Stop()
			grace = t.C
		}
	}
	if answered == 0 {
		return r.LastAddConfirmed(), fmt.Errorf("ledger %d: read LAC: no bookie answered: %w", r.id, errors.Join(errs...))
	}
	return r.noteLAC(lac), nil
}

// lacFrom extracts a verified LAC from a read-LAC or EntryLAC answer.
func (r *ReadHandle) lacFrom(resp *bkproto.Response) int64 {
	lac := int64(-1)
	if len(resp.ExplicitLAC) > 0 {
		if v, err := r.dig.decodeLAC(r.id, resp.ExplicitLAC); err == nil {
			lac = v
		}
	}
	if len(resp.Data) > 0 {
		if h, err := bkproto.ParseEntryHead(resp.Data); err == nil {
			if e, err := r.dig.decodeEntry(r.id, h.EntryID, resp.Data); err == nil {
				lac = max(lac, e.LAC)
			}
		}
	}
	return lac
}

// WaitLAC waits (long poll, up to timeout) until the LAC passes previous
// and returns it; on timeout it returns the unchanged LAC.
func (r *ReadHandle) WaitLAC(ctx context.Context, previous int64, timeout time.Duration) (int64, error) {
	if lac := r.LastAddConfirmed(); lac > previous || r.IsClosed() {
		return lac, nil
	}
	ws := writeSet(r.Metadata(), previous+1)
	type res struct {
		resp *bkproto.Response
		err  error
	}
	ch := make(chan res, 1)
	r.c.transport.Send(ws[0], &bkproto.Request{Op: bkproto.OpRead, Flags: bkproto.FlagLongPoll, LedgerID: r.id,
		EntryID: previous + 1, PreviousLAC: previous, TimeoutMillis: uint32(timeout.Milliseconds())},
		func(resp *bkproto.Response, err error) { ch <- res{resp, err} })
	select {
	case x := <-ch:
		if x.err != nil {
			return r.ReadLAC(ctx) // that bookie failed: ask them all
		}
		return r.noteLAC(x.resp.LAC), nil
	case <-ctx.Done():
		return r.LastAddConfirmed(), ctx.Err()
	}
}

// Read reads entries first..last of the ledger this handle writes; they
// must be at or below its LAC (the writer's own entries, served from the
// bookies, for readers that are behind the writer's cache).
func (h *WriteHandle) Read(ctx context.Context, first, last int64) ([]Entry, error) {
	h.mu.Lock()
	md, lac := h.mu.md.clone(), h.mu.lac
	h.mu.Unlock()
	r, err := h.c.newReadHandle(h.id, md, md.Password)
	if err != nil {
		return nil, err
	}
	r.mu.lac = lac
	return r.Read(ctx, first, last)
}
