package admin_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

// The broker's admin errors map to the statuses its endpoints answered
// before they moved here; another broker's status passes through.
func TestStatusOfBrokerErrors(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{admin.BadRequest("topic", "bad %s", "x"), http.StatusBadRequest},
		{fmt.Errorf("topic t: %w", admin.ErrTopicNotFound), http.StatusNotFound},
		{fmt.Errorf("s: %w", admin.ErrSubscriptionNotFound), http.StatusNotFound},
		{fmt.Errorf("m: %w", admin.ErrMessageNotFound), http.StatusNotFound},
		{fmt.Errorf("t: %w", admin.ErrNotPartitioned), http.StatusNotFound},
		{fmt.Errorf("%w: no override of k", admin.ErrNotSet), http.StatusNotFound},
		{fmt.Errorf("t: %w", admin.ErrTopicExists), http.StatusConflict},
		{fmt.Errorf("create: %w", metadata.ErrExists), http.StatusConflict},
		{fmt.Errorf("put: %w", metadata.ErrBadVersion), http.StatusConflict},
		{fmt.Errorf("t %w: 1 producers", admin.ErrInUse), http.StatusPreconditionFailed},
		{admin.ErrMetadataRequired, http.StatusPreconditionFailed},
		{fmt.Errorf("t: %w: non-persistent", admin.ErrNotSupported), http.StatusNotImplemented},
		{fmt.Errorf("t: %w", admin.ErrNotOwner), http.StatusServiceUnavailable},
		{fmt.Errorf("stats: %w", &admin.RemoteError{Status: http.StatusNotFound, Reason: "gone"}), http.StatusNotFound},
		{&admin.RemoteError{Status: http.StatusPreconditionFailed, Reason: "in use"}, http.StatusPreconditionFailed},
	}
	for _, c := range cases {
		if got := admin.StatusOf(c.err); got != c.want {
			t.Errorf("StatusOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// Errorf keeps the message as written and is its kind.
func TestErrorfKind(t *testing.T) {
	inner := errors.New("inner")
	err := admin.Errorf(resources.ErrPrecondition, "k is not dynamic: %w", inner)
	if err.Error() != "k is not dynamic: inner" {
		t.Errorf("message %q", err.Error())
	}
	if !errors.Is(err, resources.ErrPrecondition) || !errors.Is(err, inner) {
		t.Errorf("%v is not both its kind and what it wraps", err)
	}
	if got := admin.StatusOf(err); got != http.StatusPreconditionFailed {
		t.Errorf("StatusOf = %d, want 412", got)
	}
}
