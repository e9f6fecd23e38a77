package admin

// Calls to another broker's admin API, for what spans brokers (the
// partitions of a partitioned topic are served wherever their bundles
// are).

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/ownership"
)

// forwardedAuthKey holds, in a request's context, the caller's
// Authorization header: without broker credentials (Peers.Credentials),
// calls made for it to other brokers carry it, so they are authorized as
// the caller (a client certificate cannot be forwarded).
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

// Peers makes admin calls to other brokers.
type Peers struct {
	// Credentials (brokerClientAuthentication*) authenticate the calls as
	// this broker, which the caller's request was already authorized
	// against; nil: the caller's own Authorization header is forwarded.
	Credentials *auth.ClientCredentials
	// TLS (brokerClientTlsEnabled) calls the brokers' HTTPS ports with it;
	// nil: HTTP.
	TLS *tls.Config
	// Client is the HTTP client (default: one with remoteTimeout and TLS).
	Client *http.Client
}

// HTTPClient is the client calls to other brokers use (their TLS
// settings), for callers that make their own requests.
func (p *Peers) HTTPClient() *http.Client { return p.client() }

func (p *Peers) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	return &http.Client{Timeout: remoteTimeout, Transport: &http.Transport{TLSClientConfig: p.TLS}}
}

// CallBroker makes an admin call on another broker and decodes its JSON
// answer into out (nil: the body is ignored). A non-2xx answer is a
// *RemoteError.
func (p *Peers) CallBroker(ctx context.Context, method, target string, out any) error {
	return p.callBroker(ctx, method, target, nil, out)
}

// callBroker is CallBroker with a JSON body (none if nil).
func (p *Peers) callBroker(ctx context.Context, method, target string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.Credentials.Method() != "" {
		if err := p.Credentials.SetHTTP(req); err != nil {
			return fmt.Errorf("%s %s: %w", method, target, err)
		}
	} else if a, ok := ctx.Value(forwardedAuthKey{}).(string); ok && a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := p.client().Do(req)
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
func (p *Peers) RemoteTopicStats(ctx context.Context, res ownership.LookupResult, topic TopicPath) (st TopicStats, ok bool, err error) {
	err = p.CallBroker(ctx, http.MethodGet, p.topicURL(res, topic, "/stats", nil), &st)
	if StatusOf(err) == http.StatusNotFound {
		return st, false, nil
	}
	return st, err == nil, err
}

// RemoteDeleteTopic deletes a topic (force: its clients are disconnected)
// on the broker a lookup pointed to; a topic it does not know is no error.
func (p *Peers) RemoteDeleteTopic(ctx context.Context, res ownership.LookupResult, topic TopicPath) error {
	err := p.CallBroker(ctx, http.MethodDelete, p.topicURL(res, topic, "", url.Values{"force": {"true"}}), nil)
	if StatusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}

// RemoteCreateSubscription creates a subscription at start on the broker
// a lookup pointed to.
func (p *Peers) RemoteCreateSubscription(ctx context.Context, res ownership.LookupResult, topic TopicPath, sub string, start MessageID) error {
	body, err := json.Marshal(start)
	if err != nil {
		return err
	}
	return p.callBroker(ctx, http.MethodPut, p.topicURL(res, topic, "/subscription/"+url.PathEscape(sub), nil), body, nil)
}

// RemoteCompact starts a compaction of a topic on the broker a lookup
// pointed to (a partition of a partitioned topic being compacted).
func (p *Peers) RemoteCompact(ctx context.Context, res ownership.LookupResult, topic TopicPath) error {
	return p.callBroker(ctx, http.MethodPut, p.topicURL(res, topic, "/compaction", nil), nil, nil)
}

// TopicPath is a topic name's parts, as an admin path spells them.
type TopicPath struct {
	Domain, Tenant, Namespace, Local string
}

// topicURL is the admin URL of a topic call on the broker a lookup
// pointed to: the owner (authoritative) or one to ask again.
func (p *Peers) topicURL(res ownership.LookupResult, t TopicPath, suffix string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	q.Set("authoritative", strconv.FormatBool(res.Authoritative || !res.Redirect))
	base := res.HTTPURL
	if p.TLS != nil && res.HTTPURLTLS != "" {
		base = res.HTTPURLTLS
	}
	// PathEscape keeps a v1 namespace ("cluster/ns") one segment.
	return strings.TrimSuffix(base, "/") + "/admin/v2/" + t.Domain + "/" + t.Tenant + "/" + url.PathEscape(t.Namespace) + "/" +
		url.PathEscape(t.Local) + suffix + "?" + q.Encode()
}
