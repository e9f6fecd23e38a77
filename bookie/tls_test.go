package bookie

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/internal/tlsfiles"
	"github.com/magnetar-io/magnetar/internal/tlstest"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tlsBookie is a test bookie with both ports, its CA and a client
// certificate that CA issued.
type tlsBookie struct {
	*testBookie
	ca     *tlstest.CA
	client tls.Certificate
	logs   *logBuffer
	files  TLSFiles
}

func startTLSBookie(t *testing.T, clientAuth bool, refresh time.Duration) *tlsBookie {
	t.Helper()
	ca := tlstest.NewCA(t, "bookie-ca")
	cert, key := ca.IssueFiles(t, "bookie", true)
	logs := &logBuffer{}
	files := TLSFiles{CertFile: cert, KeyFile: key, TrustFile: ca.CAFile, ClientAuthentication: clientAuth,
		RefreshInterval: refresh, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	r, err := NewServerTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	tb := startTestBookie(t, nil, nil, ServerOptions{TLSAddr: "127.0.0.1:0", TLS: r.ServerConfig(),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c, k := ca.Issue(t, "broker", false)
	cc, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsBookie{testBookie: tb, ca: ca, client: cc, logs: logs, files: files}
}

func (b *tlsBookie) clientTLS(roots []byte, certs ...tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	return &tls.Config{RootCAs: pool, Certificates: certs}
}

func (b *tlsBookie) dialTLS(t *testing.T, cfg *tls.Config) (*client.Client, error) {
	t.Helper()
	cl, err := client.Dial(context.Background(), b.srv.TLSAddr(), client.Options{TLS: cfg, DialTimeout: 5 * time.Second})
	if err == nil {
		t.Cleanup(func() { cl.Close() })
	}
	return cl, err
}

// addRead adds an entry through cl and reads it back.
func addRead(t *testing.T, cl *client.Client, ledgerID, entryID int64, payload string) error {
	t.Helper()
	if _, err := cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpAdd, LedgerID: ledgerID, EntryID: entryID,
		MasterKey: testKey, Data: entry(ledgerID, entryID, entryID-1, payload)}); err != nil {
		return err
	}
	resp, err := cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpRead, LedgerID: ledgerID, EntryID: entryID})
	mustPayload(t, resp, err, payload)
	return nil
}

// The TLS port serves the same requests into the same storage as the
// plaintext port: what one writes the other reads.
func TestTLSPortServesTheSameProtocol(t *testing.T) {
	b := startTLSBookie(t, true, 0)
	cl, err := b.dialTLS(t, b.clientTLS(b.ca.PEM, b.client))
	if err != nil {
		t.Fatalf("dial TLS: %v", err)
	}
	for i := range 200 {
		if err := addRead(t, cl, 1, int64(i), payloadOf(i)); err != nil {
			t.Fatalf("add %d over TLS: %v", i, err)
		}
	}
	big := strings.Repeat("x", 1<<20) // several TLS records per frame
	if err := addRead(t, cl, 2, 0, big); err != nil {
		t.Fatalf("1 MiB add over TLS: %v", err)
	}
	resp, err := b.read(1, 199) // the plaintext port reads what TLS wrote
	mustPayload(t, resp, err, payloadOf(199))
}

// tlsClientAuthentication: a client without a certificate, or with one
// from another CA, is refused in the handshake with an error that says so;
// the bookie logs it with the client's address and serves the others.
func TestTLSPortRefusesMissingOrUntrustedClientCert(t *testing.T) {
	b := startTLSBookie(t, true, 0)
	rogue := tlstest.NewCA(t, "rogue-ca")
	c, k := rogue.Issue(t, "mallory", false)
	rogueCert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	noCert := b.clientTLS(b.ca.PEM)
	// GetClientCertificate sends the rogue certificate even though the
	// bookie asks for its own CA's (Certificates alone would not).
	untrusted := b.clientTLS(b.ca.PEM)
	untrusted.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &rogueCert, nil }
	for name, cfg := range map[string]*tls.Config{"no certificate": noCert, "untrusted certificate": untrusted} {
		cl, err := b.dialTLS(t, cfg)
		if err == nil {
			// TLS 1.3: the client finishes its side before the bookie
			// checks the certificate; the first request gets the alert.
			err = addRead(t, cl, 3, 0, "refused")
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%s: got %v, want a handshake error about the certificate", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
	waitLog(t, b.logs, "bookie TLS handshake failed")
	if !strings.Contains(b.logs.String(), "remote=127.0.0.1:") {
		t.Fatalf("handshake failure logged without the remote address:\n%s", b.logs)
	}
	cl, err := b.dialTLS(t, b.clientTLS(b.ca.PEM, b.client))
	if err != nil {
		t.Fatalf("trusted client after the refused ones: %v", err)
	}
	if err := addRead(t, cl, 3, 0, "after"); err != nil {
		t.Fatalf("trusted client after the refused ones: %v", err)
	}
}

// A client must verify the bookie: one that trusts another CA fails.
func TestTLSClientRefusesAnUntrustedBookie(t *testing.T) {
	b := startTLSBookie(t, false, 0)
	other := tlstest.NewCA(t, "other-ca")
	_, err := b.dialTLS(t, b.clientTLS(other.PEM))
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") ||
		!strings.Contains(err.Error(), b.srv.TLSAddr()) {
		t.Fatalf("got %v, want an unknown-authority error naming %s", err, b.srv.TLSAddr())
	}
}

// Plaintext bookie requests and garbage sent to the TLS port: the
// connection is closed and logged with the sender's address, and the
// bookie goes on serving a TLS client that was connected all along.
func TestTLSPortClosesPlaintextAndGarbage(t *testing.T) {
	b := startTLSBookie(t, false, 0)
	good, err := b.dialTLS(t, b.clientTLS(b.ca.PEM))
	if err != nil {
		t.Fatal(err)
	}
	plain := bkproto.AppendRequest(nil, &bkproto.Request{Op: bkproto.OpRead, LedgerID: 1, EntryID: 0, RequestID: 1})
	for name, payload := range map[string][]byte{"plaintext request": plain, "garbage": bytes.Repeat([]byte{0xde, 0xad}, 4096)} {
		conn, err := net.Dial("tcp", b.srv.TLSAddr())
		if err != nil {
			t.Fatal(err)
		}
		local := conn.LocalAddr().String()
		_, _ = conn.Write(payload)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(conn)
		conn.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%s: the connection was not closed", name)
		}
		if bytes.Contains(got, []byte{0, 0}) && len(got) >= bkproto.HeaderLen && !bytes.HasPrefix(got, []byte{0x15}) {
			t.Fatalf("%s: got a bookie answer over plaintext: %x", name, got)
		}
		waitLog(t, b.logs, "remote="+local)
	}
	if err := addRead(t, good, 4, 0, "still serving"); err != nil {
		t.Fatalf("TLS client after the bad connections: %v", err)
	}
}

