package broker

import (
	"fmt"
	"strings"
)

// TopicName is a parsed, normalised topic name:
// {persistent|non-persistent}://tenant/namespace/local.
type TopicName struct {
	Domain, Tenant, Namespace, Local string
}

// ParseTopicName accepts the forms clients send: "my-topic" (in
// public/default), "tenant/ns/my-topic", and full names.
func ParseTopicName(s string) (TopicName, error) {
	domain, rest := "persistent", s
	if d, r, ok := strings.Cut(s, "://"); ok {
		domain, rest = d, r
	}
	if domain != "persistent" && domain != "non-persistent" {
		return TopicName{}, fmt.Errorf("topic %q: domain must be persistent or non-persistent", s)
	}
	parts := strings.SplitN(rest, "/", 3)
	var t TopicName
	switch len(parts) {
	case 1:
		t = TopicName{Domain: domain, Tenant: "public", Namespace: "default", Local: parts[0]}
	case 3:
		t = TopicName{Domain: domain, Tenant: parts[0], Namespace: parts[1], Local: parts[2]}
	default:
		return TopicName{}, fmt.Errorf("topic %q: want <topic>, <tenant>/<namespace>/<topic> or a full name", s)
	}
	for _, p := range []string{t.Tenant, t.Namespace, t.Local} {
		if p == "" || strings.ContainsAny(p, "\x00\n\r") {
			return TopicName{}, fmt.Errorf("topic %q: empty or invalid part", s)
		}
	}
	if strings.Contains(t.Local, "/") && !strings.HasPrefix(s, domain+"://") {
		return TopicName{}, fmt.Errorf("topic %q: '/' in the local name", s)
	}
	return t, nil
}

// String is the full name.
func (t TopicName) String() string {
	return t.Domain + "://" + t.Tenant + "/" + t.Namespace + "/" + t.Local
}

// ManagedLedgerName is the name of the topic's managed ledger, as Pulsar
// lays them out: tenant/namespace/persistent/topic.
func (t TopicName) ManagedLedgerName() string {
	return t.Tenant + "/" + t.Namespace + "/" + t.Domain + "/" + t.Local
}

// Persistent reports whether the topic is stored.
func (t TopicName) Persistent() bool { return t.Domain == "persistent" }
