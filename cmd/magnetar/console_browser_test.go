package main

// The web console in a real browser (browser_test.go) against real
// processes: a standalone (every page with live data, every subscription
// action checked against the admin API, a restart survived), a secured
// standalone (a role sees and does what its grants allow), a read-only
// console, and a cluster of two brokers behind a proxy (figures gathered
// from both brokers, actions on topics the other broker owns).
// Screenshots go to MAGNETAR_CONSOLE_SCREENSHOTS (make
// console-screenshots: docs/console/).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// consoleStandalone is a standalone child process the console tests
// restart on the same ports and data.
type consoleStandalone struct {
	proc               *bookieProcess
	conf, dir          string
	web, bin           int
	webURL, brokerURL  string
	extraConf          string
	startedAt, stopped time.Time
}

func startConsoleStandalone(t *testing.T, extraConf string) *consoleStandalone {
	t.Helper()
	s := &consoleStandalone{dir: t.TempDir(), web: freePort(t), bin: freePort(t), extraConf: extraConf}
	s.webURL = fmt.Sprintf("http://127.0.0.1:%d", s.web)
	s.brokerURL = fmt.Sprintf("pulsar://127.0.0.1:%d", s.bin)
	s.conf = filepath.Join(t.TempDir(), "standalone.conf")
	writeFile(t, s.conf, fmt.Sprintf("bindAddress=127.0.0.1\nadvertisedAddress=127.0.0.1\nbrokerServicePort=%d\nwebServicePort=%d\n"+
		"statsUpdateFrequencyInSecs=1\n%s\n", s.bin, s.web, extraConf))
	s.start(t)
	keepLogsOnFailure(t, func() map[string]string { return map[string]string{"standalone": s.proc.out.String()} })
	return s
}

func (s *consoleStandalone) start(t *testing.T) {
	t.Helper()
	s.proc = startMagnetarProcess(t, "standalone", nil, "--config", s.conf, "--data-dir", s.dir)
	s.proc.waitReady(t)
}

// restart stops the standalone gracefully and starts it again.
func (s *consoleStandalone) stop(t *testing.T) {
	t.Helper()
	_ = s.proc.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.proc.wait(); err != nil {
		t.Fatalf("standalone stop: %v\n%s", err, s.proc.out.String())
	}
}

// adminJSON calls the admin API (as token, if any) and decodes its
// answer; it returns the status.
func adminJSON(t *testing.T, method, url, token string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, url, body, err)
		}
	}
	return resp.StatusCode
}

// subBacklog is a subscription's backlog as the admin API reports it (-1:
// no such subscription).
func subBacklog(t *testing.T, web, topicPath, sub, token string) int64 {
	t.Helper()
	var st struct {
		Subscriptions map[string]struct{ MsgBacklog int64 }
	}
	if code := adminJSON(t, http.MethodGet, web+"/admin/v2/"+topicPath+"/stats", token, &st); code != http.StatusOK {
		t.Fatalf("stats of %s: %d", topicPath, code)
	}
	s, ok := st.Subscriptions[sub]
	if !ok {
		return -1
	}
	return s.MsgBacklog
}

