// Package auth authenticates clients and authorizes what they do, as
// Pulsar's broker does, under Pulsar's configuration keys:
//
//   - Authentication (authenticationEnabled, authenticationProviders):
//     providers for the methods "token" (JWT, token.go), "tls" (the client
//     certificate's CN, tlscert.go) and "basic" (user:hash file,
//     basic.go) turn credentials into a role. A client that gives none
//     gets anonymousUserRole when it is set, else is refused.
//   - Authorization (authorizationEnabled, superUserRoles, authz.go):
//     superusers may do anything; a tenant's adminRoles manage the tenant's
//     namespaces and topics; namespace (and topic) grants of produce and
//     consume, kept in the namespace policies' auth_policies, let a role
//     produce or consume, and either lets it look the topic up.
//   - TLS (tlsconfig.go): the server side *tls.Config of the TLS ports,
//     with the certificate reloaded when its files change.
//
// The package knows nothing of the broker: the binary protocol
// (broker/conn_connect.go) and the HTTP middleware (broker/httpauth.go)
// call it with what the client sent.
package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ErrUnauthenticated: the credentials are missing, malformed or wrong
// (HTTP 401, binary AuthenticationError). ErrForbidden: the role may not
// do this (HTTP 403, binary AuthorizationError).
var (
	ErrUnauthenticated = errors.New("authentication failed")
	ErrForbidden       = errors.New("not authorized")
)

// maxAuthData bounds the credentials a client may send (a token, a
// user:password): anything longer is refused before any parsing.
const maxAuthData = 16 << 10

// Credentials is what a client presented.
type Credentials struct {
	// Method is the binary protocol's auth_method_name ("token", "tls",
	// "basic"), or what the HTTP Authorization header implies.
	Method string
	// Data is auth_data: a token, "user:password"; empty for tls.
	Data []byte
	// PeerCertificates are the client's verified TLS certificates (leaf
	// first); nil on plaintext connections or without a client certificate.
	PeerCertificates []*x509.Certificate
}

// Provider authenticates one method.
type Provider interface {
	// Method is the auth_method_name the provider serves.
	Method() string
	// Authenticate returns the role of valid credentials. Errors never
	// contain the credentials.
	Authenticate(c Credentials) (role string, err error)
}

// Authenticator holds the configured providers.
type Authenticator struct {
	providers map[string]Provider
	anonymous string
}

// NewAuthenticator returns an authenticator trying providers by method;
// anonymousRole ("" for none) is the role of a client without credentials.
func NewAuthenticator(anonymousRole string, providers ...Provider) *Authenticator {
	a := &Authenticator{providers: map[string]Provider{}, anonymous: anonymousRole}
	for _, p := range providers {
		a.providers[p.Method()] = p
	}
	return a
}

// Pulsar's provider class names, as authenticationProviders lists them.
var providerClasses = map[string]string{
	"org.apache.pulsar.broker.authentication.AuthenticationProviderToken": "token",
	"org.apache.pulsar.broker.authentication.AuthenticationProviderTls":   "tls",
	"org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": "basic",
}

// ProviderMethod maps an authenticationProviders entry (Pulsar's class
// name, or the method name itself) to its method.
func ProviderMethod(name string) (string, error) {
	name = strings.TrimSpace(name)
	if m, ok := providerClasses[name]; ok {
		return m, nil
	}
	switch name {
	case "token", "tls", "basic":
		return name, nil
	}
	return "", fmt.Errorf("authentication provider %q is not supported (want AuthenticationProviderToken, AuthenticationProviderTls or AuthenticationProviderBasic)", name)
}

// Expiring is a provider whose credentials expire (tokens): the binary
// protocol asks the client for fresh ones before the role lapses
// (broker/conn_auth.go).
type Expiring interface {
	// AuthenticateUntil is Authenticate that also says when the
	// credentials expire (zero: never).
	AuthenticateUntil(c Credentials) (role string, expires time.Time, err error)
}

// Authenticate returns the role of c. A client without credentials (no
// method, or "none") gets the anonymous role if there is one. A client
// naming the tls method with no certificate, or a method not configured,
// is refused.
func (a *Authenticator) Authenticate(c Credentials) (string, error) {
	role, _, err := a.AuthenticateUntil(c)
	return role, err
}

// AuthenticateUntil is Authenticate that also says when the credentials
// expire (zero: never).
func (a *Authenticator) AuthenticateUntil(c Credentials) (string, time.Time, error) {
	if len(c.Data) > maxAuthData {
		return "", time.Time{}, fmt.Errorf("%w: auth data of %d bytes is longer than %d", ErrUnauthenticated, len(c.Data), maxAuthData)
	}
	method := c.Method
	if method == "" || method == "none" {
		if a.anonymous != "" {
			return a.anonymous, time.Time{}, nil
		}
		// Pulsar also accepts a verified client certificate without the
		// client naming the tls method.
		if p, ok := a.providers["tls"]; ok && len(c.PeerCertificates) > 0 {
			role, err := p.Authenticate(c)
			return role, time.Time{}, err
		}
		return "", time.Time{}, fmt.Errorf("%w: no credentials given and anonymous access is off", ErrUnauthenticated)
	}
	p, ok := a.providers[method]
	if !ok {
		return "", time.Time{}, fmt.Errorf("%w: authentication method %q is not enabled", ErrUnauthenticated, Clip(method))
	}
	var role string
	var expires time.Time
	var err error
	if e, ok := p.(Expiring); ok {
		role, expires, err = e.AuthenticateUntil(c)
	} else {
		role, err = p.Authenticate(c)
	}
	if err != nil {
		return "", time.Time{}, err
	}
	if role == "" {
		return "", time.Time{}, fmt.Errorf("%w: %s credentials name no role", ErrUnauthenticated, method)
	}
	return role, expires, nil
}

// Anonymous is the anonymous role ("" for none).
func (a *Authenticator) Anonymous() string { return a.anonymous }

// Clip shortens a client-given name (an auth method) for messages and
// logs.
func Clip(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// Methods lists the enabled authentication methods ("basic", "tls",
// "token"), sorted: what a login page offers.
func (a *Authenticator) Methods() []string {
	out := make([]string, 0, len(a.providers))
	for m := range a.providers {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
