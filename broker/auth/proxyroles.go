package auth

// Proxy roles (proxyRoles): a proxy connects to brokers as its own role and
// names the client it speaks for in original_principal (binary CONNECT) or
// the X-Original-Principal header (HTTP).
//
// Behaviour, as Pulsar's AuthorizationService checks it:
//   - A connection authenticated as a proxy role must name an original
//     principal, and that principal must not itself be a proxy role (a
//     client cannot pass itself off as a proxy through a proxy).
//   - Any other role naming an original principal is refused: only a
//     proxy may speak for someone else.
//   - Authorization then needs both: the proxy role and the original
//     principal must each be allowed what is asked (superusers pass as
//     always), so a proxy cannot lend a client rights the proxy lacks, nor
//     the client rights only the proxy has.

import (
	"context"
	"fmt"
	"slices"
)

// Subject is who a connection or request acts as: the authenticated role
// and, behind a proxy, the client the proxy speaks for.
type Subject struct {
	Role     string
	Original string // "" unless Role is a proxy role
}

func (s Subject) String() string {
	if s.Original == "" {
		return s.Role
	}
	return s.Original + " (through proxy " + s.Role + ")"
}

// ProxyRoles is proxyRoles.
type ProxyRoles []string

// Subject checks that role may name original and returns the subject; the
// error is ErrUnauthenticated, as Pulsar refuses such a CONNECT.
func (p ProxyRoles) Subject(role, original string) (Subject, error) {
	isProxy := role != "" && slices.Contains(p, role)
	switch {
	case isProxy && original == "":
		return Subject{}, fmt.Errorf("%w: role %s is a proxy role and must name the client's original principal", ErrUnauthenticated, role)
	case isProxy && slices.Contains(p, original):
		return Subject{}, fmt.Errorf("%w: the original principal %s is a proxy role", ErrUnauthenticated, Clip(original))
	case !isProxy && original != "":
		return Subject{}, fmt.Errorf("%w: role %q named an original principal but is not one of proxyRoles", ErrUnauthenticated, Clip(role))
	}
	return Subject{Role: role, Original: original}, nil
}

// both applies allow to the subject's role and, behind a proxy, to the
// original principal too.
func (s Subject) both(allow func(role string) error) error {
	if err := allow(s.Role); err != nil {
		return err
	}
	if s.Original != "" {
		return allow(s.Original)
	}
	return nil
}

// AllowTopicAs is AllowTopic for a subject (both roles behind a proxy).
func (a *Authorizer) AllowTopicAs(ctx context.Context, s Subject, op Op, t Topic, subscription string) error {
	return s.both(func(role string) error { return a.AllowTopic(ctx, role, op, t, subscription) })
}

// AllowNamespaceTopicsAs is AllowNamespaceTopics for a subject.
func (a *Authorizer) AllowNamespaceTopicsAs(ctx context.Context, s Subject, tenant, ns string) error {
	return s.both(func(role string) error { return a.AllowNamespaceTopics(ctx, role, tenant, ns) })
}

// AllowTenantAdminAs is AllowTenantAdmin for a subject.
func (a *Authorizer) AllowTenantAdminAs(ctx context.Context, s Subject, tenant, what string) error {
	return s.both(func(role string) error { return a.AllowTenantAdmin(ctx, role, tenant, what) })
}

// AllowSuperUserAs is AllowSuperUser for a subject.
func (a *Authorizer) AllowSuperUserAs(s Subject, what string) error {
	return s.both(func(role string) error { return a.AllowSuperUser(role, what) })
}