// waitBacklog waits until the admin API reports want for sub.
func waitBacklog(t *testing.T, web, topicPath, sub, token string, want int64) {
	t.Helper()
	deadline := time.Now().Add(browserWait)
	for {
		got := subBacklog(t, web, topicPath, sub, token)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admin API reports backlog %d for %s on %s, want %d", got, sub, topicPath, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// order is the JSON-schema message the tests publish.
type order struct {
	ID   int    `json:"id"`
	Item string `json:"item"`
}

const orderSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"int"},{"name":"item","type":"string"}]}`

// publishOrders sends n orders to topic, one entry each, and returns
// their message ids.
func publishOrders(t *testing.T, client pulsar.Client, topic string, n int) []pulsar.MessageID {
	t.Helper()
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true,
		Schema: pulsar.NewJSONSchema(orderSchema, nil)})
	if err != nil {
		t.Fatalf("producer on %s: %v", topic, err)
	}
	defer p.Close()
	ids := make([]pulsar.MessageID, 0, n)
	for i := range n {
		id, err := p.Send(context.Background(), &pulsar.ProducerMessage{Value: order{ID: i, Item: fmt.Sprintf("widget-%d", i)},
			Key: fmt.Sprintf("k%d", i), Properties: map[string]string{"origin": "console-test"}})
		if err != nil {
			t.Fatalf("send to %s: %v", topic, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func newConsoleClient(t *testing.T, url string, auth pulsar.Authentication) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger(), OperationTimeout: 30 * time.Second,
		Authentication: auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// subscribeAndClose makes a durable subscription at the latest position.
func subscribeAndClose(t *testing.T, client pulsar.Client, topic, sub string) {
	t.Helper()
	c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub})
	if err != nil {
		t.Fatalf("subscribe %s on %s: %v", sub, topic, err)
	}
	c.Close()
}

// subAction runs a subscription row's action in the page and confirms it.
func (b *browser) subAction(t *testing.T, sub, action string, inputs ...string) {
	t.Helper()
	row := sel("subscription-row", "data-sub", sub)
	for i := 0; i+1 < len(inputs); i += 2 {
		b.fill(t, row+" "+sel(inputs[i]), inputs[i+1])
	}
	b.eval(t, `document.querySelectorAll('[data-testid="action-result"]').forEach(e => e.remove())`, nil)
	b.click(t, row+" "+sel(action))
	b.click(t, sel("confirm-yes"))
	b.waitFor(t, sel("action-result"))
}

func TestConsoleStandalone(t *testing.T) {
	requireBrowser(t)
	s := startConsoleStandalone(t, "")
	client := newConsoleClient(t, s.brokerURL, nil)
	const orders = "persistent://public/default/orders"
	subscribeAndClose(t, client, orders, "audit")
	ids := publishOrders(t, client, orders, 10)
	live, err := client.Subscribe(pulsar.ConsumerOptions{Topic: orders, SubscriptionName: "live", Name: "live-consumer"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	go func() {
		for m := range live.Chan() {
			_ = live.Ack(m)
		}
	}()
	// A live topic for the charts: about 50 messages a second, consumed.
	const clicks = "persistent://public/default/clicks"
	keepProducing, err := client.CreateProducer(pulsar.ProducerOptions{Topic: clicks, Name: "clicker"})
	if err != nil {
		t.Fatal(err)
	}
	defer keepProducing.Close()
	dashboard, err := client.Subscribe(pulsar.ConsumerOptions{Topic: clicks, SubscriptionName: "dashboard"})
	if err != nil {
		t.Fatal(err)
	}
	defer dashboard.Close()
	producing, stopProducing := context.WithCancel(context.Background())
	defer stopProducing()
	go func() {
		for m := range dashboard.Chan() {
			_ = dashboard.Ack(m)
		}
	}()
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for producing.Err() == nil {
			keepProducing.SendAsync(producing, &pulsar.ProducerMessage{Payload: []byte(`{"page":"/home"}`)}, func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
			<-tick.C
		}
	}()
	putJSON(t, http.MethodPut, s.webURL+"/admin/v2/persistent/public/default/views/partitions", "", "2")
	publishOrders(t, client, "persistent://public/default/views", 4)

	b := newBrowser(t)
	b.open(t, s.webURL+"/console/")
	b.waitJS(t, `document.querySelector('[data-testid="stat-brokers"]')?.getAttribute("data-value") === "1"`, "one broker in the overview")
	b.waitFor(t, sel("bookie-row"))
	if b.text(t, sel("conn-status")) != "live" {
		t.Errorf("conn-status is %q, want live", b.text(t, sel("conn-status")))
	}
	b.waitJS(t, `Number(document.querySelector('[data-testid="stat-rate-in"]')?.getAttribute("data-value")) >= 0`, "the rate in")
	b.screenshot(t, "overview")

	b.click(t, sel("nav-tenants"))
	b.click(t, sel("tenant-row", "data-tenant", "public")+" a")
	b.click(t, sel("namespace-row", "data-namespace", "public/default")+" a")
	b.waitFor(t, sel("topic-row", "data-topic", orders))
	b.waitFor(t, sel("topic-row", "data-topic", "persistent://public/default/views"))
	b.waitFor(t, sel("policies"))
	b.click(t, sel("sort-backlog"))
	b.waitJS(t, `(() => { const rows = [...document.querySelectorAll('[data-testid="topic-row"]')].map(r => r.getAttribute("data-topic"));
		const i = rows.indexOf(`+jsq(orders)+`); return rows.length >= 3 && (i === 0 || i === rows.length - 1); })()`,
		"the topic with the backlog first or last when sorted by backlog")
	b.screenshot(t, "namespace")

	b.click(t, sel("topic-row", "data-topic", orders)+" a")
	b.waitFor(t, sel("subscription-row", "data-sub", "audit"))
	b.waitJS(t, `document.querySelector('[data-sub="audit"] [data-testid="sub-backlog"]')?.getAttribute("data-value") === "10"`,
		"audit's backlog of 10")
	b.waitFor(t, sel("consumer-row"))
	if !strings.Contains(strings.ToUpper(b.text(t, sel("schema"))), "JSON") {
		t.Errorf("schema panel shows %q, want the JSON schema", b.text(t, sel("schema")))
	}
	b.waitJS(t, `Number(document.querySelector('[data-testid="chart-rate"]')?.getAttribute("data-points")) >= 2`, "two history samples in the rate chart")
	b.waitJS(t, `Number(document.querySelector('[data-testid="chart-backlog"]')?.getAttribute("data-points")) >= 2`, "the backlog chart")

	b.fill(t, sel("peek-sub"), "audit")
	b.fill(t, sel("peek-count"), "3")
	b.click(t, sel("peek-button"))
	b.waitJS(t, `document.querySelectorAll('[data-testid="message-row"]').length === 3`, "three peeked messages")
	payload := b.text(t, sel("message-payload"))
	if !strings.Contains(payload, `"item"`) || !strings.Contains(payload, "widget-0") {
		t.Errorf("the first peeked payload shows %q, want the decoded JSON of widget-0", payload)
	}
	if row := b.text(t, sel("message-row")); !strings.Contains(row, "console-test") || !strings.Contains(row, "k0") {
		t.Errorf("the peeked message row %q lacks its key or properties", row)
	}
	b.screenshot(t, "topic")

	b.open(t, s.webURL+"/console/#/topics/persistent/public/default/clicks")
	b.waitFor(t, sel("producer-row"))
	b.waitJS(t, `Number(document.querySelector('[data-testid="chart-rate"]')?.getAttribute("data-points")) >= 3`, "three samples of the live topic")
	b.screenshot(t, "topic-live")
	b.open(t, s.webURL+"/console/#/topics/persistent/public/default/orders")
	b.waitFor(t, sel("subscription-row", "data-sub", "audit"))

	const ordersPath = "persistent/public/default/orders"
	b.subAction(t, "audit", "action-skip", "skip-count", "2")
	waitBacklog(t, s.webURL, ordersPath, "audit", "", 8)
	b.subAction(t, "audit", "action-reset-time", "reset-minutes", "60")
	waitBacklog(t, s.webURL, ordersPath, "audit", "", 10)
	fifth := ids[5]
	b.subAction(t, "audit", "action-reset-id", "reset-ledger", strconv.FormatInt(fifth.LedgerID(), 10),
		"reset-entry", strconv.FormatInt(fifth.EntryID(), 10))
	waitBacklog(t, s.webURL, ordersPath, "audit", "", 5)
	b.subAction(t, "audit", "action-clear-backlog")
	waitBacklog(t, s.webURL, ordersPath, "audit", "", 0)
	b.subAction(t, "audit", "action-unsubscribe")
	waitBacklog(t, s.webURL, ordersPath, "audit", "", -1)
	b.waitJS(t, `!document.querySelector('[data-testid="subscription-row"][data-sub="audit"]')`, "the unsubscribed row gone")
	b.noErrors(t, "on the standalone's pages")

	b.click(t, sel("nav-bookies"))
	b.waitFor(t, sel("bookie-row"))
	if st := b.text(t, sel("bookie-state")); !strings.Contains(strings.ToLower(st), "writable") {
		t.Errorf("bookie state %q, want writable", st)
	}
	if u := b.text(t, sel("bookie-journal-usage")); !strings.Contains(u, "%") {
		t.Errorf("journal usage %q, want a percentage", u)
	}
	b.screenshot(t, "bookies")
	b.click(t, sel("nav-replication"))
	b.waitJS(t, `location.hash.includes("replication") && !document.querySelector('[data-testid="error"]')?.innerText`, "the replication page")
	b.noErrors(t, "on the bookies and replication pages")

	// The page survives a restart of its broker: it says so while the
	// broker is gone and recovers by itself.
	b.open(t, s.webURL+"/console/#/topics/persistent/public/default/orders")
	b.waitFor(t, sel("subscription-row", "data-sub", "live"))
	stopProducing()
	live.Close()
	dashboard.Close()
	keepProducing.Close()
	s.stop(t)
	b.waitJS(t, `document.querySelector('[data-testid="conn-status"]')?.innerText === "reconnecting"`, "reconnecting while the broker is down")
	s.start(t)
	b.waitJS(t, `document.querySelector('[data-testid="conn-status"]')?.innerText === "live"`, "live again after the restart")
	b.waitFor(t, sel("subscription-row", "data-sub", "live"))
	for _, e := range b.errors() { // failed requests while the broker was down are expected; nothing else
		if !strings.Contains(e, "Failed to load resource") && !strings.Contains(e, "net::ERR_") {
			t.Errorf("browser console error across the restart: %s", e)
		}
	}
}

// login signs in on the console's login page with role's token and
// waits until the page says who is signed in.
func (b *browser) login(t *testing.T, web, role, token string) {
	t.Helper()
	b.open(t, web+"/console/#/login")
	b.eval(t, `sessionStorage.clear()`, nil)
	b.open(t, web+"/console/#/login")
	b.fill(t, sel("login-token"), token)
	b.click(t, sel("login-submit"))
	b.waitJS(t, `document.querySelector('[data-testid="whoami"]')?.innerText.includes(`+jsq(role)+`)`, role+" signed in")
}

// A secured standalone: the login page first; a role without grants is
// refused what the admin API refuses it, with the reason shown; a tenant's
// admin sees and changes its tenant's topics; a superuser sees the
// cluster.
func TestConsoleAuthorization(t *testing.T) {
	requireBrowser(t)
	dir := t.TempDir()
	key, token := testTokens(t, dir)
	root, alice, bob := token("root"), token("alice"), token("bob")
	s := startConsoleStandalone(t, fmt.Sprintf(`authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken
