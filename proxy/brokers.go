package proxy

// Broker discovery and the target check.
//
// The registered brokers are read from ownership.BrokersPath (one
// ephemeral node per live broker) into a snapshot, refreshed when the
// children change (a watch), every 10 s in case a watch was lost, and
// before refusing a target that is not in it (a broker that just joined).
// A target must be registered (with discovery), and its host name, its
// resolved address and its port must pass the allow-lists; the proxy dials
// the address it checked, so a DNS answer that changes between the check
// and the dial cannot send it elsewhere.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/metadata"
)

// brokerInfo is one broker: its binary addresses (host:port) and web
// URLs, plaintext and TLS ("" when the broker serves no TLS port).
type brokerInfo struct {
	service    string // host:port of pulsar://
	serviceTLS string // host:port of pulsar+ssl://
	web        string // http://host:port
	webTLS     string // https://host:port
}

// binary is the address to reach the broker at: its TLS port with
// tlsEnabledWithBroker.
func (b brokerInfo) binary(useTLS bool) string {
	if useTLS {
		return b.serviceTLS
	}
	return b.service
}

// webURL is the base URL to reach the broker's web service at.
func (b brokerInfo) webURL(useTLS bool) string {
	if useTLS {
		return b.webTLS
	}
	return b.web
}

// errNotAllowed is a target the proxy refuses to connect to.
var errNotAllowed = errors.New("proxy: target broker not allowed")

type registry struct {
	// store is the metadata session (nil: static brokers); replaced by
	// reopen after a session loss. storeMu guards it.
	storeMu sync.Mutex
	store   metadata.Store
	owned   bool // store was opened by renewSession: close closes it
	reopen  func(ctx context.Context) (metadata.Store, error)
	log     interface{ Warn(string, ...any) }
	static  []brokerInfo
	list    atomic.Pointer[[]brokerInfo]
	next    atomic.Uint64
	refresh sync.Mutex // one refresh at a time
	// left, when set, hears of the service addresses of brokers that left
	// the registry (their node is gone: a stop, or a session that expired
	// because the broker died, stopped or was cut off). Set before start.
	left func(addrs map[string]bool)

	hosts   []string // patterns
	anyIP   bool
	ipNets  []*net.IPNet
	ports   portRanges
	resolve func(ctx context.Context, host string) ([]net.IP, error)
}

