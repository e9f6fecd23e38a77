package wire

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is. Every error the codec returns matches exactly one
// of them; each means the peer sent bytes we cannot trust, so the server
// closes the connection and logs the error text, which names the problem.
var (
	// ErrFrameTooLarge: a frame announced a totalSize above the limit. It is
	// reported as soon as the 4-byte size is read, before the body arrives,
	// so an oversized frame is never buffered.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrMalformedFrame: sizes, magic numbers or protobuf contents are
	// inconsistent or invalid.
	ErrMalformedFrame = errors.New("wire: malformed frame")
	// ErrChecksumMismatch: the CRC32C carried by an entry does not match its
	// metadata and payload.
	ErrChecksumMismatch = errors.New("wire: checksum mismatch")
)

// FrameTooLargeError carries the announced size and the limit.
type FrameTooLargeError struct {
	Size uint32 // totalSize as announced by the peer
	Max  int    // the limit it exceeded
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("wire: frame too large: totalSize %d exceeds limit %d", e.Size, e.Max)
}

func (e *FrameTooLargeError) Unwrap() error { return ErrFrameTooLarge }

// MalformedFrameError says what was wrong; Err, when set, is the underlying
// cause (a protobuf decoding error) and can be reached with errors.As.
type MalformedFrameError struct {
	What string
	Err  error
}

func (e *MalformedFrameError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("wire: malformed frame: %s: %v", e.What, e.Err)
	}
	return "wire: malformed frame: " + e.What
}

func (e *MalformedFrameError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrMalformedFrame, e.Err}
	}
	return []error{ErrMalformedFrame}
}

// ChecksumMismatchError carries the CRC the sender wrote and the one we
// computed over the same bytes.
type ChecksumMismatchError struct {
	Sent     uint32
	Computed uint32
}

func (e *ChecksumMismatchError) Error() string {
	return fmt.Sprintf("wire: checksum mismatch: entry carries crc32c %#08x, computed %#08x", e.Sent, e.Computed)
}

func (e *ChecksumMismatchError) Unwrap() error { return ErrChecksumMismatch }

func malformed(format string, args ...any) error {
	return &MalformedFrameError{What: fmt.Sprintf(format, args...)}
}

func malformedCause(err error, format string, args ...any) error {
	return &MalformedFrameError{What: fmt.Sprintf(format, args...), Err: err}
}