tokenSecretKey=file://%s
authorizationEnabled=true
superUserRoles=root
brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
brokerClientAuthenticationParameters=token:%s`, key, root))
	putJSON(t, http.MethodPut, s.webURL+"/admin/v2/tenants/acme", root, `{"adminRoles":["alice"],"allowedClusters":["standalone"]}`)
	putJSON(t, http.MethodPut, s.webURL+"/admin/v2/namespaces/acme/orders", root, "")
	client := newConsoleClient(t, s.brokerURL, pulsar.NewAuthenticationToken(root))
	const topic = "persistent://acme/orders/placed"
	subscribeAndClose(t, client, topic, "billing")
	publishOrders(t, client, topic, 6)

	b := newBrowser(t)
	b.open(t, s.webURL+"/console/")
	b.waitFor(t, sel("login-token"))
	b.screenshot(t, "login")

	// bob: no grant anywhere.
	b.login(t, s.webURL, "bob", bob)
	b.open(t, s.webURL+"/console/#/topics/persistent/acme/orders/placed")
	reason := b.waitJS(t, `document.querySelector('[data-testid="error"]')?.innerText`, "the refusal shown")
	if !strings.Contains(strings.ToLower(reason), "not authorized") && !strings.Contains(reason, "403") {
		t.Errorf("bob's refusal shows %q, want the admin API's reason", reason)
	}
	if n := b.count(t, sel("subscription-row")); n != 0 {
		t.Errorf("bob sees %d subscriptions of a topic he may not read", n)
	}
	b.open(t, s.webURL+"/console/#/overview")
	b.waitJS(t, `document.querySelector('[data-testid="error"]')?.innerText`, "the overview refused")
	if v := b.attr(t, sel("stat-storage"), "data-value"); v != "" {
		t.Errorf("bob sees the cluster's storage (%s)", v)
	}
	b.screenshot(t, "refused")

	// alice: acme's admin.
	b.login(t, s.webURL, "alice", alice)
	b.open(t, s.webURL+"/console/#/tenants/acme")
	b.click(t, sel("namespace-row", "data-namespace", "acme/orders")+" a")
	b.click(t, sel("topic-row", "data-topic", topic)+" a")
	b.waitJS(t, `document.querySelector('[data-sub="billing"] [data-testid="sub-backlog"]')?.getAttribute("data-value") === "6"`, "billing's backlog")
	b.subAction(t, "billing", "action-skip", "skip-count", "4")
	waitBacklog(t, s.webURL, "persistent/acme/orders/placed", "billing", root, 2)
	b.open(t, s.webURL+"/console/#/tenants")
	b.waitJS(t, `document.querySelector('[data-testid="error"]')?.innerText`, "listing every tenant refused to a tenant admin")

	// root: the whole cluster.
	b.login(t, s.webURL, "root", root)
	b.open(t, s.webURL+"/console/#/overview")
	b.waitJS(t, `document.querySelector('[data-testid="stat-brokers"]')?.getAttribute("data-value") === "1"`, "the overview for a superuser")
	b.click(t, sel("nav-tenants"))
	b.waitFor(t, sel("tenant-row", "data-tenant", "acme"))
	for _, e := range b.errors() { // the refusals above are failed requests; nothing else may be logged
		if !strings.Contains(e, "Failed to load resource") {
			t.Errorf("browser console error: %s", e)
		}
	}
}

// consoleReadOnly=true: the console shows everything and offers no
// action, and a change sent anyway is refused.
func TestConsoleReadOnly(t *testing.T) {
	requireBrowser(t)
	s := startConsoleStandalone(t, "consoleReadOnly=true")
	client := newConsoleClient(t, s.brokerURL, nil)
	const topic = "persistent://public/default/ro"
	subscribeAndClose(t, client, topic, "s")
	publishOrders(t, client, topic, 3)
	b := newBrowser(t)
	b.open(t, s.webURL+"/console/#/topics/persistent/public/default/ro")
	b.waitJS(t, `document.querySelector('[data-sub="s"] [data-testid="sub-backlog"]')?.getAttribute("data-value") === "3"`, "the backlog")
	for _, a := range []string{"action-skip", "action-clear-backlog", "action-reset-time", "action-reset-id", "action-unsubscribe"} {
		if n := b.count(t, sel(a)); n != 0 {
			t.Errorf("read-only console offers %s", a)
		}
	}
	var answer struct {
		Status int
		Body   string
	}
	b.eval(t, `fetch("/console/api/admin/v2/persistent/public/default/ro/subscription/s/skip_all", {method: "POST"}).then(async r => ({status: r.status, body: await r.text()}))`, &answer)
	if answer.Status != http.StatusForbidden || !strings.Contains(answer.Body, "read-only") {
		t.Errorf("a change through the read-only console answered %d %s", answer.Status, answer.Body)
	}
	waitBacklog(t, s.webURL, "persistent/public/default/ro", "s", "", 3)
	for _, e := range b.errors() {
		if !strings.Contains(e, "403") {
			t.Errorf("browser console error: %s", e)
		}
	}
}

// Two brokers on ZooKeeper with three bookies, and a proxy: the console of
// either broker (and the proxy's) shows both brokers and every bookie, a
// namespace's topics with figures from the broker that serves each, and
// acts on a topic the other broker owns.
func TestConsoleTwoBrokerCluster(t *testing.T) {
	requireBrowser(t)
	zk := zktest.StartForTest(t, 1)
	conn := zk.Connection + "/c1"
	// No load shedding: a bundle shed while the in-process Go client sends
	// makes its producer reconnect, and the client's reconnection races its
	// own send (a data race inside pulsar-client-go that -race reports; the
	// workload tests run their client in a child process for it). The
	// topics are spread below by unloading their namespace once no client
	// is connected: placement then gives each broker its share.
	c := startProcessCluster(t, clusterStores{metadata: conn, configuration: conn, bookies: conn}, 2,
		"loadBalancerSheddingEnabled=false")
	first := fmt.Sprintf("http://127.0.0.1:%d", c.brokers[0].web)
	client := newConsoleClient(t, fmt.Sprintf("pulsar://127.0.0.1:%d", c.brokers[0].bin), nil)
	topics := make([]string, 8)
	for i := range topics {
		topics[i] = fmt.Sprintf("persistent://public/default/spread-%d", i)
		subscribeAndClose(t, client, topics[i], "s")
		publishOrders(t, client, topics[i], i+1)
	}
	deadline := time.Now().Add(60 * time.Second)
	for c.serving(t) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the topics' bundles are not spread over both brokers")
		}
		if code := adminJSON(t, http.MethodPut, first+"/admin/v2/namespaces/public/default/unload", "", nil); code >= 300 {
			t.Fatalf("unload public/default: HTTP %d", code)
		}
		for i := range topics {
			adminJSON(t, http.MethodGet, first+"/lookup/v2/topic/persistent/public/default/spread-"+strconv.Itoa(i), "", nil)
		}
		time.Sleep(time.Second)
	}
	// A topic the second broker owns, found by its lookup.
	var remote string
	for i, tp := range topics {
		var lk struct{ HTTPURL string }
		if adminJSON(t, http.MethodGet, first+"/lookup/v2/topic/persistent/public/default/spread-"+strconv.Itoa(i), "", &lk) == http.StatusOK &&
			!strings.Contains(lk.HTTPURL, strconv.Itoa(c.brokers[0].web)) {
			remote = tp
			break
		}
	}
	if remote == "" {
		t.Fatal("no topic is owned by the second broker")
	}
	remoteName := strings.TrimPrefix(remote, "persistent://public/default/")
	remoteBacklog := subBacklog(t, first, "persistent/public/default/"+remoteName, "s", "")

	proxyWeb := freePort(t)
	pconf := filepath.Join(t.TempDir(), "proxy.conf")
	writeFile(t, pconf, strings.Join([]string{"metadataStoreUrl=" + conn, fmt.Sprintf("servicePort=%d", freePort(t)),
		fmt.Sprintf("webServicePort=%d", proxyWeb), "bindAddress=127.0.0.1", "brokerProxyAllowedTargetPorts=*", ""}, "\n"))
	proxy := startMagnetarProcess(t, "proxy", nil, "--config", pconf)
	proxy.waitReady(t)

	b := newBrowser(t)
	for _, base := range []string{first, fmt.Sprintf("http://127.0.0.1:%d", proxyWeb)} {
		b.open(t, base+"/console/#/overview")
		b.waitJS(t, `document.querySelectorAll('[data-testid="broker-row"]').length === 2`, "two brokers in the overview via "+base)
		b.waitJS(t, `document.querySelectorAll('[data-testid="bookie-row"]').length === 3`, "three bookies via "+base)
		b.waitJS(t, `Number(document.querySelector('[data-testid="stat-bundles"]')?.getAttribute("data-value")) >= 2`, "bundles of both brokers")
	}
	b.open(t, first+"/console/#/overview")
	b.waitJS(t, `document.querySelectorAll('[data-testid="broker-row"]').length === 2`, "two brokers")
	b.screenshot(t, "cluster-overview")
	b.open(t, first+"/console/#/namespaces/public/default")
	for _, tp := range topics {
		b.waitFor(t, sel("topic-row", "data-topic", tp))
	}
	b.open(t, first+"/console/#/topics/persistent/public/default/"+remoteName)
	b.waitJS(t, `document.querySelector('[data-sub="s"] [data-testid="sub-backlog"]')?.getAttribute("data-value") === "`+
		strconv.FormatInt(remoteBacklog, 10)+`"`, "the other broker's topic's backlog")
	b.subAction(t, "s", "action-clear-backlog")
	waitBacklog(t, first, "persistent/public/default/"+remoteName, "s", "", 0)
	b.noErrors(t, "on the cluster's console")
}

