package auth

// TLS client-certificate authentication (AuthenticationProviderTls): the
// role is the common name of the client's certificate, which the TLS
// handshake verified against tlsTrustCertsFilePath (tlsconfig.go).

import "fmt"

// TLSProvider authenticates by client certificate.
type TLSProvider struct{}

// Method is "tls".
func (TLSProvider) Method() string { return "tls" }

// Authenticate returns the leaf certificate's CN.
func (TLSProvider) Authenticate(c Credentials) (string, error) {
	if len(c.PeerCertificates) == 0 {
		return "", fmt.Errorf("%w: no client certificate (tls authentication needs a TLS connection with one)", ErrUnauthenticated)
	}
	cn := c.PeerCertificates[0].Subject.CommonName
	if cn == "" {
		return "", fmt.Errorf("%w: client certificate has no common name", ErrUnauthenticated)
	}
	return cn, nil
}
