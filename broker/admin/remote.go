package admin

// Calls to another broker's admin API, for what spans brokers (the
// partitions of a partitioned topic are served wherever their bundles
// are).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/ownership"
)

// forwardedAuthKey holds, in a request's context, the caller's
// Authorization header: calls made for it to other brokers carry it, so
// they are authorized as the caller (a client certificate cannot be
// forwarded; broker credentials of their own are not done yet).
type forwardedAuthKey struct{}

// WithForwardedAuth returns ctx carrying the caller's Authorization header.
func WithForwardedAuth(ctx context.Context, authorization string) context.Context {
	if authorization == "" {
		return ctx
	}
	return context.WithValue(ctx, forwardedAuthKey{}, authorization)
}

// remoteTimeout bounds one admin call to another broker.
const remoteTimeout = 30 * time.Second

// RemoteError is another broker's answer to an admin call; StatusOf
// passes its status on, so the caller sees what the owner said.
type RemoteError struct {
	Status int
	Reason string
}

func (e *RemoteError) Error() string { return e.Reason }

// CallBroker makes an admin call on another broker and decodes its JSON
// answer into out (nil: the body is ignored). A non-2xx answer is a
// *RemoteError.
func CallBroker(ctx context.Context, method, target string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	if a, ok := ctx.Value(forwardedAuthKey{}).(string); ok && a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := (&http.Client{Timeout: remoteTimeout}).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e errorBody
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		return &RemoteError{Status: resp.StatusCode, Reason: fmt.Sprintf("%s %s: %d %s", method, target, resp.StatusCode, e.Reason)}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, target, err)
	}
	return nil
}

// RemoteTopicStats asks the broker a lookup pointed to (res) for a
// topic's stats; ok is false when it answers 404 (no such topic).
func RemoteTopicStats(ctx context.Context, res ownership.LookupResult, topic TopicPath) (st TopicStats, ok bool, err error) {
	err = CallBroker(ctx, http.MethodGet, topicURL(res, topic, "/stats", nil), &st)
	if StatusOf(err) == http.StatusNotFound {
		return st, false, nil
	}
	return st, err == nil, err
}

// RemoteDeleteTopic deletes a topic (force: its clients are disconnected)
// on the broker a lookup pointed to; a topic it does not know is no error.
func RemoteDeleteTopic(ctx context.Context, res ownership.LookupResult, topic TopicPath) error {
	err := CallBroker(ctx, http.MethodDelete, topicURL(res, topic, "", url.Values{"force": {"true"}}), nil)
	if StatusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}

// TopicPath is a topic name's parts, as an admin path spells them.
type TopicPath struct {
	Domain, Tenant, Namespace, Local string
}

// topicURL is the admin URL of a topic call on the broker a lookup
// pointed to: the owner (authoritative) or one to ask again.
func topicURL(res ownership.LookupResult, p TopicPath, suffix string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	q.Set("authoritative", strconv.FormatBool(res.Authoritative || !res.Redirect))
	return strings.TrimSuffix(res.HTTPURL, "/") + "/admin/v2/" + p.Domain + "/" + p.Tenant + "/" + p.Namespace + "/" +
		url.PathEscape(p.Local) + suffix + "?" + q.Encode()
}
