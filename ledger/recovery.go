package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/internal/invariants"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// OpenRecover opens a ledger for reading after making sure its writer can
// add nothing more, and closes it if it was open (BookKeeper recovery):
//
//  1. mark it IN_RECOVERY (CAS);
//  2. fence its last ensemble, reading the LAC each bookie knows, until
//     every write set has Qw-Qa+1 fenced bookies (then no write set can
//     reach Qa acks among unfenced ones);
//  3. read forward from the highest LAC with fencing reads of the whole
//     write set: an entry found anywhere (verified) is recovered, an entry
//     that Qw-Qa+1 replicas lack cannot have been acknowledged and ends
//     the ledger; anything else (too many unreachable) stops recovery;
//  4. write the recovered entries back with recovery adds (to Qa, with
//     ensemble changes if a bookie fails);
//  5. close by CAS at the last recovered entry.
//
// Concurrent recoveries of one ledger can reach different ends (an entry
// never acknowledged may sit on some replicas only); each end holds every
// acknowledged entry, the first close wins and the others adopt its end.
func (c *Client) OpenRecover(ctx context.Context, id int64, password []byte) (*ReadHandle, error) {
	md, version, err := c.meta.read(ctx, id)
	if err != nil {
		return nil, err
	}
	if string(md.Password) != string(password) {
		return nil, fmt.Errorf("ledger %d: %w", id, ErrUnauthorized)
	}
	for md.State == StateOpen {
		next := md.clone()
		next.State = StateInRecovery
		v, err := c.meta.write(ctx, id, next, version)
		if err == nil {
			md, version = next, v
			break
		}
		if !errors.Is(err, metadata.ErrBadVersion) {
			return nil, fmt.Errorf("ledger %d: mark in recovery: %w", id, err)
		}
		if md, version, err = c.meta.read(ctx, id); err != nil {
			return nil, err
		}
	}
	if md.State != StateClosed {
		if err := c.recover(ctx, id, md, version, password); err != nil {
			return nil, err
		}
		if md, _, err = c.meta.read(ctx, id); err != nil {
			return nil, err
		}
	}
	return c.newReadHandle(id, md, password)
}

