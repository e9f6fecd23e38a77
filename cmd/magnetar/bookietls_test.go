package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/internal/tlstest"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// TestBrokerOverBookieTLS runs ZooKeeper, a bookie process serving only
// TLS with client certificates required (bk_server.conf keys), and a
// broker process reaching it with Pulsar's bookkeeperTLS* keys; a client
// produces and consumes through the broker, so every entry crossed the
// bookie's TLS port.
func TestBrokerOverBookieTLS(t *testing.T) {
	skipProcessesIfShort(t)
	zk := zktest.StartForTest(t, 1)
	conn := zk.Connection + "/c1"
	dir := t.TempDir()
	var out strings.Builder
	if rc := run([]string{"initialize-cluster-metadata", "--cluster", "c1", "--metadata-store", conn,
		"--web-service-url", "http://127.0.0.1:1", "--broker-service-url", "pulsar://127.0.0.1:1"}, &out, &out); rc != 0 {
		t.Fatalf("initialize-cluster-metadata: %d %s", rc, out.String())
	}
	ca := tlstest.NewCA(t, "cluster-ca")
	bkCert, bkKey := ca.IssueFiles(t, "bookie", true)
	brCert, brKey := ca.IssueFiles(t, "broker", false)
	tlsPort := freePort(t)
	bkConf := filepath.Join(dir, "bk_server.conf")
	writeFile(t, bkConf, strings.Join([]string{"zkTimeout=4000", "bookiePort=", "bookiePortTls=" + strconv.Itoa(tlsPort),
		"tlsProvider=OpenSSL", "tlsKeyStoreType=PEM", "tlsCertificatePath=" + bkCert, "tlsKeyStore=" + bkKey,
		"tlsTrustStoreType=PEM", "tlsTrustStore=" + ca.CAFile, "tlsClientAuthentication=true",
		"tlsCertFilesRefreshDurationSeconds=60", "clientTrustStore=" + ca.CAFile,
		"clientCertificatePath=" + brCert, "clientKeyStore=" + brKey, ""}, "\n"))
	bk := startBookieProcess(t, "--config", bkConf, "--metadata-store", conn, "--journal-dirs", dir+"/bk/journal",
		"--ledger-dirs", dir+"/bk/ledgers", "--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
		"--http-port", strconv.Itoa(freePort(t)), "--io-backend", "std")
	bk.waitReady(t)
	checkTLSOnlyRegistration(t, conn, "127.0.0.1:"+strconv.Itoa(tlsPort))
	brConf := filepath.Join(dir, "broker.conf")
	writeFile(t, brConf, strings.Join([]string{"clusterName=c1", "metadataStoreUrl=" + conn,
		"metadataStoreSessionTimeoutMillis=4000", "managedLedgerDefaultEnsembleSize=1",
		"managedLedgerDefaultWriteQuorum=1", "managedLedgerDefaultAckQuorum=1",
		"bookkeeperTLSClientAuthentication=true", "bookkeeperTLSTrustCertsFilePath=" + ca.CAFile,
		"bookkeeperTLSCertificateFilePath=" + brCert, "bookkeeperTLSKeyFilePath=" + brKey,
		"bookkeeperTLSKeyFileType=PEM", "bookkeeperTLSCertFilesRefreshDurationSeconds=60", ""}, "\n"))
	br := startBrokerNode(t, brConf)
	keepLogsOnFailure(t, func() map[string]string {
		return map[string]string{"bookie": bk.out.String(), "broker": br.proc.out.String()}
	})
	br.proc.waitReady(t)

	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: fmt.Sprintf("pulsar://127.0.0.1:%d", br.bin), Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "over-bookie-tls", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "over-bookie-tls"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%03d", i))}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i := range 200 {
		m, err := cons.Receive(ctx)
		if err != nil || string(m.Payload()) != fmt.Sprintf("m%03d", i) {
			t.Fatalf("receive: want m%03d, got %v %v", i, m, err)
		}
		_ = cons.Ack(m)
	}
	prod.Close()
	cons.Close()
	for name, logs := range map[string]string{"bookie": bk.out.String(), "broker": br.proc.out.String()} {
		if strings.Contains(logs, "handshake failed") || strings.Contains(logs, "DATA RACE") {
			t.Fatalf("%s log:\n%s", name, logs)
		}
	}
}

// checkTLSOnlyRegistration reads the bookie's registration: a TLS
// endpoint and no plaintext one.
func checkTLSOnlyRegistration(t *testing.T, conn, tlsAddr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store, err := metadata.Open(ctx, conn, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	regs, err := registry.Bookies(ctx, store)
	if err != nil || len(regs) != 1 {
		t.Fatalf("registered bookies: %v %v", regs, err)
	}
	if r := regs[0]; r.Address != "" || r.TLSAddress != tlsAddr || r.BookieID != tlsAddr {
		t.Fatalf("registration %+v: want only the TLS endpoint %s (and it as the id)", r, tlsAddr)
	}
}

// The keys are refused when this build cannot honour them, naming the key.
func TestBookieTLSKeysRefused(t *testing.T) {
	dir := t.TempDir()
	for conf, want := range map[string]string{
		"tlsProvider=BoringSSL\n":                     "tlsProvider",
		"tlsKeyStoreType=JKS\n":                       "tlsKeyStoreType=JKS",
		"bookiePort=\n":                               "bookiePort and bookiePortTls are both off",
		"bookiePortTls=3182\ntlsTrustStoreType=P12\n": "tlsTrustStoreType",
	} {
		path := filepath.Join(dir, "bk.conf")
		writeFile(t, path, "metadataServiceUri=local:"+dir+"/meta\n"+conf)
		var stderr strings.Builder
		_, err := parseBookieFlags("magnetar bookie", []string{"--config", path}, &stderr, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error with %q", conf, err, want)
		}
	}
}
