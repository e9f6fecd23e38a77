package auth

// Authorization, as Pulsar's PulsarAuthorizationProvider decides it.
//
// Behaviour:
//   - A superuser (superUserRoles) may do anything.
//   - A tenant's admin role (the tenant's adminRoles) may do anything in
//     the tenant: manage its namespaces and topics, produce, consume.
//   - Otherwise a role may produce or consume on a topic when the
//     namespace's auth_policies.namespace_auth, or the topic's entry in
//     destination_auth, grants it produce or consume; partitions count as
//     their partitioned topic. Consuming a subscription that
//     subscription_auth_roles lists needs one of its roles.
//   - Lookup (LOOKUP, PARTITIONED_METADATA, HTTP lookup) needs produce or
//     consume; listing a namespace's topics needs a grant in the namespace.
//   - With authorizationAllowWildcardsMatching a granted role "*" matches
//     every role, "pre*" roles starting with pre, "*suf" roles ending with
//     suf.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// Op is a topic operation.
type Op int

// Topic operations.
const (
	OpLookup Op = iota
	OpProduce
	OpConsume
)

func (o Op) String() string {
	return [...]string{"lookup", "produce", "consume"}[o]
}

// Topic names a topic for authorization.
type Topic struct {
	Tenant, Namespace string
	// Name is the full name (persistent://tenant/ns/topic); a partition's
	// suffix is stripped here.
	Name string
}

// Policies is where grants and tenant admins are read
// (*resources.Resources).
type Policies interface {
	GetTenant(ctx context.Context, name string) (resources.TenantInfo, error)
	GetNamespaceCached(ctx context.Context, tenant, ns string) (resources.Policies, error)
}

// tenantCacheTTL is how long a tenant's admin roles are reused: namespace
// policies come from a watched cache, tenants are read from the store,
// and a lookup storm should not read the tenant once per LOOKUP. A role
// removed from adminRoles keeps its rights this long at most.
const tenantCacheTTL = 2 * time.Second

// Authorizer decides what roles may do.
//
// Lock rules: mu guards tenants.
type Authorizer struct {
	superUsers []string
	wildcards  bool
	pol        Policies
	now        func() time.Time

	mu      sync.Mutex
	tenants map[string]cachedTenant
}

type cachedTenant struct {
	adminRoles []string
	exists     bool
	read       time.Time
}

// NewAuthorizer returns an authorizer with these superusers reading pol.
func NewAuthorizer(superUsers []string, wildcards bool, pol Policies) *Authorizer {
	return &Authorizer{superUsers: superUsers, wildcards: wildcards, pol: pol, now: time.Now, tenants: map[string]cachedTenant{}}
}

// IsSuperUser reports whether role is a superuser.
func (a *Authorizer) IsSuperUser(role string) bool {
	return role != "" && slices.Contains(a.superUsers, role)
}

// forbidden is the error for role not allowed to do what.
func forbidden(role, what string) error {
	if role == "" {
		role = "(no role)"
	}
	return fmt.Errorf("%w: role %s may not %s", ErrForbidden, role, what)
}

// AllowSuperUser: only superusers.
func (a *Authorizer) AllowSuperUser(role, what string) error {
	if a.IsSuperUser(role) {
		return nil
	}
	return forbidden(role, what)
}

// AllowTenantAdmin: superusers and the tenant's admin roles. A tenant that
// does not exist is forbidden to all but superusers.
func (a *Authorizer) AllowTenantAdmin(ctx context.Context, role, tenant, what string) error {
	if a.IsSuperUser(role) {
		return nil
	}
	ok, err := a.isTenantAdmin(ctx, role, tenant)
	if err != nil {
		return err
	}
	if !ok {
		return forbidden(role, what)
	}
	return nil
}

func (a *Authorizer) isTenantAdmin(ctx context.Context, role, tenant string) (bool, error) {
	if role == "" {
		return false, nil
	}
	t, err := a.tenant(ctx, tenant)
	if err != nil {
		return false, err
	}
	return t.exists && slices.Contains(t.adminRoles, role), nil
}