func (c *Client) recover(ctx context.Context, id int64, md *Metadata, version int64, password []byte) error {
	r, err := c.newReadHandle(id, md, password)
	if err != nil {
		return err
	}
	lac, err := r.fenceLastEnsemble(ctx)
	if err != nil {
		return err
	}
	lacLength := int64(0)
	if lac >= 0 {
		r.mu.lac = lac // every entry up to the fenced LAC is acknowledged: readable
		e, err := r.readEntry(ctx, lac)
		if err != nil {
			return fmt.Errorf("ledger %d recovery: read entry %d at the LAC: %w", id, lac, err)
		}
		lacLength = e.Length
	}
	w, err := newWriteHandle(c, id, md, version, password, true, lac, lacLength)
	if err != nil {
		return err
	}
	defer w.finish()
	last, err := r.recoverEntries(ctx, w, lac)
	if err != nil {
		return err
	}
	if err := w.waitIdle(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	werr, wmd, wversion, length := w.mu.err, w.mu.md.clone(), w.mu.version, w.mu.lacLength
	w.mu.Unlock()
	if werr != nil {
		return fmt.Errorf("ledger %d recovery: writing recovered entries back: %w", id, werr)
	}
	closedAt, err := c.closeMetadata(ctx, id, wmd, wversion, last, length, true)
	if err != nil {
		return fmt.Errorf("ledger %d recovery: close: %w", id, err)
	}
	if closedAt < lac {
		// The fenced LAC is acknowledged: an end before it would lose
		// acknowledged entries, which no recovery can reach.
		invariants.Failf("ledger %d: closed at entry %d by another client, below the acknowledged entry %d", id, closedAt, lac)
		return fmt.Errorf("ledger %d recovery: closed by another client at entry %d, below the acknowledged entry %d: %w",
			id, closedAt, lac, ErrRecoveryIncomplete)
	}
	if closedAt != last {
		c.log.Info("ledger recovered by another client first", "ledger", id, "last_entry", closedAt, "this_recovery_found", last)
		return nil
	}
	c.log.Info("ledger recovered", "ledger", id, "last_entry", last, "fenced_lac", lac)
	return nil
}

// fenceLastEnsemble fences every bookie of the last ensemble and returns
// the highest LAC they report, once enough of them answered.
func (r *ReadHandle) fenceLastEnsemble(ctx context.Context) (int64, error) {
	md := r.Metadata()
	bookies := md.last().Bookies
	results := make(chan replicaResult, len(bookies))
	for _, b := range bookies {
		r.sendRead(b, &bkproto.Request{Op: bkproto.OpRead, Flags: bkproto.FlagFence, LedgerID: r.id,
			EntryID: bkproto.EntryLAC, MasterKey: r.key}, bkproto.EntryLAC, results)
	}
	fenced := make(map[string]bool)
	lac := int64(-1)
	var errs []error
	for range bookies {
		var res replicaResult
		select {
		case res = <-results:
		case <-time.After(r.c.cfg.ReadTimeout):
			errs = append(errs, errors.New("a bookie did not answer the fence in time"))
			continue
		case <-ctx.Done():
			return -1, ctx.Err()
		}
		if res.err != nil {
			errs = append(errs, fmt.Errorf("bookie %s: %w", res.bookie, res.err))
			continue
		}
		fenced[res.bookie] = true
		lac = max(lac, r.lacFrom(res.resp))
		if covers(md, fenced) && len(fenced) < len(bookies) {
			// Enough to end the old writer (it can no longer reach Qa in
			// any write set): the others get decidedGrace to answer too,
			// not the read timeout, so a stopped bookie costs recovery
			// that grace only.
			lac = r.collectFences(results, len(bookies)-len(fenced)-len(errs), fenced, lac)
			return lac, nil
		}
	}
	if !covers(md, fenced) {
		return -1, fmt.Errorf("ledger %d: fenced %d of %d bookies, not every write set: %w: %v",
			r.id, len(fenced), len(bookies), ErrRecoveryIncomplete, errors.Join(errs...))
	}
	return lac, nil
}

// covers reports whether every write set of the last ensemble has at
// least Qw-Qa+1 bookies in set.
func covers(md *Metadata, set map[string]bool) bool {
	ens := md.last().Bookies
	need := md.WriteQuorumSize - md.AckQuorumSize + 1
	for start := range md.EnsembleSize {
		n := 0
		for k := range md.WriteQuorumSize {
			if set[ens[(start+k)%md.EnsembleSize]] {
				n++
			}
		}
		if n < need {
			return false
		}
	}
	return true
}

// decidedGrace is how long recovery still waits for the remaining
// replicas once their answers can no longer be needed for safety: a
// stopped bookie (SIGSTOP, a stall) then costs this, not the read timeout
// (a topic moving to another broker while a bookie is stopped waits for
// its recovery).
const decidedGrace = 100 * time.Millisecond

// collectFences takes up to n more fence answers for decidedGrace.
func (r *ReadHandle) collectFences(results <-chan replicaResult, n int, fenced map[string]bool, lac int64) int64 {
	grace := time.NewTimer(decidedGrace)
	defer grace.Stop()
	for range n {
		select {
		case res := <-results:
			if res.err == nil {
				fenced[res.bookie] = true
				lac = max(lac, r.lacFrom(res.resp))
			}
		case <-grace.C:
			return lac
		}
	}
	return lac
}

// recoveryBatch is how many entries recovery reads at once
// (recoveryReadBatchSize): entries past the end come back "missing" and
// are simply not used.
const recoveryBatch = 64

// recoverEntries reads forward from lac+1 and writes what it finds back
// through w; it returns the ledger's last entry.
func (r *ReadHandle) recoverEntries(ctx context.Context, w *WriteHandle, lac int64) (int64, error) {
	for first := lac + 1; ; first += recoveryBatch {
		outcomes := make([]chan recoveryOutcome, recoveryBatch)
		for i := range outcomes {
			outcomes[i] = make(chan recoveryOutcome, 1)
			go func() { outcomes[i] <- r.recoveryRead(ctx, first+int64(i)) }()
		}
		for i := range outcomes {
			o := <-outcomes[i]
			switch {
			case o.err != nil:
				return -1, o.err
			case o.end:
				return first + int64(i) - 1, nil
			}
			w.appendEncoded(o.found.entry, o.found.resp.Data, func(int64, error) {})
		}
	}
}

type recoveryOutcome struct {
	found *replicaResult // the entry exists
	end   bool           // the entry cannot have been acknowledged
	err   error          // neither could be decided
}

// recoveryRead reads one entry from its whole write set with fencing reads
// and decides whether it exists.
func (r *ReadHandle) recoveryRead(ctx context.Context, e int64) recoveryOutcome {
	md := r.Metadata()
	need := md.WriteQuorumSize - md.AckQuorumSize + 1
	ws := writeSet(md, e)
	results := make(chan replicaResult, len(ws))
	for _, b := range ws {
		r.sendRead(b, &bkproto.Request{Op: bkproto.OpRead, Flags: bkproto.FlagFence, LedgerID: r.id, EntryID: e, MasterKey: r.key}, e, results)
	}
	timeout := time.NewTimer(r.c.cfg.ReadTimeout)
	defer timeout.Stop()
	missing, graced := 0, false
	var errs []error
collect:
	for range ws {
		var res replicaResult
		select {
		case res = <-results:
		case <-timeout.C:
			errs = append(errs, errors.New("a bookie did not answer in time"))
			break collect
		case <-ctx.Done():
			return recoveryOutcome{err: ctx.Err()}
		}
		switch {
		case res.err == nil:
			return recoveryOutcome{found: &res}
		case errors.Is(res.err, client.ErrNoEntry), errors.Is(res.err, client.ErrNoLedger):
			missing++
			if missing >= need && !graced {
				// Qw-Qa+1 replicas lack it, so it never reached Qa; the
				// others now get decidedGrace, not the read timeout, to
				// report it (a replica that has it still wins, as before,
				// so concurrent recoveries agree on the tail).
				graced = true
				timeout.Reset(decidedGrace)
			}
		default:
			errs = append(errs, fmt.Errorf("bookie %s: %w", res.bookie, res.err))
		}
	}
	if missing >= need {
		return recoveryOutcome{end: true}
	}
	return recoveryOutcome{err: fmt.Errorf("ledger %d recovery: entry %d: %d replicas lack it, %d needed to end the ledger: %w: %v",
		r.id, e, missing, need, ErrRecoveryIncomplete, errors.Join(errs...))}
}