// putJSON sends a PUT or POST with a JSON body to the admin API (as
// token, if any) and fails the test unless it succeeds.
func putJSON(t *testing.T, method, url, token, body string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, text)
	}
}

// Two standalones, "standalone" and "east", replicating a namespace: the
// replication page of the first shows the topic's replicator to east, per
// topic and per cluster.
func TestConsoleReplication(t *testing.T) {
	requireBrowser(t)
	home := startConsoleStandalone(t, "")
	east := startConsoleStandalone(t, "clusterName=east")
	for _, side := range []struct {
		s     *consoleStandalone
		other *consoleStandalone
		name  string
	}{{home, east, "east"}, {east, home, "standalone"}} {
		putJSON(t, http.MethodPut, side.s.webURL+"/admin/v2/clusters/"+side.name, "",
			fmt.Sprintf(`{"serviceUrl":%q,"brokerServiceUrl":%q}`, side.other.webURL, side.other.brokerURL))
		putJSON(t, http.MethodPut, side.s.webURL+"/admin/v2/tenants/geo", "", `{"allowedClusters":["standalone","east"]}`)
		putJSON(t, http.MethodPut, side.s.webURL+"/admin/v2/namespaces/geo/orders", "", "")
		putJSON(t, http.MethodPost, side.s.webURL+"/admin/v2/namespaces/geo/orders/replication", "", `["standalone","east"]`)
	}
	client := newConsoleClient(t, home.brokerURL, nil)
	const topic = "persistent://geo/orders/placed"
	publishOrders(t, client, topic, 5)

	b := newBrowser(t)
	b.open(t, home.webURL+"/console/#/replication")
	row := sel("replication-row", "data-cluster", "east", "data-topic", topic)
	b.waitFor(t, row)
	b.waitFor(t, sel("replication-cluster", "data-cluster", "east"))
	b.waitJS(t, `document.querySelector(`+jsq(row)+`)?.innerText.toLowerCase().includes("yes") ||
		document.querySelector(`+jsq(row)+`)?.innerText.toLowerCase().includes("connected")`, "the replicator to east connected")
	b.screenshot(t, "replication")
	b.open(t, home.webURL+"/console/#/topics/persistent/geo/orders/placed")
	b.waitFor(t, sel("replication-row", "data-cluster", "east"))
	b.noErrors(t, "on the replication pages")
}

