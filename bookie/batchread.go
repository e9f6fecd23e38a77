package bookie

// Batch reads (OpBatchRead), BookKeeper 4.17's batched read entry.
//
// Behaviour:
//   - Entries come through the same storage reads as OpRead (write cache,
//     read cache, entry log with its read-ahead), one ReadEntry each, so a
//     batch sees exactly what single reads would.
//   - The first entry decides the status: a ledger or entry that is not
//     here, corruption or an I/O error is answered as OpRead answers it
//     (corruption logged), with no entries.
//   - After the first, any entry that cannot be read ends the answer
//     without an error: the client asks again from there and gets the
//     error (or the answer of another replica) for that entry alone.
//   - Fencing does not matter, as for plain reads; a batch read never
//     fences and never waits (it takes no flags).
//   - Every answer is bounded: at most maxBatchEntries entries, and
//     entries stop before their bytes (4 + length each) pass the smaller of
//     maxBytes and maxBatchBytes; the first entry is sent whatever its size.

import (
	"errors"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// Limits of one batch-read answer, whatever the client asks: they bound
// the memory and the read-worker time one request takes.
const (
	maxBatchEntries = 4096
	maxBatchBytes   = 4 << 20
)

func (c *Core) batchRead(r *bkproto.Request, resp *bkproto.Response, reply Reply) {
	defer reply(resp)
	if r.Flags != 0 || r.EntryID < 0 || r.MaxCount == 0 {
		resp.Status = bkproto.StatusBadRequest
		return
	}
	count := int(min(r.MaxCount, maxBatchEntries))
	budget := int64(min(r.MaxBytes, maxBatchBytes))
	var size int64
	for e := r.EntryID; len(resp.Entries) < count; e++ {
		data, err := c.storage.ReadEntry(r.LedgerID, e)
		if err != nil {
			if errors.Is(err, engine.ErrCorruption) {
				c.log.Error("bookie batch read found a corrupt entry", "ledger", r.LedgerID, "entry", e, "err", err)
			}
			if len(resp.Entries) == 0 {
				resp.Status = statusOf(err)
				return
			}
			break
		}
		size += 4 + int64(len(data))
		if len(resp.Entries) > 0 && size > budget {
			break
		}
		resp.Entries = append(resp.Entries, data)
	}
	resp.LAC = c.lacOf(r.LedgerID)
}
