package offload

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/magnetar-io/magnetar/ledger"
)

// NewMemory returns the "memory" driver: copies kept in this process, for
// tests of the layers above. It checks keys, meta and Sources as the
// filesystem driver does, and its copies are atomic the same way: a failed
// Offload leaves nothing.
func NewMemory() Offloader { return newMemory(Config{}.limits()) }

func newMemory(lim batchLimits) *memOffloader {
	o := &memOffloader{limits: lim}
	o.mu.copies = map[Key]*memCopy{}
	return o
}

// memOffloader is the "memory" driver.
type memOffloader struct {
	limits batchLimits
	busy   keyLocks
	mu     struct {
		sync.Mutex
		copies map[Key]*memCopy
	}
}

// memCopy is one copy; never changed once published.
type memCopy struct {
	meta     map[string]string
	payloads [][]byte
	total    int64
}

func (o *memOffloader) Driver() string { return DriverMemory }

// Offload implements Offloader: copy into a private memCopy, then publish
// it under the lock if the key is still free.
func (o *memOffloader) Offload(ctx context.Context, k Key, meta map[string]string, src Source) error {
	if err := k.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("offload %v: %w", k, err)
	}
	if _, err := encodeMeta(meta); err != nil {
		return fmt.Errorf("offload %v: %w", k, err)
	}
	release, err := o.busy.claim(k)
	if err != nil {
		return err
	}
	defer release()
	if o.lookup(k) != nil {
		return fmt.Errorf("offload %v: %w", k, ErrExists)
	}
	c := &memCopy{meta: maps.Clone(meta)}
	if c.meta == nil {
		c.meta = map[string]string{}
	}
	err = copyEntries(ctx, k, src, o.limits, func(ents []ledger.Entry) error {
		for _, e := range ents {
			c.payloads = append(c.payloads, bytes.Clone(e.Payload))
			c.total += int64(len(e.Payload))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return o.publish(k, c)
}

func (o *memOffloader) lookup(k Key) *memCopy {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.copies[k]
}

func (o *memOffloader) publish(k Key, c *memCopy) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.copies[k] != nil {
		return fmt.Errorf("offload %v: %w", k, ErrExists)
	}
	o.mu.copies[k] = c
	return nil
}

// Open implements Offloader.
func (o *memOffloader) Open(ctx context.Context, k Key) (Reader, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("offload: open %v: %w", k, err)
	}
	c := o.lookup(k)
	if c == nil {
		return nil, fmt.Errorf("offload: open %v: %w", k, ErrNotFound)
	}
	return &memReader{k: k, c: c}, nil
}

// Delete implements Offloader. Readers already open keep reading the
// copy, as open files do.
func (o *memOffloader) Delete(ctx context.Context, k Key) error {
	if err := k.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("offload: delete %v: %w", k, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.mu.copies, k)
	return nil
}

// memReader reads a memCopy. Reads return copies of the payloads, so a
// caller cannot change the stored copy.
type memReader struct {
	k      Key
	c      *memCopy
	closed atomic.Bool
}

func (r *memReader) LastEntryID() int64      { return int64(len(r.c.payloads)) - 1 }
func (r *memReader) Length() int64           { return r.c.total }
func (r *memReader) Meta() map[string]string { return maps.Clone(r.c.meta) }

func (r *memReader) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	if r.closed.Load() {
		return nil, fmt.Errorf("offload: read %v: %w", r.k, ErrClosed)
	}
	if err := checkRange(r.k, first, last, int64(len(r.c.payloads))); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("offload: read %v: %w", r.k, err)
	}
	out := make([]ledger.Entry, 0, last-first+1)
	for i := first; i <= last; i++ {
		p := bytes.Clone(r.c.payloads[i])
		if p == nil {
			p = []byte{}
		}
		out = append(out, ledger.Entry{LedgerID: r.k.LedgerID, EntryID: i, Payload: p})
	}
	return out, nil
}

func (r *memReader) Close() error {
	r.closed.Store(true)
	return nil
}
