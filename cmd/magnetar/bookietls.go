package main

// TLS between brokers and bookies: the bookie's TLS port under
// BookKeeper's keys (bk_server.conf) and the broker's ledger client under
// Pulsar's (broker.conf). docs/security.md, "Encrypting broker-to-bookie
// traffic", shows both sides.

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/ledger"
)

// bookieTLSSettings are a bookie's TLS keys.
type bookieTLSSettings struct {
	// port is bookiePortTls (our extension: BookKeeper upgrades its one
	// port with START_TLS, which a gnet connection cannot do); 0: off.
	port                          int
	provider, factoryClass        string // tlsProvider (JDK, OpenSSL), tlsProviderFactoryClass: read, Go's crypto/tls is used
	certFile, keyFile, trustFile  string // tlsCertificatePath, tlsKeyStore, tlsTrustStore
	keyStoreType, trustStoreType  string // PEM only
	clientAuth                    bool   // tlsClientAuthentication
	refresh                       time.Duration
	clientTrust, clientCert       string // clientTrustStore, clientCertificatePath: the bookie's own ledger client
	clientKey                     string // clientKeyStore
	clientKeyType, clientTrustTyp string
}

func (s *bookieTLSSettings) register(fs *flag.FlagSet) {
	fs.IntVar(&s.port, "bookie-port-tls", 0, "bookiePortTls: the bookie protocol over TLS (0: off; our extension, see docs/security.md)")
}

func (s *bookieTLSSettings) addConfKeys(keys map[string]confSetter) {
	for k, v := range map[string]confSetter{
		"bookiePortTls": setTLSPort(&s.port), "tlsProvider": setString(&s.provider),
		"tlsProviderFactoryClass": setString(&s.factoryClass),
		"tlsCertificatePath":      setString(&s.certFile), "tlsKeyStore": setString(&s.keyFile),
		"tlsTrustStore": setString(&s.trustFile), "tlsKeyStoreType": setString(&s.keyStoreType),
		"tlsTrustStoreType": setString(&s.trustStoreType), "tlsClientAuthentication": setBool(&s.clientAuth),
		"tlsCertFilesRefreshDurationSeconds": setDuration(&s.refresh, time.Second),
		"clientTrustStore":                   setString(&s.clientTrust), "clientCertificatePath": setString(&s.clientCert),
		"clientKeyStore": setString(&s.clientKey), "clientKeyStoreType": setString(&s.clientKeyType),
		"clientTrustStoreType": setString(&s.clientTrustTyp),
	} {
		keys[k] = v
	}
}

// check refuses what this build cannot honour, naming the key.
func (s *bookieTLSSettings) check(log *slog.Logger) error {
	switch p := strings.ToUpper(strings.TrimSpace(s.provider)); p {
	case "", "JDK", "OPENSSL":
		if p != "" && s.port > 0 {
			log.Info("tlsProvider=" + s.provider + ": TLS is Go's crypto/tls whatever the provider")
		}
	default:
		return fmt.Errorf("tlsProvider %q: want JDK or OpenSSL (either way TLS is Go's crypto/tls)", s.provider)
	}
	for key, v := range map[string]string{"tlsKeyStoreType": s.keyStoreType, "tlsTrustStoreType": s.trustStoreType,
		"clientKeyStoreType": s.clientKeyType, "clientTrustStoreType": s.clientTrustTyp} {
		if v != "" && !strings.EqualFold(v, "PEM") {
			return fmt.Errorf("%s=%s: only PEM files are read (convert a JKS or PKCS12 store with keytool/openssl)", key, v)
		}
	}
	return nil
}

// server builds the TLS port's configuration (nil when the port is off).
func (s *bookieTLSSettings) server(log *slog.Logger) (*tls.Config, error) {
	if s.port <= 0 {
		return nil, nil
	}
	r, err := bookie.NewServerTLS(bookie.TLSFiles{CertFile: s.certFile, KeyFile: s.keyFile, TrustFile: s.trustFile,
		ClientAuthentication: s.clientAuth, RefreshInterval: s.refresh, Logger: log})
	if err != nil {
		return nil, err
	}
	return r.ServerConfig(), nil
}

// client is the bookie's own ledger client's TLS (garbage collection,
// auditor, re-replication), on when clientTrustStore is set.
func (s *bookieTLSSettings) client(log *slog.Logger) (func() *tls.Config, error) {
	if s.clientTrust == "" {
		return nil, nil
	}
	return ledger.NewBookieTLS(ledger.BookieTLSFiles{TrustFile: s.clientTrust, CertFile: s.clientCert, KeyFile: s.clientKey,
		RefreshInterval: s.refresh, Logger: log})
}

// bookkeeperTLSSettings are a broker's keys for TLS to its bookies
// (Pulsar's bookkeeperTLS*).
type bookkeeperTLSSettings struct {
	enabled                      bool // bookkeeperTLSClientAuthentication: gates the rest, as in Pulsar
	trustFile, certFile, keyFile string
	keyType, trustType           string // bookkeeperTLSKeyFileType, bookkeeperTLSTrustCertTypes: PEM only
	refresh                      time.Duration
}

func defaultBookkeeperTLSSettings() bookkeeperTLSSettings {
	return bookkeeperTLSSettings{refresh: 300 * time.Second}
}

func (s *bookkeeperTLSSettings) addSetters(setters map[string]confSetter) {
	for k, v := range map[string]confSetter{
		"bookkeeperTLSClientAuthentication":            setBool(&s.enabled),
		"bookkeeperTLSTrustCertsFilePath":              setString(&s.trustFile),
		"bookkeeperTLSCertificateFilePath":             setString(&s.certFile),
		"bookkeeperTLSKeyFilePath":                     setString(&s.keyFile),
		"bookkeeperTLSKeyFileType":                     setString(&s.keyType),
		"bookkeeperTLSTrustCertTypes":                  setString(&s.trustType),
		"bookkeeperTLSCertFilesRefreshDurationSeconds": setDuration(&s.refresh, time.Second),
	} {
		setters[k] = v
	}
}

// build returns ledger.Config.BookieTLS (nil: plaintext to bookies).
func (s *bookkeeperTLSSettings) build(log *slog.Logger) (func() *tls.Config, error) {
	if !s.enabled {
		if s.trustFile != "" || s.certFile != "" {
			log.Warn("bookkeeperTLS* files are set but bookkeeperTLSClientAuthentication=false: bookies are reached in plaintext")
		}
		return nil, nil
	}
	for key, v := range map[string]string{"bookkeeperTLSKeyFileType": s.keyType, "bookkeeperTLSTrustCertTypes": s.trustType} {
		if v != "" && !strings.EqualFold(v, "PEM") {
			return nil, fmt.Errorf("%s=%s: only PEM files are read", key, v)
		}
	}
	if s.trustFile == "" {
		log.Warn("bookkeeperTLSTrustCertsFilePath is empty: bookie certificates are verified against the system roots")
	}
	f, err := ledger.NewBookieTLS(ledger.BookieTLSFiles{TrustFile: s.trustFile, CertFile: s.certFile, KeyFile: s.keyFile,
		RefreshInterval: s.refresh, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("bookkeeperTLSClientAuthentication: %w", err)
	}
	return f, nil
}

var errNoBookiePort = errors.New("bookiePort and bookiePortTls are both off: the bookie would serve nothing")
