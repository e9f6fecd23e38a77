package admin

// Namespaces: /admin/v2/namespaces/{tenant}[/{namespace}].
//
// Behavior, as Pulsar's NamespacesBase for v2 namespaces:
//   - GET {tenant} lists "tenant/namespace" names (404 for no such tenant).
//   - PUT creates, with an optional Policies body (pulsaradmin sends none,
//     or one carrying bundles): 404 for no such tenant, 409 if it exists.
//     Without replication clusters the namespace replicates to this
//     broker's cluster; without bundles it gets the default count.
//   - GET answers the policies; GET .../bundles the bundles.
//   - GET .../topics lists the broker's topics of the namespace
//     (?mode=PERSISTENT, the default, NON_PERSISTENT or ALL).
//   - DELETE answers 409 "not empty" while the namespace has topics or
//     partitioned topics. It marks the namespace deleted, looks for topics
//     again (one created meanwhile would otherwise be orphaned), then
//     removes it. ?force=true is 405, as Pulsar with
//     forceDeleteNamespaceAllowed=false (its default).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/magnetar-io/magnetar/broker/resources"
)

func (a *api) registerNamespaces(mux *http.ServeMux) {
	const ns = "/admin/v2/namespaces/{tenant}/{namespace}"
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}", a.listNamespaces)
	mux.HandleFunc("PUT "+ns, a.createNamespace)
	mux.HandleFunc("GET "+ns, a.getNamespace)
	mux.HandleFunc("DELETE "+ns, a.deleteNamespace)
	mux.HandleFunc("GET "+ns+"/topics", a.listTopics)
	mux.HandleFunc("GET "+ns+"/bundles", a.getBundles)
}

// listNamespaces answers a tenant's namespaces, v2 and v1; the v1 route
// of one cluster's (GET /admin/namespaces/{property}/{cluster}) comes
// here with v1Cluster set.
func (a *api) listNamespaces(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	names, err := a.res.ListNamespaces(r.Context(), tenant)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	cluster := r.URL.Query().Get("v1Cluster")
	full := make([]string, 0, len(names))
	for _, n := range names {
		if cluster == "" || strings.HasPrefix(n, cluster+"/") {
			full = append(full, tenant+"/"+n)
		}
	}
	WriteJSON(w, full)
}

func (a *api) createNamespace(w http.ResponseWriter, r *http.Request) {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	p := resources.NewPolicies()
	if err := decodeBody(w, r, "policies", &p); err != nil && !errors.Is(err, errNoBody) {
		a.fail(w, r, err)
		return
	}
	// A v1 namespace belongs to its cluster: resources replicate it there.
	c, v1 := resources.V1Cluster(ns)
	bound := v1 && c != resources.GlobalCluster
	if len(p.ReplicationClusters) == 0 && a.cluster != "" && !bound {
		p.ReplicationClusters = []string{a.cluster}
	}
	if _, err := a.res.CreateNamespace(r.Context(), tenant, ns, p); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("namespace created", "namespace", tenant+"/"+ns)
	done(w)
}

func (a *api) getNamespace(w http.ResponseWriter, r *http.Request) {
	p, err := a.res.GetNamespace(r.Context(), r.PathValue("tenant"), r.PathValue("namespace"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	WriteJSON(w, p)
}

func (a *api) getBundles(w http.ResponseWriter, r *http.Request) {
	b, err := a.res.Bundles(r.Context(), r.PathValue("tenant"), r.PathValue("namespace"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	WriteJSON(w, b)
}

// topicModes maps Pulsar's ?mode= to the prefixes of the topics it keeps.
var topicModes = map[string][]string{
	"PERSISTENT":     {resources.DomainPersistent + "://"},
	"NON_PERSISTENT": {resources.DomainNonPersistent + "://"},
	"ALL":            {resources.DomainPersistent + "://", resources.DomainNonPersistent + "://"},
}

func (a *api) listTopics(w http.ResponseWriter, r *http.Request) {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	mode := strings.ToUpper(r.URL.Query().Get("mode"))
	if mode == "" {
		mode = "PERSISTENT"
	}
	prefixes, ok := topicModes[mode]
	if !ok {
		a.fail(w, r, invalid("mode", fmt.Sprintf("unknown mode %q, want PERSISTENT, NON_PERSISTENT or ALL", mode)))
		return
	}
	topics, err := a.namespaceTopics(r.Context(), tenant, ns)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The broker's slice is filtered and sorted on a copy: it may be its own.
	kept := slices.DeleteFunc(slices.Clone(topics), func(t string) bool {
		return !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(t, p) })
	})
	slices.Sort(kept)
	WriteJSON(w, orEmpty(kept))
}

// namespaceTopics asks the broker for the topics of an existing namespace.
func (a *api) namespaceTopics(ctx context.Context, tenant, ns string) ([]string, error) {
	ok, err := a.res.NamespaceExists(ctx, tenant, ns)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("namespace %s/%s %w", tenant, ns, resources.ErrNotFound)
	}
	topics, err := a.topics.ListTopics(ctx, tenant, ns)
	if err != nil {
		return nil, fmt.Errorf("list topics of namespace %s/%s: %w", tenant, ns, err)
	}
	return topics, nil
}

func (a *api) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	if r.URL.Query().Get("force") == "true" {
		WriteError(w, http.StatusMethodNotAllowed, "Broker doesn't allow forced deletion of namespaces")
		return
	}
	if err := a.deleteEmptyNamespace(r.Context(), tenant, ns); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("namespace deleted", "namespace", tenant+"/"+ns)
	done(w)
}

func (a *api) deleteEmptyNamespace(ctx context.Context, tenant, ns string) error {
	if err := a.ensureNoTopics(ctx, tenant, ns); err != nil {
		return err
	}
	if _, err := a.res.UpdateNamespace(ctx, tenant, ns, func(p *resources.Policies) error {
		p.Deleted = true
		return nil
	}); err != nil {
		return err
	}
	err := a.ensureNoTopics(ctx, tenant, ns)
	if err == nil {
		err = a.res.DeleteNamespace(ctx, tenant, ns, false)
	}
	if err != nil {
		a.unmarkDeleted(ctx, tenant, ns)
	}
	return err
}

// ensureNoTopics fails with ErrNotEmpty (409) if the namespace has topics.
func (a *api) ensureNoTopics(ctx context.Context, tenant, ns string) error {
	topics, err := a.namespaceTopics(ctx, tenant, ns)
	if err != nil {
		return err
	}
	partitioned, err := a.res.ListPartitionedTopics(ctx, tenant, ns)
	if err != nil {
		return err
	}
	if len(topics) > 0 || len(partitioned) > 0 {
		return fmt.Errorf("namespace %s/%s %w: it has %d topics and %d partitioned topics",
			tenant, ns, resources.ErrNotEmpty, len(topics), len(partitioned))
	}
	return nil
}

// unmarkDeleted undoes the deleted mark of a namespace that stays. If
// that fails too the namespace keeps the mark, as in Pulsar, and the
// operator deletes it again or clears the mark.
func (a *api) unmarkDeleted(ctx context.Context, tenant, ns string) {
	_, err := a.res.UpdateNamespace(ctx, tenant, ns, func(p *resources.Policies) error {
		p.Deleted = false
		return nil
	})
	if err != nil && !errors.Is(err, resources.ErrNotFound) {
		a.log.Error("namespace left marked deleted", "namespace", tenant+"/"+ns, "err", err)
	}
}
