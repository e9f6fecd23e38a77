package broker

// Authentication and authorization of the HTTP port, in one place: every
// request passes authHTTP before the admin API, lookup or schema handlers.
//
// Behaviour:
//   - Credentials: Authorization: Bearer <token> (token), Authorization:
//     Basic (basic), else the TLS client certificate (tls), else the
//     anonymous role. Bad credentials answer 401 with Pulsar's
//     {"reason": ...}; a role not allowed answers 403.
//   - What each path needs (httpAccess), as Pulsar's REST resources check:
//     topic lookup, partitions and other topic reads: produce or consume;
//     subscription operations and message reads: consume; listing a
//     namespace's topics: a grant in the namespace; other namespace and
//     topic operations, reading a tenant: the tenant's admin; listing,
//     creating, changing and deleting tenants, clusters (but reading
//     them), brokers, bookies, broker stats and anything not listed:
//     superuser. /status.html is open. The console (/console) as the
//     admin endpoints behind its views (consoleRequirement).

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/resources"
)

// authHTTP authenticates and authorizes each request (off when neither is
// configured).
func (b *Broker) authHTTP(next http.Handler) http.Handler {
	authn, authz := b.cfg.Authentication, b.cfg.Authorization
	if authn == nil && authz == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpAccess(r.Method, r.URL.EscapedPath()).access == accessOpen {
			next.ServeHTTP(w, r)
			return
		}
		subject, err := b.httpSubject(r)
		if err != nil {
			b.log.Warn("HTTP authentication failed", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "err", err)
			admin.WriteError(w, http.StatusUnauthorized, err.Error())
			return
		}
		if authz != nil {
			if err := b.authorizeHTTP(r, subject); err != nil {
				admin.WriteError(w, admin.StatusOf(err), err.Error())
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(admin.WithForwardedAuth(r.Context(), r.Header.Get("Authorization"))))
	})
}

