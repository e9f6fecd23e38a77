package perfledger

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/magnetar-io/magnetar/ledger"
)

// readChunk is how many entries one Read asks for (the client pipelines
// them); sampleRun is the length of each sampled run of consecutive
// entries.
const (
	readChunk = 256
	sampleRun = 64
)

// span is a range of entry ids, both ends included.
type span struct{ first, last int64 }

// sampleSpans chooses which of a ledger's n entries (n > 0) to read back:
// all of them if sample is VerifyAll or at least n, else about sample
// entries in runs spread evenly over the ledger, the first run at entry 0
// and the last ending at entry n-1, the others at seeded offsets within
// their share. The spans are ordered and disjoint.
func sampleSpans(n int64, sample int, rng *rand.Rand) []span {
	if sample == VerifyAll || int64(sample) >= n {
		return []span{{0, n - 1}}
	}
	// At least two runs, so the first and the last entry are both read.
	runs := int64(max(2, (sample+sampleRun-1)/sampleRun))
	share := n / runs // >= 1: n > sample >= 1, and runs <= max(2, sample)
	run := min(int64(sampleRun), share, int64(sample))
	out := make([]span, 0, runs)
	for i := range runs {
		lo, hi := i*share, (i+1)*share-1
		if i == runs-1 {
			hi = n - 1
		}
		var start int64
		switch {
		case i == 0:
			start = 0
		case i == runs-1:
			start = hi - run + 1
		default:
			start = lo + rng.Int64N(hi-lo-run+2)
		}
		out = append(out, span{start, start + run - 1})
	}
	return out
}

// ledgerResult is what verification found about one ledger.
type ledgerResult struct {
	verified  int64 // entries read back and compared
	fragments int   // fragments in its metadata: 1 unless the ensemble changed
}

// verifyLedger opens a closed ledger through c (another client than the
// writer's), checks that its metadata ends at the entry the writer
// appended last, and reads back the sampled entries, comparing every byte.
func verifyLedger(ctx context.Context, c *ledger.Client, pat *pattern, id, appended int64, size, sample int) (ledgerResult, error) {
	rh, err := c.OpenNoRecovery(ctx, id, []byte(password))
	if err != nil {
		return ledgerResult{}, fmt.Errorf("open ledger %d to read it back: %w", id, err)
	}
	md := rh.Metadata()
	switch {
	case md.State != ledger.StateClosed:
		return ledgerResult{}, fmt.Errorf("ledger %d is %s after its writer closed it", id, md.State)
	case md.LastEntryID != appended-1 || md.Length != appended*int64(size):
		return ledgerResult{}, fmt.Errorf("ledger %d closed at entry %d with %d bytes; its writer appended %d entries of %d bytes",
			id, md.LastEntryID, md.Length, appended, size)
	}
	res := ledgerResult{fragments: len(md.Ensembles)}
	if appended == 0 {
		return res, nil
	}
	rng := rand.New(rand.NewPCG(uint64(id), uint64(appended)))
	for _, s := range sampleSpans(appended, sample, rng) {
		for first := s.first; first <= s.last; first += readChunk {
			last := min(first+readChunk-1, s.last)
			entries, err := rh.Read(ctx, first, last)
			if err != nil {
				return res, fmt.Errorf("read back ledger %d entries %d..%d: %w", id, first, last, err)
			}
			for i, ent := range entries {
				e := first + int64(i)
				if ent.LedgerID != id || ent.EntryID != e {
					return res, fmt.Errorf("ledger %d entry %d: read back ledger %d entry %d", id, e, ent.LedgerID, ent.EntryID)
				}
				if err := pat.check(ent.Payload, id, e, size); err != nil {
					return res, err
				}
			}
			res.verified += int64(len(entries))
		}
	}
	return res, nil
}
