package offload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
)

// Key names one offloaded copy of a ledger.
type Key struct {
	ManagedLedger string // e.g. "public/default/persistent/t1" (may contain '/')
	LedgerID      int64
	UID           string // unique per offload attempt (caller makes it, e.g. random hex); [A-Za-z0-9-] only
}

func (k Key) String() string {
	return fmt.Sprintf("%s ledger %d uid %s", k.ManagedLedger, k.LedgerID, k.UID)
}

// Source is a closed ledger to copy; *ledger.ReadHandle satisfies it.
type Source interface {
	LastAddConfirmed() int64
	Read(ctx context.Context, first, last int64) ([]ledger.Entry, error)
}

var _ Source = (*ledger.ReadHandle)(nil)

// Reader reads an offloaded copy. Its methods are safe for concurrent use.
type Reader interface {
	LastEntryID() int64
	Length() int64                                                       // total payload bytes
	Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) // fills LedgerID, EntryID, Payload (LAC/Length may be zero)
	Close() error
}

// MetaReader is implemented by the Readers of this package's drivers: Meta
// returns (a copy of) the map given to Offload.
type MetaReader interface {
	Meta() map[string]string
}

// Offloader copies closed ledgers to tiered storage and reads them back.
// Implementations are safe for concurrent use.
type Offloader interface {
	Driver() string // "filesystem", "memory"
	// Offload copies entries 0..src.LastAddConfirmed() of the ledger,
	// reading in bounded batches, with meta stored in the copy. The copy
	// becomes visible atomically: a crash leaves either no copy or a
	// complete one. An existing copy at the same key is ErrExists. After
	// a failure, Delete(k) removes anything a failed cleanup left.
	Offload(ctx context.Context, k Key, meta map[string]string, src Source) error
	Open(ctx context.Context, k Key) (Reader, error) // ErrNotFound if absent; ErrCorrupt if the file fails checks
	Delete(ctx context.Context, k Key) error         // nil if absent (idempotent)
}

// Errors of offloaders. Each is returned wrapped with the key and the
// operation; test with errors.Is.
var (
	ErrNotFound = errors.New("offload: no such offloaded copy")
	// ErrCorrupt: a copy failed its checks. Never mistaken for
	// ErrNotFound: a reader must stop and report, not skip the ledger.
	// Corruption errors also match engine.ErrCorruption.
	ErrCorrupt           = errors.New("offload: offloaded copy is corrupt")
	ErrExists            = errors.New("offload: offloaded copy already exists")
	ErrUnsupportedDriver = errors.New("offload: driver not supported by this build")
	// ErrOutOfRange: a Read of entries the copy does not hold.
	ErrOutOfRange = errors.New("offload: entries out of range")
	// ErrInvalidKey: a Key that cannot name a copy (bad characters, "..").
	ErrInvalidKey = errors.New("offload: invalid key")
	// ErrClosed: a Read on a closed Reader.
	ErrClosed = errors.New("offload: reader closed")
	// ErrBusy: an Offload of a key this offloader is already offloading.
	ErrBusy = errors.New("offload: an offload of this key is in progress")
)

// corruptError is a corruption of one copy; it matches ErrCorrupt and
// engine.ErrCorruption.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return "offload: corrupt copy: " + e.msg }
func (e *corruptError) Is(target error) bool {
	return target == ErrCorrupt || target == engine.ErrCorruption
}

func corruptf(k Key, format string, args ...any) error {
	return &corruptError{msg: k.String() + ": " + fmt.Sprintf(format, args...)}
}

// Limits on keys, so that every name fits a file system's (NAME_MAX 255).
const (
	maxUIDLen  = 128
	maxPartLen = 255
	maxMLLen   = 4096
)

// validate checks that k can name a file under the root and nothing else:
// no absolute or ".." paths, no empty parts, and no part that could be
// taken for a copy's own file name.
func (k Key) validate() error {
	if k.LedgerID < 0 {
		return fmt.Errorf("%w: ledger id %d is negative", ErrInvalidKey, k.LedgerID)
	}
	if err := validateUID(k.UID); err != nil {
		return err
	}
	return validateManagedLedger(k.ManagedLedger)
}

func validateUID(uid string) error {
	if uid == "" || len(uid) > maxUIDLen {
		return fmt.Errorf("%w: uid %q must be 1 to %d characters", ErrInvalidKey, uid, maxUIDLen)
	}
	for _, c := range []byte(uid) {
		if !isUIDChar(c) {
			return fmt.Errorf("%w: uid %q has %q (allowed: A-Z a-z 0-9 -)", ErrInvalidKey, uid, c)
		}
	}
	return nil
}

func isUIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func validateManagedLedger(ml string) error {
	if ml == "" || len(ml) > maxMLLen {
		return fmt.Errorf("%w: managed ledger name must be 1 to %d bytes", ErrInvalidKey, maxMLLen)
	}
	if strings.ContainsAny(ml, "\x00\\") {
		return fmt.Errorf("%w: managed ledger %q contains NUL or '\\'", ErrInvalidKey, ml)
	}
	for _, part := range strings.Split(ml, "/") {
		switch {
		case part == "":
			return fmt.Errorf("%w: managed ledger %q is absolute or has an empty part", ErrInvalidKey, ml)
		case part == "." || part == "..":
			return fmt.Errorf("%w: managed ledger %q has a %q part", ErrInvalidKey, ml, part)
		case len(part) > maxPartLen:
			return fmt.Errorf("%w: managed ledger %q has a part over %d bytes", ErrInvalidKey, ml, maxPartLen)
		case looksLikeCopyName(part):
			return fmt.Errorf("%w: managed ledger %q has a part %q that looks like a copy's file name", ErrInvalidKey, ml, part)
		}
	}
	return nil
}

// File-name suffixes of the filesystem driver.
const (
	copySuffix = ".ledger"
	tempSuffix = ".tmp"
)

// copyFileName is the file name of k's copy in its managed ledger's
// directory.
func (k Key) copyFileName() string {
	return strconv.FormatInt(k.LedgerID, 10) + "-" + k.UID + copySuffix
}

// looksLikeCopyName reports whether name has the form of a copy's file
// name (with or without the temporary suffix): such a directory could
// collide with another managed ledger's copy.
func looksLikeCopyName(name string) bool {
	name = strings.TrimSuffix(name, tempSuffix)
	rest, ok := strings.CutSuffix(name, copySuffix)
	if !ok {
		return false
	}
	id, uid, ok := strings.Cut(rest, "-")
	if !ok || id == "" || validateUID(uid) != nil {
		return false
	}
	_, err := strconv.ParseInt(id, 10, 64)
	return err == nil
}
