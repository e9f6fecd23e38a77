package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync/atomic"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
)

// maxRunBytes bounds one positioned read of Read: consecutive records are
// read together up to this size (an entry larger than it is read alone).
const maxRunBytes = 4 << 20

// fileReader reads a copy of the filesystem driver. Everything but closed
// is set by openFileReader and never changes, so Reads need no lock; the
// engine.File's ReadAt is safe for concurrent use.
type fileReader struct {
	f           engine.File
	k           Key
	meta        map[string]string
	index       []byte // checked by checkIndex: records back to back
	count       int64
	indexOffset int64
	total       int64
	closed      atomic.Bool
}

// openFileReader reads and checks f's footer, index and header.
func openFileReader(f engine.File, k Key) (*fileReader, error) {
	size := f.Size()
	if size < headerFixedSize+footerSize {
		return nil, corruptf(k, "file is %d bytes, shorter than a header and a footer", size)
	}
	fb, err := readAt(f, k, size-footerSize, footerSize)
	if err != nil {
		return nil, err
	}
	ft, reason := decodeFooter(fb, size)
	if reason != "" {
		return nil, corruptf(k, "%s", reason)
	}
	if ft.ledgerID != k.LedgerID {
		return nil, corruptf(k, "footer names ledger %d", ft.ledgerID)
	}
	// decodeFooter checked that the index fits in the file before we
	// allocate for it.
	index, err := readAt(f, k, int64(ft.indexOffset), int64(size-footerSize)-int64(ft.indexOffset))
	if err != nil {
		return nil, err
	}
	hdr, err := readHeader(f, k, int64(ft.indexOffset))
	if err != nil {
		return nil, err
	}
	if reason := checkIndex(ft, index, fb, uint64(hdr.size)); reason != "" {
		return nil, corruptf(k, "%s", reason)
	}
	return &fileReader{
		f: f, k: k, meta: hdr.meta, index: index, count: int64(ft.entryCount),
		indexOffset: int64(ft.indexOffset), total: int64(ft.totalLength),
	}, nil
}

// readHeader reads and checks the header, which must end by limit (the
// index's offset).
func readHeader(f engine.File, k Key, limit int64) (header, error) {
	if limit < headerFixedSize {
		return header{}, corruptf(k, "index offset %d inside the header", limit)
	}
	prefix, err := readAt(f, k, 0, headerFixedSize)
	if err != nil {
		return header{}, err
	}
	metaLen, reason := decodeHeaderPrefix(prefix)
	if reason != "" {
		return header{}, corruptf(k, "%s", reason)
	}
	if headerFixedSize+metaLen > limit {
		return header{}, corruptf(k, "meta of %d bytes runs past the records' end at %d", metaLen, limit)
	}
	meta, err := readAt(f, k, headerFixedSize, metaLen)
	if err != nil {
		return header{}, err
	}
	hdr, reason := decodeHeader(append(prefix, meta...))
	if reason != "" {
		return header{}, corruptf(k, "%s", reason)
	}
	if hdr.ledgerID != k.LedgerID {
		return header{}, corruptf(k, "header names ledger %d", hdr.ledgerID)
	}
	return hdr, nil
}

// readAt reads n bytes at off. The caller has checked that they lie in
// the file, so a short read means the file changed under us: corruption.
func readAt(f engine.File, k Key, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	got, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) || (err == nil && int64(got) < n) {
		return nil, corruptf(k, "file ends before byte %d", off+n)
	}
	if err != nil {
		return nil, fmt.Errorf("offload: read %v at offset %d: %w", k, off, err)
	}
	return b, nil
}

func (r *fileReader) LastEntryID() int64      { return r.count - 1 }
func (r *fileReader) Length() int64           { return r.total }
func (r *fileReader) Meta() map[string]string { return maps.Clone(r.meta) }

// recordOffset is where record i starts; recordEnd where it ends (the next
// record's start, or the index's for the last).
func (r *fileReader) recordOffset(i int64) int64 {
	return int64(le.Uint64(r.index[i*indexEntrySize:]))
}

func (r *fileReader) recordEnd(i int64) int64 {
	if i+1 < r.count {
		return r.recordOffset(i + 1)
	}
	return r.indexOffset
}

// Read implements Reader: runs of consecutive records, one positioned
// read each, every record checked.
func (r *fileReader) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	if r.closed.Load() {
		return nil, fmt.Errorf("offload: read %v: %w", r.k, ErrClosed)
	}
	if err := checkRange(r.k, first, last, r.count); err != nil {
		return nil, err
	}
	out := make([]ledger.Entry, 0, min(last-first+1, 1024))
	for next := first; next <= last; {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("offload: read %v at entry %d: %w", r.k, next, err)
		}
		end := r.runEnd(next, last)
		ents, err := r.readRun(next, end)
		if err != nil {
			return nil, err
		}
		out = append(out, ents...)
		next = end + 1
	}
	return out, nil
}

// checkRange fails a Read of first..last from a copy of count entries
// unless it lies within the copy.
func checkRange(k Key, first, last, count int64) error {
	if first < 0 || last < first || last >= count {
		return fmt.Errorf("offload: read %v entries %d..%d: the copy holds entries 0..%d: %w",
			k, first, last, count-1, ErrOutOfRange)
	}
	return nil
}

// runEnd returns the last entry of the run starting at first: as many
// records as fit in maxRunBytes, at least one, at most up to last.
func (r *fileReader) runEnd(first, last int64) int64 {
	start, end := r.recordOffset(first), first
	for end < last && r.recordEnd(end+1)-start <= maxRunBytes {
		end++
	}
	return end
}

// readRun reads records first..last with one read and checks each. The
// payloads share the read's buffer, each capped so an append by the
// caller cannot overwrite the next.
func (r *fileReader) readRun(first, last int64) ([]ledger.Entry, error) {
	start := r.recordOffset(first)
	buf, err := readAt(r.f, r.k, start, r.recordEnd(last)-start)
	if err != nil {
		return nil, err
	}
	out := make([]ledger.Entry, 0, last-first+1)
	for i := first; i <= last; i++ {
		lo := r.recordOffset(i) - start
		hi := r.recordEnd(i) - start
		if reason := checkRecord(buf[lo:hi], i); reason != "" {
			return nil, corruptf(r.k, "entry %d: %s", i, reason)
		}
		out = append(out, ledger.Entry{LedgerID: r.k.LedgerID, EntryID: i, Payload: buf[lo+recordHeaderSize : hi : hi]})
	}
	return out, nil
}

// Close closes the file; later Reads fail with ErrClosed. Closing twice
// is a no-op.
func (r *fileReader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("offload: close %v: %w", r.k, err)
	}
	return nil
}
