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
	return mux
}

func (p *Proxy) httpClient() *http.Client {
	return &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: 60 * time.Second},
	}
}

func (p *Proxy) forwardHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHTTPBody))
	if err != nil {
		http.Error(w, `{"reason":"request body too large or unreadable"}`, http.StatusRequestEntityTooLarge)
		return
	}
	resp, err := p.roundTrip(r, body)
	if err != nil {
		p.m.httpErrors.Inc()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "{\"reason\":%q}\n", err.Error())
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

// roundTrip sends r to a broker (another one if the first cannot be
// reached) and follows redirects.
func (p *Proxy) roundTrip(r *http.Request, body []byte) (*http.Response, error) {
	var lastErr error
	for range max(1, len(p.reg.brokers())) {
		b, err := p.reg.pick()
		if err != nil {
			return nil, err
		}
		target, err := url.Parse(b.web + r.URL.RequestURI())
		if err != nil {
			return nil, err
		}
		resp, err := p.follow(r, body, target)
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

func (p *Proxy) follow(r *http.Request, body []byte, target *url.URL) (*http.Response, error) {
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
		if err := p.webTargetAllowed(r.Context(), loc); err != nil {
			return nil, err
		}
		target = loc
	}
	return nil, fmt.Errorf("proxy: more than %d redirects", maxHTTPRedirects)
}

func (p *Proxy) webTargetAllowed(ctx context.Context, u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: redirect to %s", errNotAllowed, u.Redacted())
	}
	host := u.Hostname()
	if !p.reg.hostAllowed(host) || !p.reg.registered(ctx, u.Host, true) {
		return fmt.Errorf("%w: redirect to %s, not a registered broker", errNotAllowed, strings.ToLower(u.Host))
	}
	return nil
}
