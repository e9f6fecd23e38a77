package offload

import (
	"context"
	"fmt"

	"github.com/magnetar-io/magnetar/ledger"
)

// Operations NewFaulty can fail, as passed to its inject function.
const (
	OpOffload    = "offload"     // Offload, before anything is copied
	OpSourceRead = "source-read" // each batch Offload reads from its Source: a failure mid-copy
	OpOpen       = "open"
	OpRead       = "read" // Read on a Reader from Open
	OpDelete     = "delete"
)

// NewFaulty wraps inner so that each operation first asks inject(op, k):
// a non-nil error fails the operation with that error (wrapped, so
// errors.Is finds it) and inner is not called for it. A nil inject
// injects nothing. For tests of the layers above; Driver is inner's.
func NewFaulty(inner Offloader, inject func(op string, k Key) error) Offloader {
	if inject == nil {
		inject = func(string, Key) error { return nil }
	}
	return &faulty{inner: inner, inject: inject}
}

type faulty struct {
	inner  Offloader
	inject func(op string, k Key) error
}

// check asks inject about op on k.
func (f *faulty) check(op string, k Key) error {
	if err := f.inject(op, k); err != nil {
		return fmt.Errorf("offload: injected fault in %s of %v: %w", op, k, err)
	}
	return nil
}

func (f *faulty) Driver() string { return f.inner.Driver() }

func (f *faulty) Offload(ctx context.Context, k Key, meta map[string]string, src Source) error {
	if err := f.check(OpOffload, k); err != nil {
		return err
	}
	return f.inner.Offload(ctx, k, meta, &faultySource{Source: src, f: f, k: k})
}

func (f *faulty) Open(ctx context.Context, k Key) (Reader, error) {
	if err := f.check(OpOpen, k); err != nil {
		return nil, err
	}
	r, err := f.inner.Open(ctx, k)
	if err != nil {
		return nil, err
	}
	return &faultyReader{Reader: r, f: f, k: k}, nil
}

func (f *faulty) Delete(ctx context.Context, k Key) error {
	if err := f.check(OpDelete, k); err != nil {
		return err
	}
	return f.inner.Delete(ctx, k)
}

// faultySource fails the Source's reads on OpSourceRead.
type faultySource struct {
	Source
	f *faulty
	k Key
}

func (s *faultySource) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	if err := s.f.check(OpSourceRead, s.k); err != nil {
		return nil, err
	}
	return s.Source.Read(ctx, first, last)
}

// faultyReader fails Reads on OpRead.
type faultyReader struct {
	Reader
	f *faulty
	k Key
}

func (r *faultyReader) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	if err := r.f.check(OpRead, r.k); err != nil {
		return nil, err
	}
	return r.Reader.Read(ctx, first, last)
}

// Meta passes MetaReader through, when the inner Reader has it.
func (r *faultyReader) Meta() map[string]string {
	if m, ok := r.Reader.(MetaReader); ok {
		return m.Meta()
	}
	return nil
}
