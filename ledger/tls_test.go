package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/internal/tlstest"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// startTLSBookie starts a bookie serving TLS with files (and plaintext
// too when plain) and registers both endpoints as id.
func startTLSBookie(t *testing.T, meta *metadata.MemoryServer, id string, files *bookie.TLSFiles, plain bool) {
	t.Helper()
	open := func(entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(nil), nil }
	core, err := bookie.OpenCore(engine.NewMem(), []string{"/journal"}, journal.Options{Logger: quietLog(), MaxFileSize: 64 << 20}, open,
		bookie.Options{Logger: quietLog(), LedgerDirs: []string{"/"}, DiskUsage: func(string) (uint64, uint64, error) { return 1 << 30, 1 << 31, nil }})
	if err != nil {
		t.Fatal(err)
	}
	sopts := bookie.ServerOptions{Logger: quietLog()}
	if plain {
		sopts.Addr = "127.0.0.1:0"
	}
	if files != nil {
		r, err := bookie.NewServerTLS(*files)
		if err != nil {
			t.Fatal(err)
		}
		sopts.TLSAddr, sopts.TLS = "127.0.0.1:0", r.ServerConfig()
	}
	srv, err := bookie.Serve(core, sopts)
	if err != nil {
		t.Fatal(err)
	}
	store := meta.NewSession()
	reg := registry.Registration{BookieID: id, Address: srv.Addr(), TLSAddress: srv.TLSAddr()}
	if _, err := registry.Register(context.Background(), store, reg, quietLog()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()); _ = core.Close(); store.Close() })
}

// tlsSetup is a CA, bookie TLS files requiring client certificates
// from it, and a broker's client files.
type tlsSetup struct {
	ca     *tlstest.CA
	bookie bookie.TLSFiles
	client BookieTLSFiles
}

func newTLSSetup(t *testing.T) tlsSetup {
	ca := tlstest.NewCA(t, "cluster-ca")
	bc, bk := ca.IssueFiles(t, "bookie", true)
	cc, ck := ca.IssueFiles(t, "broker", false)
	return tlsSetup{ca: ca,
		bookie: bookie.TLSFiles{CertFile: bc, KeyFile: bk, TrustFile: ca.CAFile, ClientAuthentication: true, Logger: quietLog()},
		client: BookieTLSFiles{TrustFile: ca.CAFile, CertFile: cc, KeyFile: ck, Logger: quietLog()}}
}

func tlsClient(t *testing.T, meta *metadata.MemoryServer, files BookieTLSFiles) *Client {
	t.Helper()
	tlsCfg, err := NewBookieTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	return netClient(t, meta, Config{BookieTLS: tlsCfg})
}

