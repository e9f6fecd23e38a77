package metadata_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/etcdtest"
	"github.com/magnetar-io/magnetar/metadata/metadatatest"
	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// One etcd server is shared by the tests that do not stop servers; each
// works under its own key prefix.
var sharedEtcdState struct {
	once     sync.Once
	cluster  *etcdtest.Cluster
	dir      string
	err      error
	prefixes atomic.Int64
}

func sharedEtcd(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	etcdtest.SkipIfShort(t)
	st := &sharedEtcdState
	st.once.Do(func() {
		st.dir, st.err = os.MkdirTemp("", "magnetar-etcd-")
		if st.err == nil {
			st.cluster, st.err = etcdtest.Start(st.dir, 1, "")
		}
	})
	if st.err != nil {
		t.Fatalf("etcd is required for this test and did not start (scripts/etcd.sh install): %v", st.err)
	}
	return st.cluster
}

func stopSharedEtcd() {
	if c := sharedEtcdState.cluster; c != nil {
		_ = c.Stop()
		os.RemoveAll(sharedEtcdState.dir)
	}
}

func freshPrefix(c *etcdtest.Cluster) string {
	return fmt.Sprintf("%s/test-%d", c.Connection, sharedEtcdState.prefixes.Add(1))
}

// testEtcdSession is the lease TTL of test sessions: short, so expiries
// are quick, and a few seconds so a loaded machine keeps its leases.
const testEtcdSession = 4 * time.Second

