// Package tlsfiles loads TLS configurations from PEM files and reloads
// them when the files change: the bookie's TLS port (tlsCertificatePath,
// tlsKeyStore, tlsTrustStore) and the broker's ledger client to bookies
// (bookkeeperTLS*FilePath).
//
// Behaviour:
//   - The certificate and key are PEM (BookKeeper's tlsKeyStoreType=PEM);
//     the trust file is a PEM bundle of CA certificates. Either part may
//     be absent (a client without a certificate; system roots).
//   - The files' modification times are checked at most every
//     RefreshInterval, when a configuration is asked for (a handshake or
//     a dial): changed files are loaded for new connections, open ones
//     keep what they negotiated. A load that fails keeps the previous
//     configuration and is logged, so a half-copied certificate does not
//     take the port down.
//   - Errors name the configuration keys the files came from (Keys), so
//     an operator sees which line of which file to fix.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Files are the PEM files of one TLS configuration.
type Files struct {
	CertFile, KeyFile, TrustFile string
	// Keys name CertFile, KeyFile and TrustFile in the configuration, for
	// errors and logs.
	Keys [3]string
	// RefreshInterval: how often the files are checked for changes (0:
	// never reloaded).
	RefreshInterval time.Duration
	Logger          *slog.Logger
	// Now is the clock (tests; default time.Now).
	Now func() time.Time
}

// Loaded is what the files hold: Cert is nil without a certificate,
// Roots nil without a trust file.
type Loaded struct {
	Cert  *tls.Certificate
	Roots *x509.CertPool
}

// Build makes the *tls.Config from what was loaded; it runs at start and
// at every reload.
type Build func(Loaded) (*tls.Config, error)

// Reloader holds the current configuration.
//
// Lock rules: mu guards current, checked and modTimes; files are read
// under it (a reload is rare and small).
type Reloader struct {
	files Files
	build Build
	now   func() time.Time

	mu       sync.Mutex
	current  *tls.Config
	checked  time.Time
	modTimes [3]time.Time
}

// New loads the files and builds the first configuration.
func New(files Files, build Build) (*Reloader, error) {
	if (files.CertFile == "") != (files.KeyFile == "") {
		return nil, fmt.Errorf("tls: %s and %s go together: set both or neither", files.Keys[0], files.Keys[1])
	}
	if files.Logger == nil {
		files.Logger = slog.Default()
	}
	r := &Reloader{files: files, build: build, now: files.Now}
	if r.now == nil {
		r.now = time.Now
	}
	cfg, err := r.load()
	if err != nil {
		return nil, err
	}
	r.current, r.checked, r.modTimes = cfg, r.now(), r.stat()
	return r, nil
}

// Current returns the configuration, reloading changed files first when
// RefreshInterval has passed since the last check. The result must not be
// modified (clone it).
func (r *Reloader) Current() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files.RefreshInterval <= 0 || r.now().Sub(r.checked) < r.files.RefreshInterval {
		return r.current
	}
	r.checked = r.now()
	mt := r.stat()
	if mt == r.modTimes {
		return r.current
	}
	cfg, err := r.load()
	if err != nil {
		r.files.Logger.Error("tls: reloading changed files failed; keeping the previous configuration", "err", err)
		return r.current
	}
	r.current, r.modTimes = cfg, mt
	r.files.Logger.Info("tls: certificate files reloaded", "cert", r.files.CertFile, "trust", r.files.TrustFile)
	return r.current
}

// ServerConfig is a server-side *tls.Config that gives each handshake
// the current configuration.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.Current(), nil }}
}

func (r *Reloader) stat() [3]time.Time {
	var out [3]time.Time
	for i, f := range []string{r.files.CertFile, r.files.KeyFile, r.files.TrustFile} {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			out[i] = fi.ModTime()
		}
	}
	return out
}

func (r *Reloader) load() (*tls.Config, error) {
	f := r.files
	var l Loaded
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load %s=%s and %s=%s (PEM): %w", f.Keys[0], f.CertFile, f.Keys[1], f.KeyFile, err)
		}
		l.Cert = &cert
	}
	if f.TrustFile != "" {
		pool, err := LoadPool(f.TrustFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %s: %w", f.Keys[2], err)
		}
		l.Roots = pool
	}
	cfg, err := r.build(l)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, errors.New("tls: no configuration built")
	}
	return cfg, nil
}

// LoadPool reads a PEM bundle of CA certificates.
func LoadPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