// RequireSuperUser guards an operator endpoint (/debug/pprof) mounted
// outside HTTPHandler: with authorization on only superusers reach it.
func (b *Broker) RequireSuperUser(next http.Handler) http.Handler {
	if b.cfg.Authorization == nil {
		return next
	}
	authz := b.cfg.Authorization
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject, err := b.httpSubject(r)
		if err != nil {
			admin.WriteError(w, http.StatusUnauthorized, err.Error())
			return
		}
		if err := authz.AllowSuperUserAs(subject, "use "+r.URL.Path); err != nil {
			admin.WriteError(w, http.StatusForbidden, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originalPrincipalHeader names the client a proxy forwards a request for
// (Pulsar's proxy sets it; only proxyRoles may).
const originalPrincipalHeader = "X-Original-Principal"

// httpSubject authenticates a request (an empty subject with
// authentication off).
func (b *Broker) httpSubject(r *http.Request) (auth.Subject, error) {
	authn := b.cfg.Authentication
	if authn == nil {
		return auth.Subject{}, nil
	}
	role, err := authn.Authenticate(auth.HTTPCredentials(r))
	if err != nil {
		return auth.Subject{}, err
	}
	return b.cfg.ProxyRoles.Subject(role, r.Header.Get(originalPrincipalHeader))
}

// access is what a request needs.
type access int

const (
	accessOpen access = iota
	accessAuthenticated
	accessSuperUser
	accessTenantAdmin
	accessNamespaceTopics
	accessLookup
	accessProduce
	accessConsume
)

// httpRequirement is what a request needs, and of which tenant,
// namespace or topic.
type httpRequirement struct {
	access            access
	tenant, namespace string
	topic             TopicName
	subscription      string // of .../subscription/{sub}/..., escaped
}

// httpAccess classifies a request by method and path.
func httpAccess(method, path string) httpRequirement {
	if path == "/status.html" {
		return httpRequirement{access: accessOpen}
	}
	read := method == http.MethodGet || method == http.MethodHead
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if parts[0] == "console" {
		return consoleRequirement(parts[1:])
	}
	if len(parts) >= 7 && parts[0] == "lookup" && parts[1] == "v2" && parts[2] == "topic" {
		return topicRequirement(accessLookup, parts[3:])
	}
	if len(parts) >= 3 && parts[0] == "admin" && parts[1] == "v3" && parts[2] == "transactions" && read {
		// (abortTransaction, a POST, is for superusers.)
		return transactionsRequirement(parts[3:])
	}
	if len(parts) < 3 || parts[0] != "admin" || parts[1] != "v2" {
		return httpRequirement{access: accessSuperUser}
	}
	rest := parts[2:]
	switch rest[0] {
	case "tenants":
		if len(rest) == 2 && read {
			return httpRequirement{access: accessTenantAdmin, tenant: rest[1]}
		}
		return httpRequirement{access: accessSuperUser}
	case "clusters":
		if read {
			return httpRequirement{access: accessAuthenticated}
		}
		return httpRequirement{access: accessSuperUser}
	case "namespaces":
		switch {
		case len(rest) < 2:
			return httpRequirement{access: accessSuperUser}
		case len(rest) == 4 && rest[3] == "topics" && read:
			return httpRequirement{access: accessNamespaceTopics, tenant: rest[1], namespace: rest[2]}
		}
		return httpRequirement{access: accessTenantAdmin, tenant: rest[1]}
	case "persistent", "non-persistent":
		if len(rest) == 3 || (len(rest) == 4 && rest[3] == "partitioned") {
			if read {
				return httpRequirement{access: accessNamespaceTopics, tenant: rest[1], namespace: rest[2]}
			}
			return httpRequirement{access: accessTenantAdmin, tenant: rest[1]}
		}
		if len(rest) < 4 {
			return httpRequirement{access: accessSuperUser}
		}
		req := topicRequirement(topicAccess(read, rest[4:]), rest)
		for i, p := range rest[4:] {
			if p == "subscription" && 4+i+1 < len(rest) {
				req.subscription = rest[4+i+1]
			}
		}
		return req
	case "schemas":
		if len(rest) < 4 {
			return httpRequirement{access: accessSuperUser}
		}
		op := accessTenantAdmin
		switch {
		case read:
			op = accessLookup
		case method == http.MethodPost:
			op = accessProduce
		}
		return topicRequirement(op, append([]string{"persistent"}, rest[1:]...))
	}
	return httpRequirement{access: accessSuperUser}
}

// topicAccess is what an operation on a topic needs, given the path after
// the topic's name.
func topicAccess(read bool, sub []string) access {
	if len(sub) > 0 && sub[0] == "permissions" {
		return accessTenantAdmin // who may do what is the tenant's business, also to read
	}
	for _, s := range sub {
		switch s {
		case "subscription", "subscriptions", "examinemessage", "ledger", "backlog":
			return accessConsume
		}
	}
	if read {
		return accessLookup
	}
	return accessTenantAdmin
}

// topicRequirement names the topic of domain/tenant/ns/topic.
func topicRequirement(a access, p []string) httpRequirement {
	name := TopicName{Domain: p[0], Tenant: p[1], Namespace: p[2], Local: p[3]}
	if name.Domain != "non-persistent" {
		name.Domain = "persistent"
	}
	return httpRequirement{access: a, tenant: name.Tenant, namespace: name.Namespace, topic: name}
}

// orTenantMissing answers a refused call on a tenant that does not exist
// as Pulsar does, 404 "Tenant does not exist" (it checks the tenant before
// the role), rather than with the refusal.
func (b *Broker) orTenantMissing(ctx context.Context, tenant string, refused error) error {
	if refused == nil || b.cfg.Resources == nil {
		return refused
	}
	if ok, err := b.cfg.Resources.TenantExists(ctx, tenant); err == nil && !ok {
		return admin.Errorf(resources.ErrNotFound, "Tenant does not exist")
	}
	return refused
}

// authorizeHTTP decides a request for subject.
func (b *Broker) authorizeHTTP(r *http.Request, subject auth.Subject) error {
	z := b.cfg.Authorization
	req := httpAccess(r.Method, r.URL.EscapedPath())
	// Segments are escaped: a local name may hold anything, and a v1
	// namespace is "cluster%2Fns" (v1routes.go).
	for _, p := range []*string{&req.tenant, &req.namespace, &req.topic.Tenant, &req.topic.Namespace, &req.topic.Local} {
		if v, err := url.PathUnescape(*p); err == nil {
			*p = v
		}
	}
	what := r.Method + " " + r.URL.Path
	ctx := r.Context()
	switch req.access {
	case accessOpen:
		return nil
	case accessAuthenticated:
		if subject.Role == "" {
			return auth.ErrForbidden
		}
		return nil
	case accessSuperUser:
		return z.AllowSuperUserAs(subject, what)
	case accessTenantAdmin:
		return b.orTenantMissing(ctx, req.tenant, z.AllowTenantAdminAs(ctx, subject, req.tenant, what))
	case accessNamespaceTopics:
		return b.orTenantMissing(ctx, req.tenant, z.AllowNamespaceTopicsAs(ctx, subject, req.tenant, req.namespace))
	case accessLookup:
		return z.AllowTopicAs(ctx, subject, auth.OpLookup, authTopic(req.topic), "")
	case accessProduce:
		return z.AllowTopicAs(ctx, subject, auth.OpProduce, authTopic(req.topic), "")
	case accessConsume:
		sub, err := url.PathUnescape(req.subscription)
		if err != nil {
			sub = req.subscription
		}
		return z.AllowTopicAs(ctx, subject, auth.OpConsume, authTopic(req.topic), sub)
	}
	return z.AllowSuperUserAs(subject, what)
}

// consoleRequirement is what a request under /console needs: as the
// admin endpoints behind each view. The assets and the session (which
// authenticates itself, to tell the login page what failed) are open;
// /console/api/admin/... is open here because it is dispatched into this
// handler again as the admin call it carries. The /local/ endpoints
// (one broker's part, called by the broker serving the page) need what
// the whole does.
func consoleRequirement(rest []string) httpRequirement {
	if len(rest) < 2 || rest[0] != "api" {
		return httpRequirement{access: accessOpen}
	}
	rest = rest[1:]
	if rest[0] == "local" {
		rest = rest[1:]
	}
	switch {
	case len(rest) == 0:
		return httpRequirement{access: accessSuperUser}
	case rest[0] == "session" || rest[0] == "admin":
		return httpRequirement{access: accessOpen}
	case rest[0] == "namespaces" && len(rest) == 4 && rest[3] == "topics":
		return httpRequirement{access: accessNamespaceTopics, tenant: rest[1], namespace: rest[2]}
	case rest[0] == "history" && len(rest) == 5:
		return topicRequirement(topicAccess(true, []string{"stats"}), rest[1:5])
	}
	return httpRequirement{access: accessSuperUser} // overview, bookies, summary
}

// transactionsRequirement is what a read of /admin/v3/transactions needs:
// a topic's figures as its stats do; a coordinator's (stats, a
// transaction's metadata, slow transactions) an authenticated role, as
// Pulsar's, whose clients' tests read a transaction's metadata without
// being superusers.
func transactionsRequirement(rest []string) httpRequirement {
	if len(rest) >= 5 && strings.HasSuffix(rest[0], "Stats") && rest[0] != "coordinatorStats" {
		return topicRequirement(topicAccess(true, []string{"stats"}), rest[1:5])
	}
	return httpRequirement{access: accessAuthenticated}
}
