package proxy

// The web port: /lookup and /admin forwarded to a broker, the proxy
// following the brokers' redirects itself (a topic's owner, the leader)
// so clients need to reach only the proxy; /status.html answered here.
// Redirects are followed only to registered brokers' web addresses (with
// static URLs: to allowed host names). Bodies are buffered (at most
// maxHTTPBody) so that a redirect can send them again.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/auth"
)

const (
	maxHTTPBody      = 64 << 20
	maxHTTPRedirects = 10
)

// hopHeaders are not forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// HTTPHandler serves the proxy's web port (without /metrics and pprof,
// which the command adds).
func (p *Proxy) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/status.html", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "OK")
	})
	mux.HandleFunc("/lookup/", p.forwardHTTP)
	mux.HandleFunc("/admin/", p.forwardHTTP)
	mux.HandleFunc("/console/", p.forwardConsole)
	mux.HandleFunc("GET /console", p.forwardConsole)
	return mux
}

// forwardConsole forwards the brokers' web console: its API as the admin
// API (authenticated here, then by the broker), its assets without
// credentials, as a broker serves them (the login page is one of them).
func (p *Proxy) forwardConsole(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/console/api/") {
		p.forwardHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeHTTPError(w, http.StatusMethodNotAllowed, "the console's assets are read with GET")
		return
	}
	p.forward(w, r, nil, "")
}

func (p *Proxy) httpClient() *http.Client {
	return &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			TLSClientConfig: p.cfg.BrokerTLS, TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: 60 * time.Second},
	}
}

// httpPrincipal authenticates a web request (authenticationEnabled); ""
// with authentication off.
func (p *Proxy) httpPrincipal(r *http.Request) (string, error) {
	if p.cfg.Authentication == nil {
		return "", nil
	}
	role, err := p.cfg.Authentication.Authenticate(auth.HTTPCredentials(r))
	if err != nil {
		p.m.authFailures.Inc()
		p.cfg.Logger.Warn("proxy: HTTP authentication failed", "client", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "err", err)
	}
	return role, err
}

func (p *Proxy) forwardHTTP(w http.ResponseWriter, r *http.Request) {
	principal, err := p.httpPrincipal(r)
	if err != nil {
		writeHTTPError(w, http.StatusUnauthorized, err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHTTPBody))
	if err != nil {
		http.Error(w, `{"reason":"request body too large or unreadable"}`, http.StatusRequestEntityTooLarge)
		return
	}
	p.forward(w, r, body, principal)
}

// forward sends r with body to a broker for principal and copies the
// answer.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, body []byte, principal string) {
	resp, err := p.roundTrip(r, body, principal)
	if err != nil {
		p.m.httpErrors.Inc()
		writeHTTPError(w, http.StatusBadGateway, err.Error())
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func writeHTTPError(w http.ResponseWriter, status int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"reason\":%q}\n", reason)
}

// roundTrip sends r to a broker (another one if the first cannot be
// reached) and follows redirects.
func (p *Proxy) roundTrip(r *http.Request, body []byte, principal string) (*http.Response, error) {
	var lastErr error
	for range max(1, len(p.reg.brokers())) {
		b, err := p.reg.pick()
		if err != nil {
			return nil, err
		}
		base := b.webURL(p.cfg.BrokerTLS != nil)
		if base == "" {
			return nil, fmt.Errorf("proxy: broker %s serves no HTTPS port (tlsEnabledWithBroker is on)", b.service)
		}
		target, err := url.Parse(base + r.URL.RequestURI())
		if err != nil {
			return nil, err
		}
		resp, err := p.follow(r, body, target, principal)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" || r.Context().Err() != nil {
			break // sent, maybe acted on: not retried elsewhere
		}
	}
	return nil, lastErr
}

func (p *Proxy) follow(r *http.Request, body []byte, target *url.URL, principal string) (*http.Response, error) {
	for range maxHTTPRedirects {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		for k, vs := range r.Header {
			req.Header[k] = vs
		}
		for _, h := range hopHeaders {
			req.Header.Del(h)
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			req.Header.Set("X-Forwarded-For", host)
		}
		if err := p.setBrokerCredentials(req, principal); err != nil {
			return nil, err
		}
		resp, err := p.http.Do(req)
		if err != nil {
			return nil, err
		}
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			return resp, nil
		}
		loc, err := resp.Location()
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("proxy: broker redirect without a usable Location: %w", err)
		}
		if target, err = p.webTarget(r.Context(), loc); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("proxy: more than %d redirects", maxHTTPRedirects)
}

// setBrokerCredentials makes a forwarded request the proxy's: with
// brokerClient credentials it authenticates as the proxy and names the
// client in X-Original-Principal (the broker authorizes both); without,
// the client's own Authorization header goes to the broker. A client's
// X-Original-Principal is never passed on.
func (p *Proxy) setBrokerCredentials(req *http.Request, principal string) error {
	req.Header.Del(originalPrincipalHeader)
	if p.cfg.BrokerClient.Method() == "" {
		return nil
	}
	req.Header.Del("Authorization")
	if err := p.cfg.BrokerClient.SetHTTP(req); err != nil {
		return fmt.Errorf("proxy credentials: %w", err)
	}
	if principal != "" {
		req.Header.Set(originalPrincipalHeader, principal)
	}
	return nil
}

// originalPrincipalHeader names the client to brokers (their proxyRoles
// accept it from the proxy's role).
const originalPrincipalHeader = "X-Original-Principal"

// webTarget checks a broker's redirect and returns where to send the
// request: a registered broker's web service, over HTTPS with BrokerTLS.
func (p *Proxy) webTarget(ctx context.Context, u *url.URL) (*url.URL, error) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: redirect to %s", errNotAllowed, u.Redacted())
	}
	host := u.Hostname()
	if !p.reg.hostAllowed(host) || !p.reg.registered(ctx, u.Host, true) {
		return nil, fmt.Errorf("%w: redirect to %s, not a registered broker", errNotAllowed, strings.ToLower(u.Host))
	}
	useTLS := p.cfg.BrokerTLS != nil
	if (u.Scheme == "https") == useTLS {
		return u, nil
	}
	b, ok := p.reg.find(ctx, u.Host, true)
	if !ok || b.webURL(useTLS) == "" {
		return nil, fmt.Errorf("proxy: redirect to %s: no %s address for that broker", strings.ToLower(u.Host), map[bool]string{true: "https", false: "http"}[useTLS])
	}
	base, err := url.Parse(b.webURL(useTLS))
	if err != nil {
		return nil, err
	}
	moved := *u
	moved.Scheme, moved.Host = base.Scheme, base.Host
	return &moved, nil
}
