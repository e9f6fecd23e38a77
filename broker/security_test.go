package broker

// The authorization matrix (testdata/security_matrix.txt) over plaintext
// and TLS, and bad input on the secured ports.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/internal/tlstest"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// securedBroker is a broker with token, TLS and basic authentication and
// authorization on, serving binary and HTTP, plaintext and TLS.
type securedBroker struct {
	b           *Broker
	bin, binTLS string // host:port
	web, webTLS string // base URLs
	ca, rogue   *tlstest.CA
	secret      []byte
	logs        *syncBuffer
	tlsFiles    auth.TLSFiles
	// brokerURL and brokerURLTLS, when set, make the endpoints above a
	// proxy's: commands a proxy passes to a broker (PRODUCER, SUBSCRIBE,
	// WATCH_TOPIC_LIST) connect with proxy_to_broker_url naming them.
	brokerURL, brokerURLTLS string
	res                     *resources.Resources
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func startSecuredBroker(t *testing.T, opts ...func(*Config)) *securedBroker {
	t.Helper()
	sb := &securedBroker{ca: tlstest.NewCA(t, "test CA"), rogue: tlstest.NewCA(t, "rogue CA"), secret: []byte("0123456789abcdef0123456789abcdef"),
		logs: &syncBuffer{}}
	dir := t.TempDir()
	certPEM, keyPEM := sb.ca.Issue(t, "broker", true)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sb.tlsFiles = auth.TLSFiles{CertFile: write("broker.pem", certPEM), KeyFile: write("broker.key", keyPEM),
		TrustCertsFile: write("ca.pem", sb.ca.PEM)}
	serverTLS, err := auth.NewServerTLS(sb.tlsFiles)
	if err != nil {
		t.Fatal(err)
	}

	store := metadata.NewMemoryServer().NewSession()
	res, err := resources.New(context.Background(), store, resources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	sb.res = res
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(res.CreateCluster(ctx, "test", resources.ClusterData{ServiceURL: "http://localhost:1"}))
	must(res.CreateTenant(ctx, "t", resources.TenantInfo{AdminRoles: []string{"admin-t"}, AllowedClusters: []string{"test"}}))
	must(res.CreateTenant(ctx, "o", resources.TenantInfo{AdminRoles: []string{"admin-o"}, AllowedClusters: []string{"test"}}))
	p := resources.NewPolicies()
	p.AuthPolicies.NamespaceAuth = map[string][]resources.AuthAction{
		"producer": {resources.ActionProduce}, "consumer": {resources.ActionConsume}}
	// Only role "someone" (no column) may consume subscription "locked".
	p.AuthPolicies.SubscriptionAuthRoles = map[string][]string{"locked": {"someone"}}
	_, err = res.CreateNamespace(ctx, "t", "ns", p)
	must(err)
	// t/ns2 grants nothing to the namespace, only produce on topic a.
	p2 := resources.NewPolicies()
	p2.AuthPolicies.DestinationAuth = map[string]map[string][]resources.AuthAction{
		"persistent://t/ns2/a": {"producer": {resources.ActionProduce}}}
	_, err = res.CreateNamespace(ctx, "t", "ns2", p2)
	must(err)

	tokens, err := auth.NewTokenProvider(auth.TokenConfig{SecretKey: sb.secret})
	must(err)
	cfg := Config{ClusterName: "test", Metadata: store, Resources: res,
		Logger:         slog.New(slog.NewTextHandler(sb.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Authentication: auth.NewAuthenticator("anon", tokens, auth.TLSProvider{}),
		Authorization:  auth.NewAuthorizer([]string{"super", "proxysuper"}, false, res),
		ProxyRoles:     auth.ProxyRoles{"proxy", "proxysuper"}}
	for _, o := range opts {
		o(&cfg)
	}
	b := New(cfg, testLedgers(t, 0))
	sb.b = b
	srv, err := b.Serve("127.0.0.1:0")
	must(err)
	tsrv, err := b.ServeTLS("127.0.0.1:0", serverTLS.Config())
	must(err)
	web := httptest.NewServer(b.HTTPHandler())
	webTLS := httptest.NewUnstartedServer(b.HTTPHandler())
	webTLS.TLS = serverTLS.Config()
	webTLS.StartTLS()
	t.Cleanup(func() {
		web.Close()
		webTLS.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		_ = tsrv.Close(ctx)
		_ = b.Close(ctx)
	})
	sb.bin, sb.binTLS = srv.Addr().String(), tsrv.Addr().String()
	sb.web, sb.webTLS = web.URL, webTLS.URL
	return sb
}

// identity is one matrix column: credentials and, over TLS, a certificate.
type identity struct {
	method string
	data   string
	cert   *tls.Certificate
}

func (sb *securedBroker) token(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (sb *securedBroker) identities(t *testing.T) map[string]identity {
	tok := func(sub string) identity {
		return identity{method: "token", data: sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": sub})}
	}
	adminCert := sb.ca.ClientCert(t, "admin-t")
	rogueCert := sb.rogue.ClientCert(t, "super")
	return map[string]identity{
		"super": tok("super"), "admin": tok("admin-t"), "other": tok("admin-o"),
		"produce": tok("producer"), "consume": tok("consumer"), "none": tok("nobody"), "anon": {},
		"expired": {method: "token", data: sb.token(t, jwt.SigningMethodHS256, sb.secret,
			jwt.MapClaims{"sub": "super", "exp": time.Now().Add(-time.Minute).Unix()})},
		"algnone": {method: "token", data: sb.token(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "super"})},
		"otherkey": {method: "token", data: sb.token(t, jwt.SigningMethodHS256, []byte("another secret, not the broker's!"),
			jwt.MapClaims{"sub": "super"})},
		"noclaim":       {method: "token", data: sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"role": "super"})},
		"cert@tls":      {method: "tls", cert: &adminCert},
		"untrusted@tls": {method: "tls", cert: &rogueCert},
	}
}

func (sb *securedBroker) clientTLS(id identity) *tls.Config {
	cfg := &tls.Config{RootCAs: sb.ca.Pool(), ServerName: "127.0.0.1"}
	if id.cert != nil {
		// Always sent, even when its CA is not among those the broker
		// names (Go's client would then send none).
		cert := id.cert
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return cfg
}

// matrixRow is one line of the matrix file.
type matrixRow struct {
	line          int
	kind, op, arg string
	want          []string
}

func readMatrix(t *testing.T) ([]string, []matrixRow) {
	t.Helper()
	f, err := os.Open("testdata/security_matrix.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var columns []string
	var rows []matrixRow
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if fields[0] == "columns" {
			columns = fields[1:]
			continue
		}
		if len(fields) != 3+len(columns) {
			t.Fatalf("security_matrix.txt:%d: %d answers for %d columns", n, len(fields)-3, len(columns))
		}
		rows = append(rows, matrixRow{line: n, kind: fields[0], op: fields[1], arg: fields[2], want: fields[3:]})
	}
	return columns, rows
}

func TestSecurityMatrix(t *testing.T) {
	sb := startSecuredBroker(t)
	sb.runMatrix(t)
}

// runMatrix runs every cell of the matrix over plaintext and TLS against
// sb's endpoints.
func (sb *securedBroker) runMatrix(t *testing.T) {
	ids := sb.identities(t)
	columns, rows := readMatrix(t)
	for _, overTLS := range []bool{false, true} {
		transport := "plaintext"
		if overTLS {
			transport = "tls"
		}
		for _, row := range rows {
			for i, col := range columns {
				if strings.HasSuffix(col, "@tls") && !overTLS {
					continue
				}
				name := fmt.Sprintf("%s/%s_%s_%s/%s", transport, row.kind, row.op, strings.ReplaceAll(row.arg, "/", "_"), col)
				t.Run(name, func(t *testing.T) {
					var got string
					if row.kind == "binary" {
						got = sb.binaryAnswer(t, ids[col], overTLS, row.op, row.arg)
					} else {
						got = sb.httpAnswer(t, ids[col], overTLS, row.op, row.arg)
					}
					if got != row.want[i] {
						t.Errorf("security_matrix.txt:%d: %s %s %s as %s over %s: got %s, want %s",
							row.line, row.kind, row.op, row.arg, col, transport, got, row.want[i])
					}
				})
			}
		}
	}
	// No credential reached the log.
	logs := sb.logs.String()
	for col, id := range ids {
		if id.data != "" && strings.Contains(logs, id.data) {
			t.Errorf("the %s token was logged", col)
		}
	}
}

// dial connects to the binary port; "" and the client, or "handshake".
func (sb *securedBroker) dial(t *testing.T, id identity, overTLS bool) (*rawClient, string) {
	t.Helper()
	if !overTLS {
		return dialRaw(t, sb.bin), ""
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", sb.binTLS, sb.clientTLS(id))
	if err != nil {
		return nil, "handshake"
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c}, ""
}

func (sb *securedBroker) binaryAnswer(t *testing.T, id identity, overTLS bool, op, arg string) string {
	r, failed := sb.dial(t, id, overTLS)
	if failed != "" {
		return failed
	}
	connect := &pb.CommandConnect{ClientVersion: ptr("matrix-test"), ProtocolVersion: ptr(int32(20))}
	if sb.brokerURL != "" && (op == "PRODUCER" || op == "SUBSCRIBE" || op == "WATCH_TOPIC_LIST") {
		connect.ProxyToBrokerUrl = ptr(sb.brokerURL)
		if overTLS {
			connect.ProxyToBrokerUrl = ptr(sb.brokerURLTLS)
		}
	}
	if id.method != "" {
		connect.AuthMethodName = ptr(id.method)
		connect.AuthData = []byte(id.data)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: connect})
	cmd, err := r.read()
	if err != nil {
		if overTLS {
			return "handshake" // TLS 1.3: a refused client certificate shows on the first read
		}
		t.Fatalf("CONNECT: %v", err)
	}
	if cmd.GetType() == pb.BaseCommand_ERROR {
		if cmd.GetError().GetError() == pb.ServerError_AuthenticationError {
			expectClosed(t, r)
		}
		return cmd.GetError().GetError().String()
	}
	if cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("CONNECT answered %v", cmd.GetType())
	}
	return r.answer(t, op, arg)
}

// answer sends one matrix command on a connected client and returns "ok"
// or the error code.
func (r *rawClient) answer(t *testing.T, op, arg string) string {
	overTLS := false
	if _, ok := r.conn.(*tls.Conn); ok {
		overTLS = true
	}
	arg, sub, _ := strings.Cut(arg, "#") // topic#subscription (SUBSCRIBE; "s" when none)
	if sub == "" {
		sub = "s"
	}
	topic := "persistent://" + arg
	switch op {
	case "PRODUCER":
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: &topic, ProducerId: ptr(uint64(1)), RequestId: ptr(uint64(1))}})
	case "SUBSCRIBE":
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
			Topic: &topic, Subscription: &sub, SubType: pb.CommandSubscribe_Shared.Enum(),
			ConsumerId: ptr(uint64(1)), RequestId: ptr(uint64(1))}})
	case "LOOKUP":
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
			Topic: &topic, RequestId: ptr(uint64(1))}})
	case "PARTITIONED_METADATA":
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
			Topic: &topic, RequestId: ptr(uint64(1))}})
	case "GET_TOPICS_OF_NAMESPACE":
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: &pb.CommandGetTopicsOfNamespace{
			Namespace: &arg, RequestId: ptr(uint64(1))}})
	case "WATCH_TOPIC_LIST":
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST.Enum(), WatchTopicList: &pb.CommandWatchTopicList{
			Namespace: &arg, RequestId: ptr(uint64(1)), WatcherId: ptr(uint64(1)), TopicsPattern: ptr("persistent://" + arg + "/.*")}})
	default:
		t.Fatalf("matrix: unknown binary command %s", op)
	}
	for {
		cmd, err := r.read()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		switch cmd.GetType() {
		case pb.BaseCommand_PING:
			continue
		case pb.BaseCommand_ERROR:
			return cmd.GetError().GetError().String()
		case pb.BaseCommand_LOOKUP_RESPONSE:
			if l := cmd.GetLookupTopicResponse(); l.GetResponse() == pb.CommandLookupTopicResponse_Failed {
				return l.GetError().String()
			}
			if overTLS && cmd.GetLookupTopicResponse().GetBrokerServiceUrlTls() == "" {
				t.Errorf("LOOKUP over TLS answered no brokerServiceUrlTls")
			}
		case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
			if p := cmd.GetPartitionMetadataResponse(); p.GetResponse() == pb.CommandPartitionedTopicMetadataResponse_Failed {
				return p.GetError().String()
			}
		}
		return "ok"
	}
}

