// Package tlstest makes certificates for tests: a throwaway CA that issues
// server certificates for 127.0.0.1 and localhost and client certificates,
// as PEM files in a test's directory.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Name   string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	PEM    []byte
	dir    string
	CAFile string // PEM of the CA certificate, in the test's directory
}

// NewCA makes a CA named name with its certificate written to a file.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Name: name, cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), dir: t.TempDir()}
	ca.CAFile = filepath.Join(ca.dir, name+"-ca.pem")
	Write(t, ca.CAFile, ca.PEM)
	return ca
}

// Issue returns a certificate for cn and its key, PEM: a server
// certificate for 127.0.0.1 and localhost when server, else a client one.
func (ca *CA) Issue(t testing.TB, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// ClientCert is a client certificate for cn, ready for a tls.Config.
func (ca *CA) ClientCert(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	c, k := ca.Issue(t, cn, false)
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// Pool is a certificate pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// IssueFiles is Issue written to files; it returns their paths.
func (ca *CA) IssueFiles(t testing.TB, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	c, k := ca.Issue(t, cn, server)
	certFile = filepath.Join(ca.dir, cn+"-cert.pem")
	keyFile = filepath.Join(ca.dir, cn+"-key.pem")
	Write(t, certFile, c)
	Write(t, keyFile, k)
	return certFile, keyFile
}

// Write writes a file or fails the test.
func Write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
