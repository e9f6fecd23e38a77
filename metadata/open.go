package metadata

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Target is a parsed metadata-store connection string.
type Target struct {
	Scheme string   // "memory", "zk", "etcd" or "local"
	Hosts  []string // zk: host:port list; etcd: endpoint URLs
	Chroot string   // zk: optional chroot path; etcd: optional key prefix
	Dir    string   // local: directory
	// Params are etcd's query parameters: cacert, cert, key, user,
	// password, password-file.
	Params map[string]string
}

const connectionForms = `want "memory:", "zk:host1:2181,host2:2181[/chroot]", ` +
	`"etcd:http://host1:2379,host2:2379[/prefix][?cacert=..&cert=..&key=..&user=..&password-file=..]" or "local:/path/to/dir"`

// ParseTarget parses a connection string in Pulsar's --metadata-store forms.
func ParseTarget(s string) (Target, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Target{}, fmt.Errorf("metadata store %q: no scheme; %s", s, connectionForms)
	}
	switch scheme {
	case "memory":
		if rest != "" && rest != "//" {
			return Target{}, fmt.Errorf("metadata store %q: memory takes no address; %s", s, connectionForms)
		}
		return Target{Scheme: scheme}, nil
	case "local":
		if !strings.HasPrefix(rest, "/") {
			return Target{}, fmt.Errorf("metadata store %q: local needs an absolute directory; %s", s, connectionForms)
		}
		return Target{Scheme: scheme, Dir: rest}, nil
	case "zk":
		return parseZK(s, strings.TrimPrefix(rest, "//"))
	case "etcd":
		return parseEtcd(s, rest)
	}
	return Target{}, fmt.Errorf("metadata store %q: unknown scheme %q; %s", s, scheme, connectionForms)
}

func parseZK(s, rest string) (Target, error) {
	t := Target{Scheme: "zk"}
	hosts := rest
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hosts, t.Chroot = rest[:i], rest[i:]
		if err := ValidatePath(t.Chroot); err != nil || t.Chroot == "/" {
			return Target{}, fmt.Errorf("metadata store %q: bad chroot %q; %s", s, t.Chroot, connectionForms)
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return Target{}, fmt.Errorf("metadata store %q: bad ZooKeeper address %q (want host:port); %s", s, h, connectionForms)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return Target{}, fmt.Errorf("metadata store %q: bad port in %q; %s", s, h, connectionForms)
		}
		t.Hosts = append(t.Hosts, h)
	}
	return t, nil
}

// etcdParams are the query parameters an etcd connection string may carry.
var etcdParams = map[string]bool{"cacert": true, "cert": true, "key": true, "user": true, "password": true, "password-file": true}

// parseEtcd parses "http://h1:2379,h2:2379/prefix?query" (Pulsar's
// metadataStoreUrl=etcd:... form); an endpoint without a scheme is http,
// or https when the query names TLS files. Only the last endpoint may
// carry the prefix.
func parseEtcd(s, rest string) (Target, error) {
	bad := func(format string, args ...any) (Target, error) {
		return Target{}, fmt.Errorf("metadata store %q: %s; %s", s, fmt.Sprintf(format, args...), connectionForms)
	}
	t := Target{Scheme: "etcd"}
	rest, query, _ := strings.Cut(rest, "?")
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return bad("bad query: %v", err)
		}
		t.Params = map[string]string{}
		for k, v := range q {
			if !etcdParams[k] || len(v) != 1 {
				return bad("unknown or repeated parameter %q", k)
			}
			t.Params[k] = v[0]
		}
	}
	defScheme := "http"
	if t.Params["cacert"] != "" || t.Params["cert"] != "" {
		defScheme = "https"
	}
	eps := strings.Split(rest, ",")
	for i, ep := range eps {
		if !strings.Contains(ep, "://") {
			ep = defScheme + "://" + ep
		}
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
			return bad("bad etcd endpoint %q (want http[s]://host:port)", eps[i])
		}
		host, port, err := net.SplitHostPort(u.Host)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n <= 0 || n > 65535 {
			return bad("bad etcd endpoint %q (want host:port)", eps[i])
		}
		if u.Path != "" {
			if i != len(eps)-1 {
				return bad("only the last endpoint may carry the key prefix")
			}
			if err := ValidatePath(u.Path); err != nil || u.Path == "/" {
				return bad("bad key prefix %q", u.Path)
			}
			t.Chroot = u.Path
		}
		t.Hosts = append(t.Hosts, u.Scheme+"://"+u.Host)
	}
	return t, nil
}

// Options tune Open. Zero values take Pulsar's defaults.
type Options struct {
	// SessionTimeout: metadataStoreSessionTimeoutMillis (zk; default 30 s).
	SessionTimeout time.Duration
	// OperationTimeout: metadataStoreOperationTimeoutSeconds (zk; default 30 s).
	OperationTimeout time.Duration
	// Logger receives the store's operator-facing events.
	Logger *slog.Logger
	// TLS, Username and Password: etcd's client certificates and
	// credentials; the connection string's query parameters fill them when
	// unset.
	TLS                *tls.Config
	Username, Password string
}

// Open connects to the store a connection string names. For zk it waits,
// bounded by ctx, until it has a session, retrying unreachable servers;
// for etcd, until the session's lease is granted.
func Open(ctx context.Context, connection string, opts Options) (Store, error) {
	t, err := ParseTarget(connection)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch t.Scheme {
	case "memory":
		return NewMemoryServer().NewSession(), nil
	case "local":
		return openLocalStore(t.Dir, LocalOptions{Logger: opts.Logger})
	case "etcd":
		return OpenEtcd(ctx, t, EtcdOptions{SessionTimeout: opts.SessionTimeout, OperationTimeout: opts.OperationTimeout,
			TLS: opts.TLS, Username: opts.Username, Password: opts.Password, Logger: opts.Logger})
	case "zk":
		return OpenZK(ctx, t, ZKOptions{SessionTimeout: opts.SessionTimeout,
			OperationTimeout: opts.OperationTimeout, Logger: opts.Logger})
	}
	return nil, fmt.Errorf("metadata store %q: unknown scheme %q; %s", connection, t.Scheme, connectionForms)
}