func (sb *securedBroker) httpAnswer(t *testing.T, id identity, overTLS bool, method, path string) string {
	base := sb.web
	client := &http.Client{Timeout: 10 * time.Second}
	if overTLS {
		base = sb.webTLS
		client.Transport = &http.Transport{TLSClientConfig: sb.clientTLS(id)}
	}
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id.method == "token" {
		req.Header.Set("Authorization", "Bearer "+id.data)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if overTLS && errors.As(err, &ue) {
			return "handshake"
		}
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return fmt.Sprint(resp.StatusCode)
}

// Bad input on the secured ports costs only its connection: a clear error
// to the client where the protocol allows one, a log line with the remote
// address, no credential in the log, the broker still serving.
func TestSecurityBadInput(t *testing.T) {
	sb := startSecuredBroker(t)
	ids := sb.identities(t)
	t.Cleanup(func() {
		if t.Failed() { // what the broker saw of the connection that failed
			t.Logf("broker log:\n%s", lastLines(sb.logs.String(), 60))
		}
	})
	expectWarn := func(t *testing.T, what, remote string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			for _, line := range strings.Split(sb.logs.String(), "\n") {
				if strings.Contains(line, what) && strings.Contains(line, remote) {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("no log line %q naming %s in:\n%s", what, remote, sb.logs.String())
	}
	stillServing := func(t *testing.T) {
		t.Helper()
		if got := sb.binaryAnswer(t, ids["produce"], true, "PRODUCER", "t/ns/still"); got != "ok" {
			t.Fatalf("after bad input, PRODUCER over TLS: %s", got)
		}
		if got := sb.binaryAnswer(t, ids["produce"], false, "PRODUCER", "t/ns/still"); got != "ok" {
			t.Fatalf("after bad input, PRODUCER over plaintext: %s", got)
		}
	}

	t.Run("plaintext to the TLS port", func(t *testing.T) {
		r := dialRaw(t, sb.binTLS)
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
			ClientVersion: ptr("plain"), ProtocolVersion: ptr(int32(20))}})
		expectClosed(t, r)
		expectWarn(t, "TLS handshake failed", r.conn.LocalAddr().String())
		stillServing(t)
	})
	t.Run("garbage before the handshake", func(t *testing.T) {
		r := dialRaw(t, sb.binTLS)
		r.write(bytes.Repeat([]byte{0x16, 0x03, 0x01, 0xff, 0xff, 0x00}, 1000))
		expectClosed(t, r)
		expectWarn(t, "TLS handshake failed", r.conn.LocalAddr().String())
		stillServing(t)
	})
	t.Run("HTTP plaintext to the HTTPS port", func(t *testing.T) {
		resp, err := http.Get("http://" + strings.TrimPrefix(sb.webTLS, "https://") + "/admin/v2/clusters")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("HTTP to the HTTPS port: %d, want 400", resp.StatusCode)
		}
		stillServing(t)
	})
	huge := identity{method: "token", data: strings.Repeat("A", 1<<20)}
	noClaim := ids["noclaim"]
	for _, tc := range []struct {
		name, wantMessage string
		id                identity
	}{
		{"huge auth_data", "longer than", huge},
		{"token without the role claim", `no "sub" claim`, noClaim},
		{"token signed with another key", "signature is invalid", ids["otherkey"]},
		{"expired token", "expired", ids["expired"]},
	} {
		for _, overTLS := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s tls=%v", tc.name, overTLS), func(t *testing.T) {
				r, _ := sb.dial(t, tc.id, overTLS)
				r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
					ClientVersion: ptr("bad"), ProtocolVersion: ptr(int32(20)),
					AuthMethodName: ptr(tc.id.method), AuthData: []byte(tc.id.data)}})
				cmd, err := r.read()
				if err != nil {
					t.Fatalf("CONNECT: %v", err)
				}
				e := cmd.GetError()
				if e.GetError() != pb.ServerError_AuthenticationError || !strings.Contains(e.GetMessage(), tc.wantMessage) {
					t.Errorf("CONNECT answered %v %q, want AuthenticationError saying %q", cmd.GetType(), e.GetMessage(), tc.wantMessage)
				}
				expectClosed(t, r)
				expectWarn(t, "authentication failed", r.conn.LocalAddr().String())
				stillServing(t)
			})
		}
	}
	for col, id := range ids {
		if id.data != "" && strings.Contains(sb.logs.String(), id.data) {
			t.Errorf("the %s token was logged", col)
		}
	}
	if strings.Contains(sb.logs.String(), string(sb.secret)) || strings.Contains(sb.logs.String(), huge.data[:64]) {
		t.Error("a secret or the auth data was logged")
	}
}

