package metadata

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
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

// Open connects to the store a connection string names.
func Open(ctx context.Context, connection string) (Store, error) {
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
		return openLocalStore(t.Dir)
	}
	return nil, fmt.Errorf("metadata store %q: the %s backend is not in this build yet (memory: and local: are)", connection, t.Scheme)
}
