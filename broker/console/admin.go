package console

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxRedirects bounds how many brokers one admin call is followed
// through (a topic's owner answers itself; a second hop covers an
// ownership change in between).
const maxRedirects = 3

// admin serves /console/api/admin/X as the broker's /admin/X: in-process
// through its whole handler (so authentication and authorization are the
// admin API's own), a redirect to another broker followed here.
func (h *handler) admin(w http.ResponseWriter, r *http.Request) {
	if h.cfg.ReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusForbidden, ReadOnlyReason)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("read request body: %v", err))
		return
	}
	inner := r.Clone(r.Context())
	inner.URL.Path = strings.TrimPrefix(r.URL.Path, "/console/api")
	inner.URL.RawPath = ""
	if r.URL.RawPath != "" {
		inner.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, "/console/api")
	}
	inner.RequestURI = inner.URL.RequestURI()
	inner.Body = io.NopCloser(bytes.NewReader(body))
	rw := &redirectCatcher{w: w}
	h.cfg.Admin.ServeHTTP(rw, inner)
	if rw.location == "" {
		return
	}
	h.follow(w, r, rw.location, body)
}

// follow makes the request at location (another broker's admin API) and
// copies its answer, following up to maxRedirects further redirects.
func (h *handler) follow(w http.ResponseWriter, r *http.Request, location string, body []byte) {
	client := h.cfg.Redirects
	if client == nil {
		client = http.DefaultClient
	}
	noFollow := *client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for range maxRedirects {
		u, err := url.Parse(location)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			writeError(w, http.StatusBadGateway, fmt.Sprintf("admin API redirected to %q, not a broker URL", location))
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, location, bytes.NewReader(body))
		if err != nil {
			writeError(w, http.StatusBadGateway, err.Error())
			return
		}
		for _, k := range []string{"Authorization", "Content-Type", "Accept"} {
			if v := r.Header.Get(k); v != "" {
				req.Header.Set(k, v)
			}
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			writeError(w, http.StatusBadGateway, fmt.Sprintf("owner broker did not answer: %v", err))
			return
		}
		if isRedirect(resp.StatusCode) && resp.Header.Get("Location") != "" {
			location = resp.Header.Get("Location")
			_ = resp.Body.Close()
			continue
		}
		copyResponse(w, resp)
		return
	}
	writeError(w, http.StatusBadGateway, fmt.Sprintf("admin API redirected more than %d times", maxRedirects))
}

func copyResponse(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k == "Content-Length" || k == "Connection" || k == "Transfer-Encoding" {
			continue
		}
		w.Header().Del(k) // what the redirecting handler had set
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func isRedirect(status int) bool {
	return status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect ||
		status == http.StatusFound || status == http.StatusMovedPermanently || status == http.StatusSeeOther
}

// redirectCatcher passes a response through unless it is a redirect,
// whose Location it keeps instead.
type redirectCatcher struct {
	w        http.ResponseWriter
	location string
	caught   bool
}

func (c *redirectCatcher) Header() http.Header {
	return c.w.Header()
}

func (c *redirectCatcher) WriteHeader(status int) {
	if isRedirect(status) && c.w.Header().Get("Location") != "" {
		c.caught = true
		c.location = c.w.Header().Get("Location")
		c.w.Header().Del("Location")
		return
	}
	c.w.WriteHeader(status)
}

func (c *redirectCatcher) Write(p []byte) (int, error) {
	if c.caught {
		return len(p), nil
	}
	return c.w.Write(p)
}
