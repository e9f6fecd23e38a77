package resources

import (
	"errors"
	"fmt"
)

// The error kinds every operation returns, wrapped with the name of what
// failed; test with errors.Is. The admin API maps each to one HTTP status.
var (
	// ErrInvalid: a value or name breaks a rule; the message names the
	// field (see FieldError).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: the cluster, tenant, namespace or topic does not exist.
	ErrNotFound = errors.New("does not exist")
	// ErrExists: creating something that is already there.
	ErrExists = errors.New("already exists")
	// ErrNotEmpty: deleting a tenant that still has namespaces, or a
	// namespace that still has partitioned topics.
	ErrNotEmpty = errors.New("is not empty")
	// ErrPrecondition: the change contradicts other metadata (a cluster
	// still in use, a tenant without clusters, a cluster that does not
	// exist where one is required).
	ErrPrecondition = errors.New("precondition failed")
	// ErrNotAllowed: a namespace asks for a cluster its tenant may not use.
	ErrNotAllowed = errors.New("not allowed")
	// ErrConflict: an update kept losing compare-and-set races.
	ErrConflict = errors.New("too many concurrent updates")
	// ErrCorrupt: a node holds a value that does not decode. Never
	// reported as ErrNotFound, so nobody recreates over damaged data.
	ErrCorrupt = errors.New("corrupt metadata")
)

// FieldError is an ErrInvalid that names the field at fault, in Pulsar's
// JSON spelling: "retention_policies.retentionTimeInMinutes: must be >= -1,
// got -5".
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func invalidf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// kindError carries a kind sentinel with its own message, so that
// "cluster c1 is used by namespace t/ns" reads naturally yet matches
// errors.Is(err, ErrPrecondition).
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

func kindf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func notFound(what string) error { return fmt.Errorf("%s %w", what, ErrNotFound) }
func exists(what string) error   { return fmt.Errorf("%s %w", what, ErrExists) }
