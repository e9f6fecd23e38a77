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
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
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
}

// ServerTLS serves the current *tls.Config, reloading the files.
type ServerTLS struct {
	files TLSFiles
	now   func() time.Time

	mu       sync.Mutex
	current  *tls.Config
	checked  time.Time
	modTimes [3]time.Time
}

// NewServerTLS loads the files.
func NewServerTLS(files TLSFiles) (*ServerTLS, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("tls: tlsCertificateFilePath and tlsKeyFilePath are required for the TLS ports")
	}
	if files.Logger == nil {
		files.Logger = slog.Default()
	}
	s := &ServerTLS{files: files, now: time.Now}
	cfg, err := s.load()
	if err != nil {
		return nil, err
	}
	s.current, s.checked, s.modTimes = cfg, s.now(), s.stat()
	return s, nil
}

// Config is the *tls.Config to serve with: each handshake gets the
// current configuration.
func (s *ServerTLS) Config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.get(), nil }}
}

func (s *ServerTLS) get() *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files.RefreshInterval <= 0 || s.now().Sub(s.checked) < s.files.RefreshInterval {
		return s.current
	}
	s.checked = s.now()
	if mt := s.stat(); mt != s.modTimes {
		cfg, err := s.load()
		if err != nil {
			s.files.Logger.Error("tls: reloading the certificate failed; keeping the previous one", "err", err)
			return s.current
		}
		s.current, s.modTimes = cfg, mt
		s.files.Logger.Info("tls: certificate reloaded", "cert", s.files.CertFile)
	}
	return s.current
}

func (s *ServerTLS) stat() [3]time.Time {
	var out [3]time.Time
	for i, f := range []string{s.files.CertFile, s.files.KeyFile, s.files.TrustCertsFile} {
		if fi, err := os.Stat(f); err == nil && f != "" {
			out[i] = fi.ModTime()
		}
	}
	return out
}

func (s *ServerTLS) load() (*tls.Config, error) {
	f := s.files
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load tlsCertificateFilePath/tlsKeyFilePath: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.TrustCertsFile != "" {
		pem, err := os.ReadFile(f.TrustCertsFile)
		if err != nil {
			return nil, fmt.Errorf("tls: tlsTrustCertsFilePath: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: tlsTrustCertsFilePath %s: no PEM certificate", f.TrustCertsFile)
		}
		cfg.ClientCAs = pool
	}
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
