package metadata

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Target is a parsed metadata-store connection string.
type Target struct {
	Scheme string   // "memory", "zk" or "local"
	Hosts  []string // zk: host:port list
	Chroot string   // zk: optional chroot path
	Dir    string   // local: directory
}

const connectionForms = `want "memory:", "zk:host1:2181,host2:2181[/chroot]" or "local:/path/to/dir"`

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

// Options tune Open. Zero values take Pulsar's defaults.
type Options struct {
	// SessionTimeout: metadataStoreSessionTimeoutMillis (zk; default 30 s).
	SessionTimeout time.Duration
	// OperationTimeout: metadataStoreOperationTimeoutSeconds (zk; default 30 s).
	OperationTimeout time.Duration
	// Logger receives the store's operator-facing events.
	Logger *slog.Logger
}

// Open connects to the store a connection string names. For zk it waits,
// bounded by ctx, until it has a session, retrying unreachable servers.
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
	case "zk":
		return OpenZK(ctx, t, ZKOptions{SessionTimeout: opts.SessionTimeout,
			OperationTimeout: opts.OperationTimeout, Logger: opts.Logger})
	}
	return nil, fmt.Errorf("metadata store %q: unknown scheme %q; %s", connection, t.Scheme, connectionForms)
}
