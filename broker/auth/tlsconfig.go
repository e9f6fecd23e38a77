package auth

// Server-side TLS for the TLS ports (brokerServicePortTls,
// webServicePortTls).
//
// Behaviour:
//   - The certificate and key are tlsCertificateFilePath and
//     tlsKeyFilePath; client certificates are verified against
//     tlsTrustCertsFilePath (the system roots when empty).
//   - A client certificate is optional and, when given, must be trusted;
//     tlsRequireTrustedClientCertOnConnect makes it required;
//     tlsAllowInsecureConnection accepts any client certificate unverified
//     (as Pulsar does; its CN then becomes the role under tls
//     authentication, so only for tests).
//   - tlsProtocols (TLSv1.2, TLSv1.3) bound the versions, TLSv1.2 at least
//     by default; tlsCiphers lists IANA suite names (TLS 1.2; Go picks TLS
//     1.3's).
//   - The files are checked for changes at most every
//     tlsCertRefreshCheckDurationSec (on the next handshake): changed files
//     are loaded for new connections; a load that fails keeps the old
//     certificate and is logged.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/internal/tlsfiles"
)

// TLSFiles is the TLS configuration, under Pulsar's keys.
type TLSFiles struct {
	CertFile, KeyFile, TrustCertsFile string
	AllowInsecureConnection           bool
	RequireTrustedClientCert          bool
	Protocols, Ciphers                []string
	// RefreshInterval is tlsCertRefreshCheckDurationSec (0: never reload).
	RefreshInterval time.Duration
	Logger          *slog.Logger
	now             func() time.Time // tests
}

// ServerTLS serves the current *tls.Config, reloading the files
// (internal/tlsfiles, which the bookie's TLS port shares).
type ServerTLS struct {
	r *tlsfiles.Reloader
}

// NewServerTLS loads the files.
func NewServerTLS(files TLSFiles) (*ServerTLS, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("tls: tlsCertificateFilePath and tlsKeyFilePath are required for the TLS ports")
	}
	r, err := tlsfiles.New(tlsfiles.Files{CertFile: files.CertFile, KeyFile: files.KeyFile, TrustFile: files.TrustCertsFile,
		Keys:            [3]string{"tlsCertificateFilePath", "tlsKeyFilePath", "tlsTrustCertsFilePath"},
		RefreshInterval: files.RefreshInterval, Logger: files.Logger, Now: files.now},
		func(l tlsfiles.Loaded) (*tls.Config, error) { return serverConfig(files, l) })
	if err != nil {
		return nil, err
	}
	return &ServerTLS{r: r}, nil
}

// Config is the *tls.Config to serve with: each handshake gets the
// current configuration.
func (s *ServerTLS) Config() *tls.Config { return s.r.ServerConfig() }

// serverConfig builds the server configuration from the loaded files.
func serverConfig(f TLSFiles, l tlsfiles.Loaded) (*tls.Config, error) {
	cfg := &tls.Config{Certificates: []tls.Certificate{*l.Cert}, MinVersion: tls.VersionTLS12, ClientCAs: l.Roots}
	switch {
	case f.AllowInsecureConnection && f.RequireTrustedClientCert:
		cfg.ClientAuth = tls.RequireAnyClientCert
	case f.AllowInsecureConnection:
		cfg.ClientAuth = tls.RequestClientCert
	case f.RequireTrustedClientCert:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if err := setProtocols(cfg, f.Protocols); err != nil {
		return nil, err
	}
	if err := setCiphers(cfg, f.Ciphers); err != nil {
		return nil, err
	}
	return cfg, nil
}

var tlsVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

func setProtocols(cfg *tls.Config, protocols []string) error {
	if len(protocols) == 0 {
		return nil
	}
	cfg.MinVersion, cfg.MaxVersion = 0, 0
	for _, p := range protocols {
		v, ok := tlsVersions[strings.TrimSpace(p)]
		if !ok {
			return fmt.Errorf("tls: tlsProtocols %q: want TLSv1.2 or TLSv1.3 (older versions are not served)", p)
		}
		if cfg.MinVersion == 0 || v < cfg.MinVersion {
			cfg.MinVersion = v
		}
		if v > cfg.MaxVersion {
			cfg.MaxVersion = v
		}
	}
	return nil
}

func setCiphers(cfg *tls.Config, ciphers []string) error {
	if len(ciphers) == 0 {
		return nil
	}
	byName := map[string]uint16{}
	for _, c := range tls.CipherSuites() {
		byName[c.Name] = c.ID
	}
	for _, name := range ciphers {
		id, ok := byName[strings.TrimSpace(name)]
		if !ok {
			return fmt.Errorf("tls: tlsCiphers %q is not a supported cipher suite", name)
		}
		cfg.CipherSuites = append(cfg.CipherSuites, id)
	}
	return nil
}
