package hostile

// The HTTP category: malformed admin and lookup requests. A 500 is a
// failure (bad input is the caller's mistake: 4xx), and so is an error
// body that shows the metadata store's paths.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// internalPaths are the metadata-store roots an error body must not show.
var internalPaths = regexp.MustCompile(`/managed-ledgers|/admin/(policies|partitioned-topics|local-policies)|/ledgers/|/loadbalance|/namespace/|/schemas/`)

// echoedRequest is the request line the admin API's catch-all for
// endpoints it does not serve puts in its reason ("GET /admin/v2/...:
// this admin endpoint is not supported"): the caller's own path, which may
// spell /schemas/, not an internal one. Left out before internalPaths.
var echoedRequest = regexp.MustCompile(`"reason":"[A-Z]+ /admin/[^"]*?: this admin endpoint is not supported`)

var oddSegments = []string{"%2e%2e", "..", ".", "%2F", "%ff%fe", "%00", "%01", "a%20b", "%25", "%zz", "x", "public", "default",
	strings.Repeat("y", 3000), "%E6%97%A5", "ok", "-", "=", "a:b"}

func (d *driver) seg() string { return oddSegments[d.rng.IntN(len(oddSegments))] }

// adminHTTP sends one malformed request.
func (d *driver) adminHTTP(ctx context.Context) error {
	if d.rng.IntN(6) == 0 {
		return d.rawHTTP(ctx)
	}
	method, path, body := d.httpRequest()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+d.cfg.HTTPAddr+path, strings.NewReader(body))
	if err != nil {
		return nil // not a request net/http can send: rawHTTP covers those
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	d.report.HTTPStatus[resp.StatusCode]++
	if resp.StatusCode == http.StatusInternalServerError {
		return fmt.Errorf("%s %s answered 500: %s", method, path, b)
	}
	if loc := internalPaths.FindIndex(echoedRequest.ReplaceAll(b, nil)); loc != nil {
		return fmt.Errorf("%s %s answered %d with an internal path: %s", method, path, resp.StatusCode, b)
	}
	return nil
}

func (d *driver) httpRequest() (method, path, body string) {
	t, ns, topic := d.seg(), d.seg(), d.seg()
	bodies := []string{"", "{", "null", "[]", "-1", "0", "99999999999999999999", `{"a":`, `"\uD800"`, "\xff\xfe",
		`{"allowedClusters":["` + strings.Repeat("c", 5000) + `"]}`, `{"adminRoles":null}`, "3", `{"partitions":2}`}
	body = bodies[d.rng.IntN(len(bodies))]
	paths := []struct{ method, path string }{
		{"GET", "/lookup/v2/topic/persistent/" + t + "/" + ns + "/" + topic},
		{"GET", "/admin/v2/persistent/" + t + "/" + ns + "/" + topic + "/stats"},
		{"GET", "/admin/v2/persistent/" + t + "/" + ns + "/" + topic + "/internalStats"},
		{"PUT", "/admin/v2/persistent/" + t + "/" + ns + "/" + topic + "/partitions"},
		{"PUT", "/admin/v2/persistent/" + t + "/" + ns + "/" + topic},
		{"DELETE", "/admin/v2/persistent/" + t + "/" + ns + "/" + topic},
		{"GET", "/admin/v2/persistent/" + t + "/" + ns},
		{"GET", "/admin/v2/persistent/" + t + "/" + ns + "/" + topic + "/subscription/" + d.seg() + "/position/" + d.seg()},
		{"GET", "/admin/v2/persistent/" + t + "/" + ns + "/" + topic + "/examinemessage?initialPosition=" + d.seg() + "&messagePosition=" + d.seg()},
		{"GET", "/admin/v2/persistent/" + t + "/" + ns + "/" + topic + "/ledger/" + d.seg() + "/entry/" + d.seg()},
		{"PUT", "/admin/v2/tenants/" + t},
		{"GET", "/admin/v2/tenants/" + t},
		{"PUT", "/admin/v2/namespaces/" + t + "/" + ns},
		{"POST", "/admin/v2/namespaces/" + t + "/" + ns + "/retention"},
		{"GET", "/admin/v2/namespaces/" + t},
		{"PUT", "/admin/v2/clusters/" + t},
		{"POST", "/admin/v2/brokers/configuration/" + t + "/" + ns},
		{"GET", "/admin/v2/schemas/" + t + "/" + ns + "/" + topic + "/schema"},
		{"POST", "/admin/v2/schemas/" + t + "/" + ns + "/" + topic + "/schema"},
		{[]string{"PATCH", "OPTIONS", "TRACE", "BREW"}[d.rng.IntN(4)], "/admin/v2/" + t},
	}
	p := paths[d.rng.IntN(len(paths))]
	return p.method, p.path, body
}

// rawHTTP: what net/http's client will not send: a garbage request line,
// invalid UTF-8 in the path, an endless chunked body, a Content-Length
// far past the body limit, oversized headers.
func (d *driver) rawHTTP(ctx context.Context) error {
	var dialer net.Dialer
	dctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	c, err := dialer.DialContext(dctx, "tcp", d.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("dial http: %w", err)
	}
	defer c.Close()
	// Some of these rightly get no answer (an endless body is still being
	// read): wait a little, not the full timeout; the probes check the
	// server lives.
	_ = c.SetDeadline(time.Now().Add(time.Second))
	reqs := []string{
		"GARBAGE\r\n\r\n",
		"GET /admin/v2/persistent/\xff\xfe/x/y/stats HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT /admin/v2/tenants/t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n" + strings.Repeat("a", 1000),
		"PUT /admin/v2/tenants/t HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551615\r\n\r\n{}",
		"PUT /admin/v2/tenants/t HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n{}",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("h", 64<<10) + "\r\n\r\n",
	}
	if _, err := io.WriteString(c, reqs[d.rng.IntN(len(reqs))]); err != nil {
		return nil // the server closed first: fine
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil // closed or still reading the endless body: the probes check the server lives
	}
	defer resp.Body.Close()
	d.report.HTTPStatus[resp.StatusCode]++
	if resp.StatusCode == http.StatusInternalServerError {
		return fmt.Errorf("raw request answered 500")
	}
	return nil
}