// tenant reads a tenant's admin roles, reusing a read younger than
// tenantCacheTTL.
func (a *Authorizer) tenant(ctx context.Context, name string) (cachedTenant, error) {
	now := a.now()
	a.mu.Lock()
	t, ok := a.tenants[name]
	a.mu.Unlock()
	if ok && now.Sub(t.read) < tenantCacheTTL {
		return t, nil
	}
	info, err := a.pol.GetTenant(ctx, name)
	switch {
	case errors.Is(err, resources.ErrNotFound), errors.Is(err, resources.ErrInvalid):
		t = cachedTenant{read: now}
	case err != nil:
		return cachedTenant{}, fmt.Errorf("authorization: read tenant %s: %w", name, err)
	default:
		t = cachedTenant{adminRoles: info.AdminRoles, exists: true, read: now}
	}
	a.mu.Lock()
	if len(a.tenants) >= maxCachedTenants {
		clear(a.tenants) // bounded: names come from clients
	}
	a.tenants[name] = t
	a.mu.Unlock()
	return t, nil
}

// maxCachedTenants bounds the tenant cache.
const maxCachedTenants = 10000

// AllowTopic decides a topic operation; subscription is the consumer's
// subscription (OpConsume only, "" for none).
func (a *Authorizer) AllowTopic(ctx context.Context, role string, op Op, t Topic, subscription string) error {
	if a.IsSuperUser(role) {
		return nil
	}
	what := fmt.Sprintf("%s on %s", op, t.Name)
	if role == "" {
		return forbidden(role, what)
	}
	p, err := a.pol.GetNamespaceCached(ctx, t.Tenant, t.Namespace)
	if err != nil && !errors.Is(err, resources.ErrNotFound) {
		return fmt.Errorf("authorization: read namespace %s/%s: %w", t.Tenant, t.Namespace, err)
	}
	if err == nil {
		if ok, reason := a.granted(p.AuthPolicies, role, op, t, subscription); ok {
			return nil
		} else if reason != "" {
			return forbidden(role, reason)
		}
	}
	admin, err := a.isTenantAdmin(ctx, role, t.Tenant)
	if err != nil {
		return err
	}
	if admin {
		return nil
	}
	return forbidden(role, what)
}

// granted reports whether the policies grant op; reason is set when a
// grant exists but the subscription's roles exclude this role.
func (a *Authorizer) granted(ap resources.AuthPolicies, role string, op Op, t Topic, subscription string) (bool, string) {
	has := func(actions []resources.AuthAction) bool {
		switch op {
		case OpProduce:
			return slices.Contains(actions, resources.ActionProduce)
		case OpConsume:
			return slices.Contains(actions, resources.ActionConsume)
		}
		return slices.Contains(actions, resources.ActionProduce) || slices.Contains(actions, resources.ActionConsume)
	}
	ok := a.grantIn(ap.NamespaceAuth, role, has) || a.grantIn(ap.DestinationAuth[t.Name], role, has)
	if !ok || op != OpConsume || subscription == "" {
		return ok, ""
	}
	if roles := ap.SubscriptionAuthRoles[subscription]; len(roles) > 0 && !slices.Contains(roles, role) {
		return false, fmt.Sprintf("consume subscription %s of %s (subscription_auth_roles)", subscription, t.Name)
	}
	return true, ""
}

func (a *Authorizer) grantIn(grants map[string][]resources.AuthAction, role string, has func([]resources.AuthAction) bool) bool {
	if has(grants[role]) {
		return true
	}
	if !a.wildcards {
		return false
	}
	for granted, actions := range grants {
		if matchWildcard(granted, role) && has(actions) {
			return true
		}
	}
	return false
}

// matchWildcard is authorizationAllowWildcardsMatching's rule.
func matchWildcard(granted, role string) bool {
	switch {
	case granted == "*":
		return true
	case strings.HasPrefix(granted, "*"):
		return strings.HasSuffix(role, granted[1:])
	case strings.HasSuffix(granted, "*"):
		return strings.HasPrefix(role, granted[:len(granted)-1])
	}
	return false
}

// AllowNamespaceTopics decides listing a namespace's topics: superusers,
// the tenant's admins, and roles with any grant in the namespace.
func (a *Authorizer) AllowNamespaceTopics(ctx context.Context, role, tenant, ns string) error {
	if a.IsSuperUser(role) {
		return nil
	}
	what := fmt.Sprintf("list the topics of %s/%s", tenant, ns)
	if role == "" {
		return forbidden(role, what)
	}
	p, err := a.pol.GetNamespaceCached(ctx, tenant, ns)
	if err == nil && a.grantIn(p.AuthPolicies.NamespaceAuth, role, func(acts []resources.AuthAction) bool { return len(acts) > 0 }) {
		return nil
	}
	return a.AllowTenantAdmin(ctx, role, tenant, what)
}