func openEtcd(t *testing.T, connection string, opts metadata.EtcdOptions) metadata.Store {
	t.Helper()
	target, err := metadata.ParseTarget(connection)
	if err != nil {
		t.Fatal(err)
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = testEtcdSession
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := metadata.OpenEtcd(ctx, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dialerFor(d *zktest.Dialer) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) { return d.Dial("tcp", addr, 5*time.Second) }
}

func TestEtcdConformance(t *testing.T) {
	c := sharedEtcd(t)
	metadatatest.Run(t, func(t *testing.T) metadatatest.Harness {
		conn := freshPrefix(c)
		var mu sync.Mutex
		nets := map[metadata.Store]*zktest.Dialer{}
		return metadatatest.Harness{
			NewSession: func(t *testing.T) metadata.Store {
				d := &zktest.Dialer{}
				s := openEtcd(t, conn, metadata.EtcdOptions{Dial: dialerFor(d)})
				mu.Lock()
				nets[s] = d
				mu.Unlock()
				return s
			},
			// The lease expires when its client stays away longer than
			// its TTL.
			Expire: func(t *testing.T, s metadata.Store) {
				mu.Lock()
				d := nets[s]
				mu.Unlock()
				d.Cut()
				time.Sleep(testEtcdSession + 1500*time.Millisecond)
				d.Heal()
			},
		}
	})
}

// TestEtcdKeyLayout pins the on-disk format (etcd.go) and that children
// are one prefix range without grandchildren.
func TestEtcdKeyLayout(t *testing.T) {
	c := sharedEtcd(t)
	conn := freshPrefix(c)
	prefix := conn[strings.LastIndex(conn, "/"):]
	s := openEtcd(t, conn, metadata.EtcdOptions{})
	ctx := context.Background()
	for _, p := range []string{"/a/b/c", "/a/x"} {
		if _, err := s.Put(ctx, p, []byte(p), metadata.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Create(ctx, "/a/q-", nil, metadata.CreateOptions{Sequential: true}); err != nil {
		t.Fatal(err)
	}
	kids, err := s.Children(ctx, "/a")
	if err != nil || fmt.Sprint(kids) != "[b q-0000000000 x]" {
		t.Fatalf("children %v %v", kids, err)
	}
	resp, err := c.Client(t).Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, strings.TrimPrefix(string(kv.Key), prefix)+"="+string(kv.Value))
	}
	want := "[/n/1/a= /n/2/a/b= /n/2/a/q-0000000000= /n/2/a/x=/a/x /n/3/a/b/c=/a/b/c /s/a=1 " +
		"/t/a= /t/a/b= /t/a/b/c= /t/a/q-0000000000= /t/a/x=]"
	if fmt.Sprint(keys) != want {
		t.Fatalf("keys\n got %v\nwant %v", keys, want)
	}
}

// TestEtcdLeaseExpiry: the server expiring the session's lease (revoked
// here from another client, which is what expiry does) removes the
// ephemeral nodes and ends the session: SessionLost, watches end, calls
// fail with ErrSessionLost.
func TestEtcdLeaseExpiry(t *testing.T) {
	c := sharedEtcd(t)
	conn := freshPrefix(c)
	owner, observer := openEtcd(t, conn, metadata.EtcdOptions{}), openEtcd(t, conn, metadata.EtcdOptions{})
	ctx := context.Background()
	states := owner.SessionEvents()
	expectState(t, states, metadata.SessionConnected)
	if _, _, err := owner.Create(ctx, "/loadbalance/leader", []byte("b1"), metadata.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	w, err := owner.Watch(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client(t).Revoke(ctx, clientv3.LeaseID(metadata.EtcdLease(owner))); err != nil {
		t.Fatal(err)
	}
	expectState(t, states, metadata.SessionLost)
	waitWatchEnd(t, w)
	if !errors.Is(w.Err(), metadata.ErrSessionLost) {
		t.Fatalf("watch after session loss: %v", w.Err())
	}
	if ok, _, err := observer.Exists(ctx, "/loadbalance/leader"); ok || err != nil {
		t.Fatalf("ephemeral after lease expiry: %v %v", ok, err)
	}
	if _, err := owner.Put(ctx, "/x", nil, metadata.AnyVersion); !errors.Is(err, metadata.ErrSessionLost) {
		t.Fatalf("put on a lost session: %v", err)
	}
}

// TestEtcdWatchResumesAfterReconnect: a watcher connected to one member
// loses it while others keep writing; when it is back, the watch resumes
// from its last revision and delivers every event, in order, without
// ending; the session is suspended and reconnected with its ephemerals.
func TestEtcdWatchResumesAfterReconnect(t *testing.T) {
	c := etcdtest.StartForTest(t, 3, "")
	watcher := openEtcd(t, "etcd:"+c.Endpoints[0]+"/w", metadata.EtcdOptions{SessionTimeout: 30 * time.Second,
		OperationTimeout: 3 * time.Second})
	writer := openEtcd(t, "etcd:"+c.Endpoints[1]+","+c.Endpoints[2]+"/w", metadata.EtcdOptions{})
	ctx := context.Background()
	states := watcher.SessionEvents()
	expectState(t, states, metadata.SessionConnected)
	if _, _, err := watcher.Create(ctx, "/owner", nil, metadata.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, "/q")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want []metadata.Event
	exists := map[string]bool{}
	put := func(i int) {
		p := fmt.Sprintf("/q/k%d", i%7)
		_, err := writer.Put(ctx, p, []byte(fmt.Sprint(i)), metadata.AnyVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !exists[p] {
			exists[p] = true
			want = append(want, metadata.Event{Type: metadata.EventCreated, Path: p})
		} else {
			want = append(want, metadata.Event{Type: metadata.EventModified, Path: p})
		}
	}
	want = append(want, metadata.Event{Type: metadata.EventCreated, Path: "/q"})
	for i := 0; i < 10; i++ {
		put(i)
	}
	if err := c.StopNode(1); err != nil {
		t.Fatal(err)
	}
	expectState(t, states, metadata.SessionSuspended)
	for i := 10; i < 60; i++ {
		put(i)
	}
	if err := writer.Delete(ctx, "/q/k3", metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	want = append(want, metadata.Event{Type: metadata.EventDeleted, Path: "/q/k3"})
	exists["/q/k3"] = false
	if err := c.StartNode(1); err != nil {
		t.Fatal(err)
	}
	expectState(t, states, metadata.SessionReconnected)
	for i := 60; i < 70; i++ {
		put(i)
	}
	var got []metadata.Event
	timeout := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended after %d events: %v", len(got), w.Err())
			}
			if ev.Type != metadata.EventChildrenChanged {
				got = append(got, ev)
			}
		case <-timeout:
			t.Fatalf("only %d of %d events arrived", len(got), len(want))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events missed or out of order:\n got %v\nwant %v", got, want)
	}
	if ok, st, err := watcher.Exists(ctx, "/owner"); !ok || !st.Ephemeral || err != nil {
		t.Fatalf("ephemeral after reconnecting: %v %+v %v", ok, st, err)
	}
}

// TestEtcdWatchCompacted: a watch whose resume revision was compacted
// while it was disconnected ends with ErrWatchCompacted.
func TestEtcdWatchCompacted(t *testing.T) {
	c := sharedEtcd(t)
	conn := freshPrefix(c)
	d := &zktest.Dialer{}
	watcher := openEtcd(t, conn, metadata.EtcdOptions{Dial: dialerFor(d), SessionTimeout: 30 * time.Second})
	writer := openEtcd(t, conn, metadata.EtcdOptions{})
	ctx := context.Background()
	w, err := watcher.Watch(ctx, "/c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Put(ctx, "/c/a", nil, metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitForEventEtcd(t, w, metadata.Event{Type: metadata.EventCreated, Path: "/c/a"})
	d.Cut()
	var rev int64
	for i := 0; i < 5; i++ {
		if _, err := writer.Put(ctx, "/c/a", []byte{byte(i)}, metadata.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	raw := c.Client(t)
	resp, err := raw.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	rev = resp.Header.Revision
	if _, err := raw.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	d.Heal()
	waitWatchEnd(t, w)
	if !errors.Is(w.Err(), metadata.ErrWatchCompacted) || !errors.Is(w.Err(), metadata.ErrWatchInterrupted) {
		t.Fatalf("watch over a compacted revision: %v", w.Err())
	}
	t.Logf("ended with: %v", w.Err())
}

func waitForEventEtcd(t *testing.T, w *metadata.Watcher, want metadata.Event) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended before %v: %v", want, w.Err())
			}
			if ev == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %v event", want)
		}
	}
}

// TestEtcdAuth: user/password from the connection string against an etcd
// with authentication on; without them, calls are refused.
func TestEtcdAuth(t *testing.T) {
	c := etcdtest.StartForTest(t, 1, "")
	raw := c.Client(t)
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := raw.RoleAdd(ctx, "root"); return err },
		func() error { _, err := raw.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := raw.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	pwFile := t.TempDir() + "/pw"
	if err := os.WriteFile(pwFile, []byte("rootpw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openEtcd(t, c.Connection+"/auth?user=root&password-file="+pwFile, metadata.EtcdOptions{})
	if _, err := s.Put(ctx, "/x", []byte("v"), metadata.AnyVersion); err != nil {
		t.Fatalf("put with credentials: %v", err)
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := metadata.Open(octx, c.Connection+"/auth", metadata.Options{})
	if err == nil {
		s.Close()
		t.Fatal("open without credentials succeeded")
	}
	t.Logf("without credentials: %v", err)
}

// TestEtcdLinearizableCAS: concurrent compare-and-set puts from several
// sessions while the 3-node cluster loses its leader twice (and gets it
// back), checked with porcupine as for ZooKeeper.
func TestEtcdLinearizableCAS(t *testing.T) {
	c := etcdtest.StartForTest(t, 3, "")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	keys := []string{"/lin/a", "/lin/b", "/lin/c"}
	setup := openEtcd(t, c.Connection, metadata.EtcdOptions{SessionTimeout: 15 * time.Second})
	for _, k := range keys {
		if _, _, err := setup.Create(context.Background(), k, nil, metadata.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h := &history{start: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const clients = 5
	for i := 0; i < clients; i++ {
		s := openEtcd(t, c.Connection, metadata.EtcdOptions{SessionTimeout: 15 * time.Second, OperationTimeout: 4 * time.Second})
		wg.Add(1)
		go func() {
			defer wg.Done()
			runCASClient(s, i, keys, rand.New(rand.NewPCG(uint64(seed), uint64(i))), h, stop)
		}()
	}
	kills := 0
	time.Sleep(time.Second)
	for round := 0; round < 2; round++ {
		node := c.Leader()
		if node == 0 {
			t.Fatalf("round %d: no leader", round)
		}
		if err := c.StopNode(node); err != nil {
			t.Fatal(err)
		}
		kills++
		time.Sleep(2 * time.Second)
		if err := c.StartNode(node); err != nil {
			t.Fatalf("%v\n%s", err, c.ServerLog(node))
		}
		time.Sleep(1500 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// No settling: an operation whose answer was lost is recorded as
	// unknown, ending at infinity, so it may take effect after these reads.
	final := openEtcd(t, c.Connection, metadata.EtcdOptions{})
	for _, k := range keys {
		call := h.now()
		v, st, err := final.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		h.add(99, casInput{key: k, read: true}, casOutput{version: st.Version, value: string(v)}, call, h.now())
	}
	checkHistory(t, h, kills)
}

func TestOpenEtcdConnectionString(t *testing.T) {
	conn := freshPrefix(sharedEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := metadata.Open(ctx, conn, metadata.Options{SessionTimeout: testEtcdSession})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(ctx, "/x", []byte("v"), metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdTLS: client certificates from the connection string against an
// etcd that requires them; without one, open fails.
func TestEtcdTLS(t *testing.T) {
	dir := t.TempDir()
	writeTestPKI(t, dir)
	c := etcdtest.StartForTest(t, 1, dir)
	if !strings.HasPrefix(c.Connection, "etcd:https://") {
		t.Fatalf("connection %s", c.Connection)
	}
	q := fmt.Sprintf("?cacert=%[1]s/ca.pem&cert=%[1]s/client.pem&key=%[1]s/client-key.pem", dir)
	s := openEtcd(t, c.Connection+"/tls"+q, metadata.EtcdOptions{})
	if _, err := s.Put(context.Background(), "/x", []byte("v"), metadata.AnyVersion); err != nil {
		t.Fatalf("put over TLS: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s2, err := metadata.Open(ctx, c.Connection+"/tls?cacert="+dir+"/ca.pem", metadata.Options{OperationTimeout: 3 * time.Second})
	if err == nil {
		s2.Close()
		t.Fatal("open without a client certificate succeeded")
	}
}

// writeTestPKI writes a CA, a server certificate for 127.0.0.1 and a
// client certificate, as PEM files.
func writeTestPKI(t *testing.T, dir string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(dir+"/"+name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "magnetar test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(crand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	for i, name := range []string{"server", "client"} {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(crand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".pem", "CERTIFICATE", der)
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
}
