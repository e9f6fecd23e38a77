package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

// errorBody is Pulsar's error answer, which pulsaradmin's rest.Error and
// pulsar-admin read: {"reason": "..."}.
type errorBody struct {
	Reason string `json:"reason"`
}

// WriteError answers with status and a Pulsar error body.
func WriteError(w http.ResponseWriter, status int, reason string) {
	reason = withoutPaths(reason)
	body, _ := encode(errorBody{Reason: reason}) // a struct of one string always encodes
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// internalPath matches what looks like a metadata-store or file path in an
// error's text: a '/' and a letter starting a word (after a space, a
// quote or a parenthesis: not the "//" of a topic or service URL), up to
// the next space or quote.
var internalPath = regexp.MustCompile(`(^|[\s"'(])/[A-Za-z_][^\s"',)]*`)

// withoutPaths elides internal paths from an error's reason: a caller
// learns what failed, not how the store is laid out.
func withoutPaths(reason string) string {
	return internalPath.ReplaceAllString(reason, "$1<path>")
}

// WriteJSON answers 200 with v as JSON (500 if v does not encode).
func WriteJSON(w http.ResponseWriter, v any) {
	body, err := encode(v)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// encode is json.Marshal without HTML escaping, so that a reason reads
// "must be >= 0" as Pulsar writes it, not "must be \u003e= 0".
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Errors of the broker's own admin calls (topics, subscriptions,
// messages, dynamic configuration). Package broker returns them wrapped
// with context; StatusOf maps them.
var (
	ErrTopicNotFound        = errors.New("topic not found")
	ErrSubscriptionNotFound = errors.New("subscription not found")
	ErrMessageNotFound      = errors.New("message not found")
	ErrTopicExists          = errors.New("already exists")
	ErrInUse                = errors.New("has connected producers or consumers (use force=true to disconnect them)")
	ErrBadRequest           = errors.New("bad request")
	ErrNotSupported         = errors.New("not supported")
	ErrNotPartitioned       = errors.New("topic is not partitioned")
	ErrMetadataRequired     = errors.New("no metadata store: partitioned topics are unavailable")
	// ErrNotOwner is a topic whose bundle this broker does not serve
	// (it moved while the call ran).
	ErrNotOwner = errors.New("the topic's namespace bundle is not served by this broker")
	// ErrNotSet is a dynamic configuration key without an override.
	ErrNotSet = errors.New("not set")
	// ErrTransactionNotFound is a transaction its coordinator does not
	// know (ended, or never opened).
	ErrTransactionNotFound = errors.New("transaction not found")
	// ErrUnavailable is a service this broker does not offer now (its
	// transaction coordinator is off or elsewhere).
	ErrUnavailable = errors.New("service unavailable")
)

// BadRequest is ErrBadRequest naming the field at fault.
func BadRequest(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrBadRequest, field, fmt.Sprintf(format, args...))
}

// kindError is an error of a kind (a sentinel, for StatusOf) whose
// message does not repeat the kind's text: some of Pulsar's reasons are
// the whole message.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// Errorf is fmt.Errorf(format, args...) that also is kind (errors.Is).
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}

// StatusOf maps an error of package resources (or the metadata store
// beneath it) or of the broker's admin calls to the status Pulsar
// answers with; it is the only such mapping:
//
//	another broker's answer (RemoteError)  its status
//	ErrInvalid, ErrBadRequest              400 Bad Request
//	ErrNotAllowed                          403 Forbidden
//	ErrNotFound, ErrTopicNotFound,
//	ErrSubscriptionNotFound,
//	ErrMessageNotFound, ErrNotPartitioned,
//	ErrNotSet, ErrTransactionNotFound      404 Not Found
//	ErrExists, ErrNotEmpty, ErrConflict,
//	ErrTopicExists, CAS give-up,
//	metadata ErrExists, ErrBadVersion      409 Conflict
//	ErrPrecondition, ErrInUse,
//	ErrMetadataRequired                    412 Precondition Failed
//	ErrNotSupported                        501 Not Implemented
//	ErrNotOwner, ErrUnavailable, a store
//	that is unreachable                    503 Service Unavailable
//	anything else (ErrCorrupt ...)         500 Internal Server Error
func StatusOf(err error) int {
	if re := (*RemoteError)(nil); errors.As(err, &re) {
		return re.Status
	}
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, auth.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, resources.ErrInvalid), errors.Is(err, metadata.ErrInvalidPath), errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, resources.ErrNotAllowed):
		return http.StatusForbidden
	case errors.Is(err, resources.ErrNotFound), isAny(err, ErrTopicNotFound, ErrSubscriptionNotFound,
		ErrMessageNotFound, ErrNotPartitioned, ErrNotSet, ErrTransactionNotFound):
		return http.StatusNotFound
	case isAny(err, resources.ErrExists, resources.ErrNotEmpty, resources.ErrConflict, metadata.ErrCASRetriesExhausted,
		ErrTopicExists, metadata.ErrExists, metadata.ErrBadVersion):
		return http.StatusConflict
	case isAny(err, resources.ErrPrecondition, ErrInUse, ErrMetadataRequired):
		return http.StatusPreconditionFailed
	case errors.Is(err, ErrNotSupported):
		return http.StatusNotImplemented
	case isAny(err, ErrNotOwner, ErrUnavailable, metadata.ErrSessionLost, metadata.ErrClosed, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// isAny is errors.Is for any of targets.
func isAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// fail answers with err's status; server-side failures are logged, the
// caller's mistakes are not.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := StatusOf(err)
	if status >= 500 {
		a.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	WriteError(w, status, err.Error())
}

// invalid is a 400 naming the field at fault.
func invalid(field, msg string) error {
	return &resources.FieldError{Field: field, Msg: msg}
}
