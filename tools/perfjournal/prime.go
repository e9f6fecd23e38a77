package perfjournal

import (
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/journal"
)

// primeChunk is the entry size the primer writes: large, so filling files
// takes few adds, and small enough that the margin below stays a small
// part of even an 8 MiB file.
const primeChunk = 256 << 10

// primeRecycled leaves dir in the state of a long-running bookie with
// journalReuseFiles on: a full pool of recycled files that were written
// end to end, and a current file that is nearly full too (it joins the
// pool at the measured journal's first checkpoint). Reaching that state
// with the measured load would take more files than one point writes, and
// a pool holding a mostly unwritten file would measure fresh-file writes
// under the reuse label.
func primeRecycled(fs engine.FS, dir string, opts journal.Options) error {
	opts.Pipeline, opts.SkipSync, opts.MaxGroupWait = true, false, -1
	j, err := journal.Open(fs, dir, opts, func(journal.Entry) error { return nil })
	if err != nil {
		return err
	}
	err = fillFiles(j, opts)
	if err == nil {
		err = j.Checkpoint(j.LastMark()) // retires every full file into the pool
	}
	return errors.Join(err, j.Close())
}

// fillFiles writes chunks until pool full files lie behind the current
// one and the current one is within margin of rotating. Up to four adds
// are in flight past the check, which the margin leaves room for.
func fillFiles(j *journal.Journal, opts journal.Options) error {
	const inflight = 4
	pool := opts.MaxRecycledFiles
	if pool <= 0 {
		pool = 2 // the journal's default
	}
	first := j.LastMark().FileID
	margin := int64(2 * inflight * (primeChunk + journal.BlockSize))
	limit := int64(pool+2) * (opts.MaxFileSize/primeChunk + 1) // bound the loop whatever happens
	payload := make([]byte, primeChunk)
	results := make(chan error, inflight)
	for range inflight {
		results <- nil
	}
	var err error
	for n := int64(0); ; n++ {
		if err = <-results; err != nil || n >= limit {
			break
		}
		if m := j.LastMark(); m.FileID >= first+uint64(pool) && m.Offset >= opts.MaxFileSize-margin {
			break
		}
		if err = j.Add(0, n, payload, func(_ journal.Mark, e error) { results <- e }); err != nil {
			break
		}
	}
	for range inflight - 1 { // the loop holds one token; wait for the others
		err = errors.Join(err, <-results)
	}
	if err == nil && j.LastMark().FileID < first+uint64(pool) {
		err = fmt.Errorf("wrote %d files, want %d", j.LastMark().FileID-first, pool)
	}
	return err
}
