package auth

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// HTTPCredentials are an HTTP request's credentials: Authorization:
// Bearer (token) or Basic (basic), else the TLS client certificate (tls).
func HTTPCredentials(r *http.Request) Credentials {
	c := Credentials{}
	if r.TLS != nil {
		c.PeerCertificates = r.TLS.PeerCertificates
	}
	h := r.Header.Get("Authorization")
	scheme, value, _ := strings.Cut(h, " ")
	switch strings.ToLower(scheme) {
	case "bearer":
		c.Method, c.Data = "token", []byte(strings.TrimSpace(value))
	case "basic":
		c.Method = "basic"
		if d, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value)); err == nil {
			c.Data = d
		}
	case "":
		if len(c.PeerCertificates) > 0 {
			c.Method = "tls"
		}
	default:
		c.Method = strings.ToLower(scheme) // not enabled: refused
	}
	return c
}