// A TLS connection whose client stopped reading closes promptly when
// closed (the writer flushes under a deadline: tlsCloseWriteTimeout).
func TestTLSConnClosesAClientThatDoesNotRead(t *testing.T) {
	sb := startSecuredBroker(t)
	ids := sb.identities(t)
	r, _ := sb.dial(t, ids["super"], true)
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: ptr("slow"), ProtocolVersion: ptr(int32(20)), AuthMethodName: ptr("token"), AuthData: []byte(ids["super"].data)}})
	// PINGs answered by PONGs the client never reads fill its socket.
	ping, err := wire.AppendSimpleFrame(nil, &pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	if err != nil {
		t.Fatal(err)
	}
	burst := bytes.Repeat(ping, 4096)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		_ = r.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := r.conn.Write(burst); err != nil {
			break
		}
	}
	conns := func() []*serverConn {
		sb.b.mu.Lock()
		defer sb.b.mu.Unlock()
		var out []*serverConn
		for c := range sb.b.conns {
			out = append(out, c)
		}
		return out
	}
	open := conns()
	if len(open) != 1 {
		t.Fatalf("%d connections open, want 1", len(open))
	}
	start := time.Now()
	open[0].t.Close(errors.New("closed by the test"))
	for len(conns()) > 0 {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("connection still open %v after Close", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestHTTPAccessClassifiesPaths(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         access
		tenant, sub  string
	}{
		{"GET", "/lookup/v2/topic/persistent/t/ns/a", accessLookup, "t", ""},
		{"GET", "/admin/v2/persistent/t/ns/a/stats", accessLookup, "t", ""},
		{"PUT", "/admin/v2/persistent/t/ns/a", accessTenantAdmin, "t", ""},
		{"DELETE", "/admin/v2/persistent/t/ns/a/subscription/s%2Fx", accessConsume, "t", "s%2Fx"},
		{"POST", "/admin/v2/persistent/t/ns/a/subscription/s/resetcursor/0", accessConsume, "t", "s"},
		{"GET", "/admin/v2/persistent/t/ns/a/subscriptions", accessConsume, "t", ""},
		{"GET", "/admin/v2/persistent/t/ns", accessNamespaceTopics, "t", ""},
		{"GET", "/admin/v2/namespaces/t/ns/topics", accessNamespaceTopics, "t", ""},
		{"POST", "/admin/v2/namespaces/t/ns/permissions/r", accessTenantAdmin, "t", ""},
		{"POST", "/admin/v2/schemas/t/ns/a/schema", accessProduce, "t", ""},
		{"GET", "/admin/v2/schemas/t/ns/a/schema", accessLookup, "t", ""},
		{"DELETE", "/admin/v2/schemas/t/ns/a/schema", accessTenantAdmin, "t", ""},
		{"GET", "/admin/v2/clusters/c", accessAuthenticated, "", ""},
		{"PUT", "/admin/v2/clusters/c", accessSuperUser, "", ""},
		{"GET", "/admin/v2/brokers/health", accessSuperUser, "", ""},
		{"GET", "/admin/v2/bookies/all", accessSuperUser, "", ""},
		{"GET", "/admin/v1/anything", accessSuperUser, "", ""},
		{"GET", "/debug/pprof/", accessSuperUser, "", ""},
		{"GET", "/status.html", accessOpen, "", ""},
	} {
		got := httpAccess(tc.method, tc.path)
		if got.access != tc.want || got.tenant != tc.tenant || got.subscription != tc.sub {
			t.Errorf("%s %s: %+v, want access %d tenant %q subscription %q", tc.method, tc.path, got, tc.want, tc.tenant, tc.sub)
		}
	}
}

// TLS connections leave no goroutine behind once closed, whichever side
// closes, and the server's Close waits for them all.
func TestTLSConnectionsLeaveNoGoroutines(t *testing.T) {
	sb := startSecuredBroker(t)
	ids := sb.identities(t)
	before := settledGoroutines()
	for i := range 40 {
		r, _ := sb.dial(t, ids["super"], true)
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
			ClientVersion: ptr("leak"), ProtocolVersion: ptr(int32(20)), AuthMethodName: ptr("token"), AuthData: []byte(ids["super"].data)}})
		if cmd, err := r.read(); err != nil || cmd.GetType() != pb.BaseCommand_CONNECTED {
			t.Fatalf("CONNECT: %v %v", cmd.GetType(), err)
		}
		if i%2 == 0 {
			r.conn.Close()
		}
	}
	sb.b.mu.Lock()
	for c := range sb.b.conns {
		c.t.Close(errors.New("closed by the test"))
	}
	sb.b.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		sb.b.mu.Lock()
		open := len(sb.b.conns)
		sb.b.mu.Unlock()
		// The test's own client connections stay open (half of them).
		if n := runtime.NumGoroutine(); open == 0 && n <= before+2 {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%d connections, %d goroutines, %d before", open, n, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settledGoroutines is the goroutine count once it stopped changing (the
// same over three reads 20 ms apart, or after 5 s): a baseline taken
// while a start-up still spawns goroutines would count them as leaked.
func settledGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(5 * time.Second); same < 3 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// TestMissingTenantBeforeRefusal: a call on a tenant that does not exist
// answers 404 "Tenant does not exist" whoever calls, as Pulsar checks the
// tenant before the role; an existing tenant still refuses a stranger.
func TestMissingTenantBeforeRefusal(t *testing.T) {
	sb := startSecuredBroker(t)
	ids := sb.identities(t)
	if got := sb.httpAnswer(t, ids["none"], false, "GET", "/admin/v2/namespaces/no-such-tenant/ns/retention"); got != "404" {
		t.Fatalf("a stranger on a missing tenant: %s, want 404", got)
	}
	if got := sb.httpAnswer(t, ids["none"], false, "GET", "/admin/v2/namespaces/t/ns/retention"); got != "403" {
		t.Fatalf("a stranger on an existing tenant: %s, want 403", got)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