func newRegistry(cfg Config) (*registry, error) {
	r := &registry{store: cfg.Metadata, reopen: cfg.Reopen, log: cfg.Logger, resolve: func(ctx context.Context, host string) ([]net.IP, error) {
		return net.DefaultResolver.LookupIP(ctx, "ip", host)
	}}
	var err error
	if r.ports, err = parsePorts(cfg.BrokerProxyAllowedTargetPorts); err != nil {
		return nil, err
	}
	for _, h := range strings.Split(cfg.BrokerProxyAllowedHostNames, ",") {
		if h = strings.TrimSpace(h); h != "" {
			r.hosts = append(r.hosts, strings.ToLower(h))
		}
	}
	for _, s := range strings.Split(cfg.BrokerProxyAllowedIPAddresses, ",") {
		switch s = strings.TrimSpace(s); {
		case s == "":
		case s == "*":
			r.anyIP = true
		case strings.Contains(s, "/"):
			_, n, err := net.ParseCIDR(s)
			if err != nil {
				return nil, fmt.Errorf("brokerProxyAllowedIPAddresses: %w", err)
			}
			r.ipNets = append(r.ipNets, n)
		default:
			ip := net.ParseIP(s)
			if ip == nil {
				return nil, fmt.Errorf("brokerProxyAllowedIPAddresses: bad address %q", s)
			}
			bits := 8 * len(ip.To16())
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			r.ipNets = append(r.ipNets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
		}
	}
	if cfg.Metadata == nil {
		if cfg.BrokerServiceURL == "" || cfg.BrokerWebServiceURL == "" {
			return nil, errors.New("proxy: either a metadata store or brokerServiceURL and brokerWebServiceURL are needed")
		}
		u, err := url.Parse(cfg.BrokerServiceURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("brokerServiceURL %q: want pulsar://host:port", cfg.BrokerServiceURL)
		}
		b := brokerInfo{service: u.Host, web: strings.TrimSuffix(cfg.BrokerWebServiceURL, "/"),
			webTLS: strings.TrimSuffix(cfg.BrokerWebServiceURLTLS, "/")}
		if cfg.BrokerServiceURLTLS != "" {
			if u, err = url.Parse(cfg.BrokerServiceURLTLS); err != nil || u.Host == "" {
				return nil, fmt.Errorf("brokerServiceURLTLS %q: want pulsar+ssl://host:port", cfg.BrokerServiceURLTLS)
			}
			b.serviceTLS = u.Host
		}
		r.static = []brokerInfo{b}
		r.list.Store(&r.static)
	}
	return r, nil
}

// start reads the brokers once and keeps the snapshot current until ctx
// ends.
func (r *registry) start(ctx context.Context) error {
	if r.currentStore() == nil {
		return nil
	}
	if err := r.reload(ctx); err != nil {
		return err
	}
	go r.watchLoop(ctx)
	return nil
}

func (r *registry) watchLoop(ctx context.Context) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		w, err := r.currentStore().Watch(ctx, ownership.BrokersPath)
		if errors.Is(err, metadata.ErrSessionLost) {
			r.renewSession(ctx)
			continue
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				continue
			}
		}
		_ = r.reload(ctx) // changes before the watch began
	events:
		for {
			select {
			case <-ctx.Done():
				w.Close()
				return
			case <-tick.C:
				_ = r.reload(ctx)
			case ev, ok := <-w.Events():
				if !ok {
					break events
				}
				if ev.Type != metadata.EventModified { // load reports change data only
					_ = r.reload(ctx)
				}
			}
		}
		w.Close()
	}
}

// close closes a session the registry opened itself.
func (r *registry) close() {
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	if r.owned {
		_ = r.store.Close()
	}
}

func (r *registry) currentStore() metadata.Store {
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	return r.store
}

