package bookie

// The TLS port (bookiePortTls) and the bookie's TLS settings. What the
// port does with bad handshakes, slow readers and closes is netio/tls.go's
// (shared with the broker's TLS port): a failed handshake is logged with
// the remote address and closes that connection only; frames are size
// checked (2 x MaxFrameSize, as the plaintext port) before anything is
// buffered; a client that lets 256 MiB of answers pile up is
// disconnected.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/magnetar-io/magnetar/internal/tlsfiles"
	"github.com/magnetar-io/magnetar/netio"
)

// tlsListener is the bookie's TLS port on netio's TLS server (Go's
// crypto/tls, a reader and a writer goroutine per connection): frames go
// to the same handleFrame, and so the same worker queues, as the netio
// port's; a full queue pauses the connection's reader.
type tlsListener struct {
	s *netio.TLSServer
}

func listenTLS(s *Server, addr string, cfg *tls.Config) (*tlsListener, error) {
	ts, err := netio.ListenTLS(addr, netio.TLSOptions{Config: cfg, MaxFrameSize: 2 * s.opts.MaxFrameSize,
		What: "bookie TLS", Logger: s.log},
		func(c *netio.TLSConn) (func([]byte) error, func(error)) {
			onFrame := func(frame []byte) error { return s.handleFrame(c, frame) }
			onClose := func(reason error) {
				if reason != nil && !errors.Is(reason, io.EOF) && !errors.Is(reason, net.ErrClosed) {
					s.log.Warn("bookie TLS connection closed", "remote", c.RemoteAddr().String(), "err", reason)
				}
			}
			return onFrame, onClose
		})
	if err != nil {
		return nil, fmt.Errorf("bookie: %w", err)
	}
	return &tlsListener{s: ts}, nil
}

func (l *tlsListener) addr() net.Addr { return l.s.Addr() }

func (l *tlsListener) close(ctx context.Context) error { return l.s.Close(ctx) }

// TLSFiles are the bookie's TLS settings under BookKeeper's keys.
type TLSFiles struct {
	CertFile  string // tlsCertificatePath (PEM)
	KeyFile   string // tlsKeyStore (PEM: tlsKeyStoreType=PEM)
	TrustFile string // tlsTrustStore (PEM bundle of the CAs of client certificates)
	// ClientAuthentication (tlsClientAuthentication) requires every client
	// to present a certificate signed by a CA of TrustFile.
	ClientAuthentication bool
	// RefreshInterval (tlsCertFilesRefreshDurationSeconds; 0: never):
	// changed files are loaded for new connections.
	RefreshInterval time.Duration
	Logger          *slog.Logger
}

// NewServerTLS loads the files; ServerOptions.TLS is its ServerConfig.
func NewServerTLS(f TLSFiles) (*tlsfiles.Reloader, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("bookie: the TLS port needs tlsCertificatePath and tlsKeyStore (PEM files)")
	}
	if f.ClientAuthentication && f.TrustFile == "" {
		return nil, errors.New("bookie: tlsClientAuthentication=true needs tlsTrustStore (the PEM CAs of client certificates)")
	}
	return tlsfiles.New(tlsfiles.Files{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustFile: f.TrustFile,
		Keys:            [3]string{"tlsCertificatePath", "tlsKeyStore", "tlsTrustStore"},
		RefreshInterval: f.RefreshInterval, Logger: f.Logger},
		func(l tlsfiles.Loaded) (*tls.Config, error) {
			cfg := &tls.Config{Certificates: []tls.Certificate{*l.Cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.NoClientCert}
			if f.ClientAuthentication {
				cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, l.Roots
			}
			return cfg, nil
		})
}
