package resources

import (
	"fmt"
	"strings"
)

// isNameByte says whether c may appear in a tenant, namespace or cluster
// name: Pulsar's NamedEntity pattern [-=:.\w] (\w is ASCII in Java as in
// Go). A loop, not a regexp: topics' policy lookups validate their names
// on every SEND that refreshes a policy, and the regexp was 40% of them.
func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_-=:.", c) >= 0
}

// isName says whether name is one or more name bytes (a byte of a
// multi-byte UTF-8 sequence never is one).
func isName(name string) bool {
	for i := range len(name) {
		if !isNameByte(name[i]) {
			return false
		}
	}
	return name != ""
}

// GlobalCluster is Pulsar's pseudo-cluster of v1 global namespaces: it
// may appear in a tenant's allowed clusters but is never a real cluster.
const GlobalCluster = "global"

// ValidateName checks a tenant, namespace or cluster name as Pulsar does;
// kind ("tenant", "namespace", "cluster") names the field in the error.
func ValidateName(kind, name string) error {
	if !isName(name) {
		return invalidf(kind, "invalid name %q: want one or more of letters, digits, '_', '-', '=', ':' and '.'", name)
	}
	// The pattern allows them, but they are not node names in any store.
	if name == "." || name == ".." {
		return invalidf(kind, "invalid name %q", name)
	}
	return nil
}

// validateNamespaceName checks a namespace of tenant: "namespace" (v2) or
// "cluster/namespace" (v1, Pulsar's legacy property/cluster/namespace
// names, stored under the same paths as Pulsar's). A v1 namespace may not
// be named as a domain (managed-ledger paths would nest, see
// managedledger/names.go).
func validateNamespaceName(tenant, namespace string) error {
	if err := ValidateName("tenant", tenant); err != nil {
		return err
	}
	cluster, name, v1 := strings.Cut(namespace, "/")
	if !v1 {
		return ValidateName("namespace", namespace)
	}
	if err := ValidateName("cluster", cluster); err != nil {
		return err
	}
	if err := ValidateName("namespace", name); err != nil {
		return err
	}
	if name == DomainPersistent || name == DomainNonPersistent {
		return invalidf("namespace", "a v1 namespace may not be named %q", name)
	}
	return nil
}

// V1Cluster is the cluster of a v1 namespace ("cluster/namespace"), and
// whether it is one.
func V1Cluster(namespace string) (string, bool) {
	cluster, _, ok := strings.Cut(namespace, "/")
	return cluster, ok
}

// Topic domains.
const (
	DomainPersistent    = "persistent"
	DomainNonPersistent = "non-persistent"
)

// TopicName identifies a topic: {Domain}://{Tenant}/{Namespace}/{Local}.
type TopicName struct {
	Domain, Tenant, Namespace, Local string
}

// String is the full name, e.g. persistent://public/default/orders.
func (t TopicName) String() string {
	return t.Domain + "://" + t.Tenant + "/" + t.Namespace + "/" + t.Local
}

func (t TopicName) validate() error {
	if t.Domain != DomainPersistent && t.Domain != DomainNonPersistent {
		return invalidf("topic", "domain of %s must be %s or %s", t, DomainPersistent, DomainNonPersistent)
	}
	if err := validateNamespaceName(t.Tenant, t.Namespace); err != nil {
		return err
	}
	if t.Local == "" || strings.ContainsFunc(t.Local, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return invalidf("topic", "local name of %s is empty or has control characters", t)
	}
	return nil
}

// encodeLocalName is Java's URLEncoder.encode(s, UTF-8), which Pulsar's
// Codec.encode uses for the last segment of a partitioned topic's path:
// letters, digits and ".-*_" stay, space becomes '+', every other byte
// becomes %XX. A '/' in a local name thus stays inside one path segment.
func encodeLocalName(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte(".-*_", c) >= 0:
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// decodeLocalName reverses encodeLocalName (Java's URLDecoder).
func decodeLocalName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b.WriteByte(' ')
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", fmt.Errorf("bad escape in encoded topic name %q", s)
			}
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
