package broker

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/magnetar-io/magnetar/metadata"
)

// TopicName is a parsed, normalised topic name:
// {persistent|non-persistent}://tenant/namespace/local. A legacy (v1) name,
// {domain}://property/cluster/namespace/local, keeps "cluster/namespace"
// in Namespace: every path built from tenant and namespace (policies,
// bundle ownership, the managed ledger's tenant/cluster/namespace/domain/
// local) then comes out as Pulsar lays out v1 names, and a v1 namespace
// can never be taken for a v2 one, whose names have no '/'.
type TopicName struct {
	Domain, Tenant, Namespace, Local string
}

// MaxTopicNameLength bounds a full topic name in bytes. Pulsar sets no
// limit of its own, but its names become metadata-store paths, which
// ZooKeeper refuses long before a frame's 5 MiB; a bound keeps a 4 MiB
// name from costing every store and log it passes through.
const MaxTopicNameLength = 2048

// ParseTopicName accepts the forms clients send, as Pulsar's TopicName
// does: "my-topic" (in public/default), "tenant/ns/my-topic",
// "property/cluster/ns/my-topic" (v1), and the same with a domain. As in
// Pulsar, a name of four or more parts is v1, whatever is after its fourth
// '/' belonging to the local name. It refuses what Pulsar refuses (tenant,
// cluster and namespace outside [-=:.\w], see checkNamedEntity) and what no
// store can hold: invalid UTF-8, control characters, "." and "..", and
// names past MaxTopicNameLength.
func ParseTopicName(s string) (TopicName, error) {
	domain, rest := "persistent", s
	if d, r, ok := strings.Cut(s, "://"); ok {
		domain, rest = d, r
	}
	if domain != "persistent" && domain != "non-persistent" {
		return TopicName{}, fmt.Errorf("topic %q: domain must be persistent or non-persistent", s)
	}
	parts := strings.SplitN(rest, "/", 4)
	var t TopicName
	switch len(parts) {
	case 1:
		t = TopicName{Domain: domain, Tenant: "public", Namespace: "default", Local: parts[0]}
	case 3:
		t = TopicName{Domain: domain, Tenant: parts[0], Namespace: parts[1], Local: parts[2]}
	case 4:
		t = TopicName{Domain: domain, Tenant: parts[0], Namespace: parts[1] + "/" + parts[2], Local: parts[3]}
	default:
		return TopicName{}, fmt.Errorf("topic %q: want <topic>, <tenant>/<namespace>/<topic>, "+
			"<property>/<cluster>/<namespace>/<topic> or a full name", s)
	}
	if err := t.check(); err != nil {
		return TopicName{}, fmt.Errorf("topic %q: %w", s, err)
	}
	return t, nil
}

// parseNamespace splits a namespace name, "tenant/namespace" or (v1)
// "property/cluster/namespace", into the tenant and the rest.
func parseNamespace(s string) (tenant, ns string, err error) {
	tenant, ns, ok := strings.Cut(s, "/")
	if !ok {
		return "", "", fmt.Errorf("namespace %q: want tenant/namespace or property/cluster/namespace", s)
	}
	if err := checkNamedEntity(tenant); err != nil {
		return "", "", fmt.Errorf("namespace %q: tenant: %w", s, err)
	}
	if err := checkNamespacePart(ns); err != nil {
		return "", "", fmt.Errorf("namespace %q: %w", s, err)
	}
	return tenant, ns, nil
}

// V1Cluster is the cluster of a legacy (v1) name, and whether it is one.
func (t TopicName) V1Cluster() (string, bool) {
	cluster, _, ok := strings.Cut(t.Namespace, "/")
	return cluster, ok
}

func (t TopicName) check() error {
	if n := len(t.String()); n > MaxTopicNameLength {
		return fmt.Errorf("name of %d bytes is longer than %d", n, MaxTopicNameLength)
	}
	if err := checkNamedEntity(t.Tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if err := checkNamespacePart(t.Namespace); err != nil {
		return err
	}
	if err := checkNamePart(t.Local); err != nil {
		return fmt.Errorf("local name: %w", err)
	}
	return nil
}

// checkNamespacePart checks a namespace, "namespace" or, for v1 names,
// "cluster/namespace". A v1 namespace may not be named as a domain: its
// topics' managed ledgers (tenant/cluster/namespace/domain/local) would
// then nest under the v2 topic of namespace tenant/cluster named as that
// domain.
func checkNamespacePart(ns string) error {
	cluster, name, v1 := strings.Cut(ns, "/")
	if !v1 {
		if err := checkNamedEntity(ns); err != nil {
			return fmt.Errorf("namespace: %w", err)
		}
		return nil
	}
	if err := checkNamedEntity(cluster); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := checkNamedEntity(name); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	if name == "persistent" || name == "non-persistent" {
		return fmt.Errorf("namespace: a v1 namespace may not be named %q", name)
	}
	return nil
}

// checkNamedEntity is Pulsar's NamedEntity.checkName for tenants,
// namespaces and clusters: non-empty, only [-=:.\w] (ASCII \w).
func checkNamedEntity(name string) error {
	if err := checkNamePart(name); err != nil {
		return err
	}
	for _, r := range name {
		if !(r < utf8.RuneSelf && (r == '-' || r == '=' || r == ':' || r == '.' || r == '_' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')) {
			return fmt.Errorf("%q has characters outside [-=:.a-zA-Z0-9_]", name)
		}
	}
	return nil
}

// checkNamePart refuses names no store path can hold.
func checkNamePart(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a name", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("not valid UTF-8")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("control character in %q", name)
	}
	return nil
}

// String is the full name.
func (t TopicName) String() string {
	return t.Domain + "://" + t.Tenant + "/" + t.Namespace + "/" + t.Local
}

// ManagedLedgerName is the name of the topic's managed ledger, laid out as
// Pulsar's: tenant/namespace/domain/local, with the local name escaped as
// one path segment (metadata.EscapeSegment), so that a '/' in a local name
// never nests one topic's metadata inside another's. Pulsar URL-encodes
// the whole local name; we escape only what needs it, so the topics
// stored before keep their nodes.
func (t TopicName) ManagedLedgerName() string {
	return managedLedgerPrefix(t.Tenant, t.Namespace, t.Domain) + metadata.EscapeSegment(t.Local)
}

func managedLedgerPrefix(tenant, ns, domain string) string {
	return tenant + "/" + ns + "/" + domain + "/"
}

// localNameOf is the local name of a managed ledger listed under
// managedLedgerPrefix (the inverse of ManagedLedgerName).
func localNameOf(mlName, prefix string) (string, bool) {
	enc, ok := strings.CutPrefix(mlName, prefix)
	if !ok || strings.Contains(enc, "/") {
		return "", false
	}
	name, err := metadata.UnescapeSegment(enc)
	return name, err == nil
}

// Persistent reports whether the topic is stored.
func (t TopicName) Persistent() bool { return t.Domain == "persistent" }
