package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"

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

// StatusOf maps an error from package resources (or the metadata store
// beneath it) to the status Pulsar answers with:
//
//	ErrInvalid                      400 Bad Request
//	ErrNotAllowed                   403 Forbidden
//	ErrNotFound                     404 Not Found
//	ErrExists, ErrNotEmpty,
//	ErrConflict, CAS give-up        409 Conflict
//	ErrPrecondition                 412 Precondition Failed
//	a store that is unreachable     503 Service Unavailable
//	anything else (ErrCorrupt ...)  500 Internal Server Error
func StatusOf(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, resources.ErrInvalid), errors.Is(err, metadata.ErrInvalidPath):
		return http.StatusBadRequest
	case errors.Is(err, resources.ErrNotAllowed):
		return http.StatusForbidden
	case errors.Is(err, resources.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, resources.ErrExists), errors.Is(err, resources.ErrNotEmpty),
		errors.Is(err, resources.ErrConflict), errors.Is(err, metadata.ErrCASRetriesExhausted):
		return http.StatusConflict
	case errors.Is(err, resources.ErrPrecondition):
		return http.StatusPreconditionFailed
	case errors.Is(err, metadata.ErrSessionLost), errors.Is(err, metadata.ErrClosed),
		errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
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
