package engine

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Error is the error every engine operation returns: it names the operation,
// the path and the backend, and adds an operator's hint for the errors an
// operator can fix (full disk, read-only file system, fd limit).
type Error struct {
	Op      string // "write", "datasync", "open", ...
	Path    string
	Backend string
	Err     error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("engine(%s): %s %s: %v", e.Backend, e.Op, e.Path, e.Err)
	if hint := hintFor(e.Err); hint != "" {
		msg += " (" + hint + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

func hintFor(err error) string {
	switch {
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return "disk full: free space or add capacity; nothing past this write was acknowledged"
	case errors.Is(err, unix.EROFS):
		return "check the mount and the disk's health"
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		return "raise the fd limit: ulimit -n, or LimitNOFILE in the systemd unit"
	case errors.Is(err, unix.EIO):
		return "the device failed: check the disk; data not yet synced may be lost"
	}
	return ""
}

// ErrClosed is returned by operations on a closed File or FS.
var ErrClosed = fs.ErrClosed

// ErrCorruption marks data that was read back but fails its checks (bad CRC,
// impossible length). Storage packages wrap it with CorruptionErrorf so that
// corruption is never mistaken for "not found": a reader that gets it must
// stop and report, never skip or truncate silently.
var ErrCorruption = errors.New("corruption")

// CorruptionErrorf returns an error that matches ErrCorruption.
func CorruptionErrorf(format string, args ...any) error {
	return &corruptionError{msg: fmt.Sprintf(format, args...)}
}

type corruptionError struct{ msg string }

func (e *corruptionError) Error() string        { return "corruption: " + e.msg }
func (e *corruptionError) Is(target error) bool { return target == ErrCorruption }

// IsNoSpace reports whether err means the disk (or quota) is full.
func IsNoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// IsNoSpaceOnWrite reports whether err is a full disk met while allocating
// or writing (preallocate, write, create, ...), not while syncing. Such a
// failure lost nothing that was already written, so storage can wait for
// space instead of stopping; ENOSPC from a datasync may mean the kernel
// dropped dirty pages of earlier writes, and stays a failure.
func IsNoSpaceOnWrite(err error) bool {
	if !IsNoSpace(err) {
		return false
	}
	var op interface{ SyncOp() bool }
	return !errors.As(err, &op) || !op.SyncOp()
}

// SyncOp reports whether the failed operation flushed earlier writes: a
// datasync, a directory sync or a close (a write+datasync counts as a
// write: its data was never acknowledged).
func (e *Error) SyncOp() bool { return e.Op == "datasync" || e.Op == "syncdir" || e.Op == "close" }

// IsNotExist reports whether err means the file or directory does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func wrapErr(backend, op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Path: path, Backend: backend, Err: err}
}