// tlsCertFilesRefreshDurationSeconds: a certificate replaced on disk is
// served to new connections; open ones keep theirs.
func TestTLSPortReloadsChangedCertificate(t *testing.T) {
	b := startTLSBookie(t, false, time.Millisecond)
	before, err := b.dialTLS(t, b.clientTLS(b.ca.PEM))
	if err != nil {
		t.Fatal(err)
	}
	next := tlstest.NewCA(t, "next-ca")
	c, k := next.Issue(t, "bookie", true)
	tlstest.Write(t, b.files.CertFile, c)
	tlstest.Write(t, b.files.KeyFile, k)
	time.Sleep(5 * time.Millisecond)
	if _, err := b.dialTLS(t, b.clientTLS(b.ca.PEM)); err == nil {
		t.Fatal("a client trusting only the old CA still connected after the certificate changed")
	}
	after, err := b.dialTLS(t, b.clientTLS(next.PEM))
	if err != nil {
		t.Fatalf("client trusting the new CA: %v", err)
	}
	if err := addRead(t, after, 5, 0, "new cert"); err != nil {
		t.Fatal(err)
	}
	if err := addRead(t, before, 5, 1, "old conn"); err != nil {
		t.Fatalf("connection opened before the reload: %v", err)
	}
	waitLog(t, b.logs, "certificate files reloaded")
}

// A half-written certificate keeps the previous one.
func TestTLSReloadKeepsTheOldCertificateOnABadFile(t *testing.T) {
	b := startTLSBookie(t, false, time.Millisecond)
	tlstest.Write(t, b.files.CertFile, []byte("-----BEGIN CERTIFICATE-----\ntrunc"))
	time.Sleep(5 * time.Millisecond)
	cl, err := b.dialTLS(t, b.clientTLS(b.ca.PEM))
	if err != nil {
		t.Fatalf("dial after a bad certificate file: %v", err)
	}
	if err := addRead(t, cl, 6, 0, "kept"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, b.logs, "keeping the previous configuration")
}

func TestTLSOnlyBookie(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.IssueFiles(t, "bookie", true)
	r, err := NewServerTLS(TLSFiles{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	memStorage := func(entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(nil), nil }
	core, err := OpenCore(engine.NewMem(), []string{"/journal"}, journal.Options{Logger: quietLogger()}, memStorage, Options{Logger: quietLogger(),
		LedgerDirs: []string{"/ledgers"}, DiskUsage: func(string) (uint64, uint64, error) { return 1 << 30, 1 << 31, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	srv, err := Serve(core, ServerOptions{TLSAddr: "127.0.0.1:0", TLS: r.ServerConfig(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	if srv.Addr() != "" {
		t.Fatalf("plaintext port %q served without bookiePort", srv.Addr())
	}
	pool, _ := tlsfiles.LoadPool(ca.CAFile)
	cl, err := client.Dial(context.Background(), srv.TLSAddr(), client.Options{TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := addRead(t, cl, 7, 0, "tls only"); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(core, ServerOptions{Logger: quietLogger()}); err == nil {
		t.Fatal("Serve without any port succeeded")
	}
}

func waitLog(t *testing.T, logs *logBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q:\n%s", want, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A full add queue pauses a TLS connection between frames and resumes it
// once the request is in: back-pressure, not rejection, as on the
// plaintext port (TestBackPressure).
func TestTLSPortBackPressure(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.IssueFiles(t, "bookie", true)
	r, err := NewServerTLS(TLSFiles{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	tb := startTestBookie(t, nil, nil, ServerOptions{AddWorkers: 1, MaxPendingAdds: 1, TLSAddr: "127.0.0.1:0", TLS: r.ServerConfig()})
	pool, _ := tlsfiles.LoadPool(ca.CAFile)
	cl, err := client.Dial(context.Background(), tb.srv.TLSAddr(), client.Options{TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		cl.Send(&bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1, EntryID: int64(i), MasterKey: testKey, Data: entry(1, int64(i), -1, payloadOf(i))},
			func(_ *bkproto.Response, err error) {
				if err != nil {
					errs <- err
				}
				wg.Done()
			})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("add failed under back-pressure over TLS: %v", err)
	}
	resp, err := tb.read(1, n-1)
	mustPayload(t, resp, err, payloadOf(n-1))
}
