package engine

import (
	"fmt"
	"log/slog"
)

// Backend names accepted by New (the value of the ioBackend setting).
const (
	BackendAuto  = "auto"
	BackendUring = "uring"
	BackendStd   = "std"
	BackendMem   = "mem"
)

// Options choose and configure a backend.
type Options struct {
	// Backend is auto, uring, std or mem. auto means uring when the kernel
	// allows it, else std.
	Backend string
	Uring   UringOptions
	Logger  *slog.Logger
}

// New returns the backend Options ask for and logs the choice. An explicit
// "uring" fails with the kernel's reason when io_uring is unavailable;
// "auto" falls back to std and logs why.
func New(opts Options) (FS, error) {
	return newWith(opts, func() (FS, error) { return NewUring(opts.Uring) })
}

// newWith is New with the io_uring constructor injected, so the fallback
// logic is testable on any kernel.
func newWith(opts Options, newUring func() (FS, error)) (FS, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	switch opts.Backend {
	case BackendUring:
		fs, err := newUring()
		if err != nil {
			return nil, fmt.Errorf("io backend %q requested but unavailable: %w", BackendUring, err)
		}
		log.Info("io backend selected", "backend", BackendUring, "reason", "configured")
		return fs, nil
	case BackendStd:
		log.Info("io backend selected", "backend", BackendStd, "reason", "configured")
		return NewStd(), nil
	case BackendMem:
		log.Info("io backend selected", "backend", BackendMem, "reason", "configured (data is not persisted)")
		return NewMem(), nil
	case "", BackendAuto:
		fs, err := newUring()
		if err == nil {
			log.Info("io backend selected", "backend", BackendUring, "reason", "auto: io_uring available")
			return fs, nil
		}
		log.Warn("io backend selected", "backend", BackendStd, "reason", "auto: io_uring unavailable", "err", err)
		return NewStd(), nil
	default:
		return nil, fmt.Errorf("unknown io backend %q: want auto, uring, std or mem", opts.Backend)
	}
}

// Separate returns an FS over the same files as fs whose operations never
// share a completion path with fs's: for io_uring, a ring of its own (with
// the options fs's was made with), for the caller to close. Other backends
// have no shared completion path, and wrappers (errorfs) are returned as
// they are: then the result is fs itself, not to be closed twice.
//
// Why: on one ring, an operation's completion may be reaped by whichever
// goroutine leads (see uringIO), and that goroutine may be waiting for a
// CPU. A bookie gives its journals their own ring so that a journal sync's
// completion never waits on an entry-log flush's goroutine.
func Separate(fs FS) (FS, error) {
	if o, ok := fs.(*osFS); ok {
		if u, ok := o.io.(*uringIO); ok {
			return NewUring(u.opts)
		}
	}
	return fs, nil
}

// RegisterBuffers registers memory from outside the Go heap (such as a
// Slab's) with fs's io_uring, so reads and writes of single buffers inside it
// use READ_FIXED/WRITE_FIXED. On other backends it does nothing. A
// registered region must stay mapped until fs is closed: close the Slab
// after the FS, never before.
func RegisterBuffers(fs FS, regions ...[]byte) error {
	for {
		switch v := fs.(type) {
		case *osFS:
			if u, ok := v.io.(*uringIO); ok {
				return wrapErr("uring", "register-buffers", "slab", u.registerBuffers(regions))
			}
			return nil
		case interface{ Unwrap() FS }:
			fs = v.Unwrap()
		default:
			return nil
		}
	}
}