// Basic authentication: the login page offers a user name and password
// (and no token field, as the broker names only "basic"); a wrong
// password is refused on the page, the right one signs in.
func TestConsoleBasicLogin(t *testing.T) {
	requireBrowser(t)
	users := filepath.Join(t.TempDir(), ".htpasswd")
	writeFile(t, users, "admin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\n") // password 123456
	s := startConsoleStandalone(t, `authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderBasic
basicAuthConf=`+users+`
authorizationEnabled=true
superUserRoles=admin`)
	b := newBrowser(t)
	b.open(t, s.webURL+"/console/")
	b.waitFor(t, sel("login-username"))
	if n := b.count(t, sel("login-token")); n != 0 {
		t.Errorf("the login page offers a token field although only basic authentication is on")
	}
	b.fill(t, sel("login-username"), "admin")
	b.fill(t, sel("login-password"), "wrong")
	b.click(t, sel("login-submit"))
	b.waitJS(t, `document.querySelector('[data-testid="error"]')?.innerText`, "the wrong password refused")
	b.waitFor(t, sel("login-password"))
	b.fill(t, sel("login-password"), "123456")
	b.click(t, sel("login-submit"))
	b.waitJS(t, `document.querySelector('[data-testid="whoami"]')?.innerText.includes("admin")`, "admin signed in")
	b.open(t, s.webURL+"/console/#/overview")
	b.waitJS(t, `document.querySelector('[data-testid="stat-brokers"]')?.getAttribute("data-value") === "1"`, "the overview")
	for _, e := range b.errors() { // the refused sign-in is a failed request; nothing else may be logged
		if !strings.Contains(e, "Failed to load resource") {
			t.Errorf("browser console error: %s", e)
		}
	}
}