// renewSession replaces a lost metadata session with a new one (Reopen),
// retrying until it works or ctx ends; without Reopen discovery stops at
// the last snapshot.
func (r *registry) renewSession(ctx context.Context) {
	if r.reopen == nil {
		r.log.Warn("proxy: metadata session lost and no way to open another; serving the brokers last seen")
		<-ctx.Done()
		return
	}
	r.log.Warn("proxy: metadata session lost; opening a new one")
	for ctx.Err() == nil {
		s, err := r.reopen(ctx)
		if err == nil {
			r.storeMu.Lock()
			old, wasOwned := r.store, r.owned
			r.store, r.owned = s, true
			r.storeMu.Unlock()
			if wasOwned {
				_ = old.Close()
			}
			_ = r.reload(ctx)
			return
		}
		r.log.Warn("proxy: opening a new metadata session failed; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// reload reads every registered broker into a new snapshot.
func (r *registry) reload(ctx context.Context) error {
	r.refresh.Lock()
	defer r.refresh.Unlock()
	store := r.currentStore()
	ids, err := store.Children(ctx, ownership.BrokersPath)
	if errors.Is(err, metadata.ErrNotFound) {
		ids, err = nil, nil
	}
	if err != nil {
		return err
	}
	list := make([]brokerInfo, 0, len(ids))
	for _, id := range ids {
		value, _, err := store.Get(ctx, ownership.BrokersPath+"/"+id)
		if errors.Is(err, metadata.ErrNotFound) {
			continue // went away meanwhile
		}
		if err != nil {
			return err
		}
		var d ownership.BrokerData
		if json.Unmarshal(value, &d) != nil {
			continue
		}
		u, err := url.Parse(d.PulsarServiceURL)
		if err != nil || u.Host == "" {
			continue
		}
		b := brokerInfo{service: u.Host, web: strings.TrimSuffix(d.WebServiceURL, "/"),
			webTLS: strings.TrimSuffix(d.WebServiceURLTLS, "/")}
		if u, err := url.Parse(d.PulsarServiceURLTLS); err == nil {
			b.serviceTLS = u.Host
		}
		list = append(list, b)
	}
	prev := r.list.Swap(&list)
	if r.left != nil && prev != nil {
		if gone := leftBrokers(*prev, list); len(gone) > 0 {
			go r.left(gone) // not under refresh: closing a TLS client can wait on its peer
		}
	}
	return nil
}

// leftBrokers is the service addresses of the brokers in prev that are not
// in next.
func leftBrokers(prev, next []brokerInfo) map[string]bool {
	still := map[string]bool{}
	for _, b := range next {
		still[b.service] = true
	}
	gone := map[string]bool{}
	for _, b := range prev {
		if !still[b.service] {
			for _, a := range []string{b.service, b.serviceTLS} {
				if a != "" {
					gone[a] = true
				}
			}
		}
	}
	return gone
}

func (r *registry) brokers() []brokerInfo {
	if p := r.list.Load(); p != nil {
		return *p
	}
	return nil
}

// pick is the next broker in turn.
func (r *registry) pick() (brokerInfo, error) {
	list := r.brokers()
	if len(list) == 0 {
		return brokerInfo{}, errors.New("proxy: no broker is registered")
	}
	return list[r.next.Add(1)%uint64(len(list))], nil
}

// registered reports whether hostport (or, web, an http URL's host) is a
// registered broker's, reading the store again before saying no.
func (r *registry) registered(ctx context.Context, hostport string, web bool) bool {
	if r.static != nil {
		return true // static: only the allow-lists apply
	}
	_, ok := r.find(ctx, hostport, web)
	return ok
}

// find is the registered broker one of whose addresses is hostport (web:
// one of whose web URLs has that host), reading the store again before
// saying there is none.
func (r *registry) find(ctx context.Context, hostport string, web bool) (brokerInfo, bool) {
	for attempt := 0; attempt < 2; attempt++ {
		for _, b := range r.brokers() {
			if b.has(hostport, web) {
				return b, true
			}
		}
		if attempt == 0 && (r.static != nil || r.reload(ctx) != nil) {
			return brokerInfo{}, false
		}
	}
	return brokerInfo{}, false
}

func (b brokerInfo) has(hostport string, web bool) bool {
	if web {
		return strings.EqualFold(webHost(b.web), hostport) || (b.webTLS != "" && strings.EqualFold(webHost(b.webTLS), hostport))
	}
	return strings.EqualFold(b.service, hostport) || (b.serviceTLS != "" && strings.EqualFold(b.serviceTLS, hostport))
}

func webHost(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

// checkTarget decides whether the proxy may connect to hostport for a
// client and returns the address to dial (the checked IP and port).
func (r *registry) checkTarget(ctx context.Context, hostport string, web bool) (string, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not host:port", errNotAllowed, hostport)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || !r.ports.allows(port) {
		return "", fmt.Errorf("%w: port %s is not in brokerProxyAllowedTargetPorts", errNotAllowed, portStr)
	}
	if !r.hostAllowed(host) {
		return "", fmt.Errorf("%w: host %s is not in brokerProxyAllowedHostNames", errNotAllowed, host)
	}
	if !r.registered(ctx, hostport, web) {
		return "", fmt.Errorf("%w: %s is not a registered broker", errNotAllowed, hostport)
	}
	ips := []net.IP{net.ParseIP(host)}
	if ips[0] == nil {
		if ips, err = r.resolve(ctx, host); err != nil {
			return "", fmt.Errorf("proxy: resolve %s: %w", host, err)
		}
	}
	for _, ip := range ips {
		if r.ipAllowed(ip) {
			return net.JoinHostPort(ip.String(), portStr), nil
		}
	}
	return "", fmt.Errorf("%w: no address of %s is in brokerProxyAllowedIPAddresses", errNotAllowed, host)
}

func (r *registry) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	for _, p := range r.hosts {
		if ok, _ := path.Match(p, host); ok {
			return true
		}
	}
	return false
}

func (r *registry) ipAllowed(ip net.IP) bool {
	if r.anyIP {
		return true
	}
	for _, n := range r.ipNets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
