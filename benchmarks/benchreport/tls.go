package main

// The TLS section (security issue): "TLS publish throughput of 1 KiB
// batched messages at least 0.8 x plaintext". One durable standalone
// serves both its plaintext port and brokerServicePortTls (a throwaway CA
// and a 127.0.0.1 certificate made here); the 1 KiB maximum runs over
// each port in turn, alternated, and the target compares the medians.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tlsRounds is how many plaintext and TLS runs alternate: this machine is
// noisy, so one of each says little.
const tlsRounds = 2

// pki is a throwaway CA and a server certificate for 127.0.0.1.
type pki struct{ ca, cert, key string }

// writePKI makes a CA and a certificate it signed for 127.0.0.1 in dir.
func writePKI(dir string) (pki, error) {
	p := pki{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "server.pem"), key: filepath.Join(dir, "server.key")}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "benchreport CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return p, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return p, err
	}
	for path, b := range map[string][]byte{
		p.ca:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		p.cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		p.key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return p, err
		}
	}
	return p, nil
}

// withKeys writes a copy of the configuration file base with lines
// appended (later keys win) to path.
func withKeys(base, path string, lines ...string) error {
	b, err := os.ReadFile(base)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, []byte("\n"+strings.Join(lines, "\n")+"\n")...), 0o644)
}

// runTLS measures the 1 KiB maximum over the plaintext and the TLS port
// of one standalone, alternating.
func (r *runner) runTLS(ctx context.Context) error {
	d := &r.res.TLS
	dir := filepath.Join(r.o.work, "tls")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p, err := writePKI(dir)
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	conf := filepath.Join(dir, "standalone-tls.conf")
	if err := withKeys(r.o.config, conf, "brokerServicePortTls="+itoa(port),
		"tlsCertificateFilePath="+p.cert, "tlsKeyFilePath="+p.key); err != nil {
		return err
	}
	t, err := r.startStandaloneConf(conf, filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	defer t.servers[0].stop()
	d.Ran = true
	d.Setup = "one durable standalone with brokerServicePortTls (ECDSA P-256 certificate, Go crypto/tls, TLS 1.3) " +
		"next to its plaintext port; 1 KiB, batching on, unthrottled, runs alternated plaintext/TLS"
	secure := t
	secure.name, secure.service = "standalone-tls", fmt.Sprintf("pulsar+ssl://127.0.0.1:%d", port)
	for i := range tlsRounds {
		run, err := r.perf(ctx, t, fmt.Sprintf("plaintext max 1 KiB #%d", i+1), "produce", maxArgs(fmt.Sprintf("tls-plain-%d", i))...)
		if err != nil {
			return err
		}
		d.Plain = append(d.Plain, run)
		run, err = r.perf(ctx, secure, fmt.Sprintf("TLS max 1 KiB #%d", i+1), "produce",
			append(maxArgs(fmt.Sprintf("tls-tls-%d", i)), "--tls-trust-certs-file-path", p.ca)...)
		if err != nil {
			return err
		}
		d.TLS = append(d.TLS, run)
	}
	return nil
}

// maxArgs are the flags of an unthrottled 1 KiB publish run on topic
// persistent://public/default/<name>.
func maxArgs(name string) []string {
	return []string{"--size", "1024", "--topic", "persistent://public/default/" + name, "--rate", "0",
		"--max-pending", itoa(maxWindow)}
}

// writeTLS is the TLS section of the report.
func writeTLS(w io.Writer, res *Results) {
	d := res.TLS
	if !d.Ran {
		skippedSection(w, "TLS", d.Skipped)
		return
	}
	fmt.Fprintf(w, "## TLS: 1 KiB publish over pulsar+ssl:// vs pulsar://\n\n%s.\n\n", d.Setup)
	writeAlternated(w, "port", "server cores", "plaintext", d.Plain, "TLS", d.TLS)
	plain, tls := medianPS(d.Plain), medianPS(d.TLS)
	if plain > 0 {
		fmt.Fprintf(w, "\nMedians: plaintext %.0f msg/s, TLS %.0f msg/s: TLS at **%.2f ×** plaintext.\n\n", plain, tls, tls/plain)
	}
}

// writeAlternated is the table of two kinds of maximum runs made in turn
// (plaintext and TLS; direct and through the proxy).
func writeAlternated(w io.Writer, kind, cores, aName string, a []Run, bName string, b []Run) {
	fmt.Fprintf(w, "| %s | run | msg/s | MiB/s | publish p50 | p99 | p99.9 | %s |\n|---|---|---|---|---|---|---|---|\n", kind, cores)
	for i := range max(len(a), len(b)) {
		for _, p := range []struct {
			name string
			runs []Run
		}{{aName, a}, {bName, b}} {
			if i < len(p.runs) {
				r, l := p.runs[i].Report, lat(p.runs[i].Report.PublishLatency)
				fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %s | %s | %s | %.2f |\n", p.name, i+1, r.PublishPS, r.PublishMiB,
					us(l.P50), us(l.P99), us(l.P999), p.runs[i].ServerCores)
			}
		}
	}
}

// skippedSection prints a selected section that did not run, and why.
func skippedSection(w io.Writer, name, why string) {
	if why != "" {
		fmt.Fprintf(w, "## %s\n\nNot measured: %s\n\n", name, why)
	}
}
