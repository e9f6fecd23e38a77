package ledger

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/magnetar-io/magnetar/internal/tlsfiles"
)

// BookieTLSFiles are a broker's TLS settings for its bookies under
// Pulsar's keys (bookkeeperTLSClientAuthentication turns them on).
type BookieTLSFiles struct {
	TrustFile string // bookkeeperTLSTrustCertsFilePath: CAs of bookie certificates (system roots if empty)
	CertFile  string // bookkeeperTLSCertificateFilePath: client certificate, for bookies that require one
	KeyFile   string // bookkeeperTLSKeyFilePath
	// RefreshInterval (bookkeeperTLSCertFilesRefreshDurationSeconds; 0:
	// never): changed files are used for new connections.
	RefreshInterval time.Duration
	Logger          *slog.Logger
}

// NewBookieTLS loads the files and returns what Config.BookieTLS wants:
// the current client configuration, reloaded when the files change.
func NewBookieTLS(f BookieTLSFiles) (func() *tls.Config, error) {
	r, err := tlsfiles.New(tlsfiles.Files{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustFile: f.TrustFile,
		Keys:            [3]string{"bookkeeperTLSCertificateFilePath", "bookkeeperTLSKeyFilePath", "bookkeeperTLSTrustCertsFilePath"},
		RefreshInterval: f.RefreshInterval, Logger: f.Logger},
		func(l tlsfiles.Loaded) (*tls.Config, error) {
			cfg := &tls.Config{RootCAs: l.Roots, MinVersion: tls.VersionTLS12}
			if l.Cert != nil {
				cfg.Certificates = []tls.Certificate{*l.Cert}
			}
			return cfg, nil
		})
	if err != nil {
		return nil, err
	}
	return r.Current, nil
}
