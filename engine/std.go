package engine

import (
	"golang.org/x/sys/unix"
)

// NewStd returns the std backend: plain pwritev / pread / fdatasync /
// fallocate system calls, each blocking the calling goroutine's thread.
func NewStd() FS { return &osFS{io: stdIO{}, bounces: newBouncePool()} }

type stdIO struct{}

func (stdIO) name() string   { return "std" }
func (stdIO) attach(*osFile) {}
func (stdIO) detach(*osFile) {}
func (stdIO) close() error   { return nil }
func (stdIO) datasync(f *osFile) error {
	return retryEINTR(func() error { return unix.Fdatasync(f.fd) })
}

func (stdIO) pwritev(f *osFile, bufs [][]byte, off int64) (int, error) {
	if len(bufs) > maxIovecs {
		bufs = bufs[:maxIovecs]
	}
	for {
		n, err := unix.Pwritev(f.fd, bufs, off)
		if err == unix.EINTR {
			continue
		}
		return max(n, 0), err
	}
}

func (s stdIO) writeSync(f *osFile, bufs [][]byte, off int64) (int, bool, error) {
	n, err := s.pwritev(f, bufs, off)
	if err != nil || n < totalLen(bufs) {
		return n, false, err
	}
	return n, true, s.datasync(f)
}

func (stdIO) pread(f *osFile, p []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(f.fd, p, off)
		if err == unix.EINTR {
			continue
		}
		return max(n, 0), err
	}
}

func (stdIO) fallocate(f *osFile, mode uint32, off, length int64) error {
	return retryEINTR(func() error { return unix.Fallocate(f.fd, mode, off, length) })
}

func retryEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// maxIovecs is IOV_MAX on Linux: the most buffers one vectored call takes.
const maxIovecs = 1024