// Ledgers written and read, recovered by a second client, entirely over
// the bookies' TLS ports with client certificates required.
func TestLedgerOverBookieTLS(t *testing.T) {
	meta := metadata.NewMemoryServer()
	s := newTLSSetup(t)
	for i := range 3 {
		startTLSBookie(t, meta, fmt.Sprintf("tls-bookie-%d", i), &s.bookie, false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := tlsClient(t, meta, s.client).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		if _, err := w.Append(ctx, []byte(fmt.Sprintf("entry-%d-%s", i, strings.Repeat("x", i*37)))); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	r, err := tlsClient(t, meta, s.client).OpenRecover(ctx, w.ID(), []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := r.Read(ctx, 0, n-1)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if want := fmt.Sprintf("entry-%d-%s", i, strings.Repeat("x", i*37)); string(e.Payload) != want {
			t.Fatalf("entry %d: %.40q, want %.40q", i, e.Payload, want)
		}
	}
	if len(entries) != n {
		t.Fatalf("read %d entries, want %d", len(entries), n)
	}
}

// A TLS client never uses a bookie's plaintext port: a bookie without a
// TLS endpoint is not placed, and dialing one fails naming it.
func TestBookieTLSNoPlaintextFallback(t *testing.T) {
	meta := metadata.NewMemoryServer()
	s := newTLSSetup(t)
	startTLSBookie(t, meta, "tls-bookie", &s.bookie, true)
	startTLSBookie(t, meta, "plain-bookie", nil, true)
	cl := tlsClient(t, meta, s.client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cl.Create(ctx, CreateOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("p")})
	if err == nil || !strings.Contains(err.Error(), "plain-bookie") || !strings.Contains(err.Error(), "no TLS endpoint") {
		t.Fatalf("create over a plaintext-only bookie: %v, want an error naming plain-bookie", err)
	}
	// A ledger a plaintext client put on that bookie: reading it over TLS
	// fails with the reason, not over plaintext.
	_, err = cl.ownNet.dial("plain-bookie")
	if err == nil || !strings.Contains(err.Error(), "bookie plain-bookie has no TLS endpoint") {
		t.Fatalf("dial: %v", err)
	}
	// And a plaintext client skips a TLS-only bookie likewise.
	startTLSBookie(t, meta, "tls-only-bookie", &s.bookie, false)
	plain := netClient(t, meta, Config{})
	waitFor(t, 10*time.Second, "the TLS-only bookie is seen", func() (bool, string) {
		_, ok := plain.reg.Bookie("tls-only-bookie")
		return ok, ""
	})
	_, err = plain.ownNet.dial("tls-only-bookie")
	if err == nil || !strings.Contains(err.Error(), "serves only TLS") {
		t.Fatalf("plaintext dial of a TLS-only bookie: %v", err)
	}
}

// A client without the certificate the bookies require: requests fail
// with the handshake's reason; the bookies keep serving trusted clients.
func TestBookieTLSClientCertRequired(t *testing.T) {
	meta := metadata.NewMemoryServer()
	s := newTLSSetup(t)
	startTLSBookie(t, meta, "tls-bookie", &s.bookie, false)
	noCert := s.client
	noCert.CertFile, noCert.KeyFile = "", ""
	tr := tlsClient(t, meta, noCert).transport
	_, err := doInfo(tr, "tls-bookie")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("request without a client certificate: %v, want a certificate error", err)
	}
	t.Logf("refused: %v", err)
	if _, err := doInfo(tlsClient(t, meta, s.client).transport, "tls-bookie"); err != nil {
		t.Fatalf("trusted client: %v", err)
	}
}

func doInfo(tr Transport, id string) (*bkproto.Response, error) {
	type res struct {
		r   *bkproto.Response
		err error
	}
	ch := make(chan res, 1)
	tr.Send(id, &bkproto.Request{Op: bkproto.OpInfo}, func(r *bkproto.Response, err error) { ch <- res{r, err} })
	select {
	case x := <-ch:
		return x.r, x.err
	case <-time.After(20 * time.Second):
		return nil, fmt.Errorf("%w: no answer", client.ErrDisconnected)
	}
}

// BenchmarkAppendOverBookieTLS compares ledger appends (1 KiB, E=3 Qw=2
// Qa=2, 256 in flight) through three loopback bookies' plaintext and TLS
// ports (journal on the mem engine without syncs, so the network path
// dominates):
// go test -run '^$' -bench AppendOverBookieTLS -benchtime 5s ./ledger/
func BenchmarkAppendOverBookieTLS(b *testing.B) {
	for _, useTLS := range []bool{false, true} {
		name := map[bool]string{false: "plaintext", true: "tls"}[useTLS]
		b.Run(name, func(b *testing.B) {
			meta := metadata.NewMemoryServer()
			ca := tlstest.NewCA(b, "bench-ca")
			bc, bk := ca.IssueFiles(b, "bookie", true)
			files := bookie.TLSFiles{CertFile: bc, KeyFile: bk, Logger: quietLog()}
			for i := range 3 {
				benchBookie(b, meta, fmt.Sprintf("b%d", i), &files)
			}
			cfg := Config{Store: meta.NewSession(), Logger: quietLog(), AddTimeout: 30 * time.Second}
			if useTLS {
				f, err := NewBookieTLS(BookieTLSFiles{TrustFile: ca.CAFile, Logger: quietLog()})
				if err != nil {
					b.Fatal(err)
				}
				cfg.BookieTLS = f
			}
			cl, err := New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			w, err := cl.Create(context.Background(), CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("p")})
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 1024)
			window := make(chan struct{}, 256)
			errs := make(chan error, 1)
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			for range b.N {
				window <- struct{}{}
				w.AppendAsync(payload, func(_ int64, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
					<-window
				})
			}
			for range cap(window) {
				window <- struct{}{}
			}
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
		})
	}
}

// benchBookie is startTLSBookie for benchmarks (both ports).
func benchBookie(b *testing.B, meta *metadata.MemoryServer, id string, files *bookie.TLSFiles) {
	open := func(entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(nil), nil }
	core, err := bookie.OpenCore(engine.NewMem(), []string{"/journal"}, journal.Options{Logger: quietLog(), MaxFileSize: 64 << 20, SkipSync: true}, open,
		bookie.Options{Logger: quietLog(), LedgerDirs: []string{"/"}, DiskUsage: func(string) (uint64, uint64, error) { return 1 << 30, 1 << 31, nil }})
	if err != nil {
		b.Fatal(err)
	}
	r, err := bookie.NewServerTLS(*files)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := bookie.Serve(core, bookie.ServerOptions{Addr: "127.0.0.1:0", TLSAddr: "127.0.0.1:0", TLS: r.ServerConfig(), Logger: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	store := meta.NewSession()
	if _, err := registry.Register(context.Background(), store, registry.Registration{BookieID: id, Address: srv.Addr(), TLSAddress: srv.TLSAddr()}, quietLog()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close(context.Background()); _ = core.Close(); store.Close() })
}
