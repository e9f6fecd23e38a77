package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/magnetar-io/magnetar/metadata"
)

// TenantInfo is Pulsar's TenantInfo, stored at /admin/policies/<tenant>:
// {"adminRoles": [...], "allowedClusters": [...]}.
type TenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`

	// Extra holds the members this type does not model, verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

type plainTenant TenantInfo

// UnmarshalJSON keeps unknown members in Extra.
func (t *TenantInfo) UnmarshalJSON(data []byte) error {
	var v plainTenant
	extra, err := decodeWithExtra(data, &v)
	if err != nil {
		return err
	}
	v.Extra = extra
	*t = TenantInfo(v)
	return nil
}

// MarshalJSON writes empty sets as [], never null.
func (t TenantInfo) MarshalJSON() ([]byte, error) {
	t.AdminRoles = orEmptySlice(t.AdminRoles)
	t.AllowedClusters = orEmptySlice(t.AllowedClusters)
	return encodeWithExtra(plainTenant(t), t.Extra)
}

func tenantPath(name string) string { return policiesRoot + "/" + name }

func tenantWhat(name string) string { return "tenant " + name }

// ListTenants returns the tenants' names, sorted.
func (r *Resources) ListTenants(ctx context.Context) ([]string, error) {
	return children(ctx, r.store, policiesRoot)
}

// GetTenant returns a tenant's info.
func (r *Resources) GetTenant(ctx context.Context, name string) (TenantInfo, error) {
	if err := ValidateName("tenant", name); err != nil {
		return TenantInfo{}, err
	}
	t, _, err := getJSON[TenantInfo](ctx, r.store, tenantPath(name), tenantWhat(name))
	return t, err
}

// TenantExists reports whether a tenant exists.
func (r *Resources) TenantExists(ctx context.Context, name string) (bool, error) {
	if err := ValidateName("tenant", name); err != nil {
		return false, err
	}
	return nodeExists(ctx, r.store, tenantPath(name), tenantWhat(name))
}

// CreateTenant records a new tenant. Its allowed clusters must be set and
// exist (ErrPrecondition, as Pulsar's 412).
func (r *Resources) CreateTenant(ctx context.Context, name string, t TenantInfo) error {
	if err := ValidateName("tenant", name); err != nil {
		return err
	}
	t.canonicalize()
	if err := r.checkAllowedClusters(ctx, t.AllowedClusters); err != nil {
		return err
	}
	return createJSON(ctx, r.store, tenantPath(name), tenantWhat(name), t)
}

// UpdateTenant applies mutate to a tenant and writes the result if it is
// valid. A cluster may leave allowedClusters only while no namespace of
// the tenant replicates to it (ErrPrecondition).
func (r *Resources) UpdateTenant(ctx context.Context, name string, mutate func(*TenantInfo) error) (TenantInfo, error) {
	if err := ValidateName("tenant", name); err != nil {
		return TenantInfo{}, err
	}
	return updateJSON(ctx, r.store, tenantPath(name), tenantWhat(name), func(t *TenantInfo) error {
		old := slices.Clone(t.AllowedClusters)
		if err := mutate(t); err != nil {
			return err
		}
		t.canonicalize()
		if err := r.checkAllowedClusters(ctx, t.AllowedClusters); err != nil {
			return err
		}
		return r.checkClustersUnused(ctx, name, old, t.AllowedClusters)
	})
}

// DeleteTenant removes a tenant without namespaces (ErrNotEmpty otherwise).
func (r *Resources) DeleteTenant(ctx context.Context, name string) error {
	if err := ValidateName("tenant", name); err != nil {
		return err
	}
	ok, stat, err := r.store.Exists(ctx, tenantPath(name))
	if err != nil {
		return fmt.Errorf("read %s: %w", tenantWhat(name), err)
	}
	if !ok {
		return notFound(tenantWhat(name))
	}
	if stat.NumChildren > 0 {
		return fmt.Errorf("%s %w: it still has %d namespaces", tenantWhat(name), ErrNotEmpty, stat.NumChildren)
	}
	err = r.store.Delete(ctx, tenantPath(name), stat.Version)
	switch {
	case errors.Is(err, metadata.ErrNotEmpty):
		return fmt.Errorf("%s %w: it still has namespaces", tenantWhat(name), ErrNotEmpty)
	case errors.Is(err, metadata.ErrNotFound):
		return notFound(tenantWhat(name))
	case errors.Is(err, metadata.ErrBadVersion):
		return fmt.Errorf("delete %s: %w (changed meanwhile)", tenantWhat(name), ErrConflict)
	case err != nil:
		return fmt.Errorf("delete %s: %w", tenantWhat(name), err)
	}
	r.deleteIfEmpty(ctx, partitionedRoot+"/"+name)
	return nil
}

func (t *TenantInfo) canonicalize() {
	t.AdminRoles = sortedSet(t.AdminRoles)
	t.AllowedClusters = sortedSet(t.AllowedClusters)
}

// checkAllowedClusters is Pulsar's validateClusters: at least one, none
// blank, each existing ("global" excepted).
func (r *Resources) checkAllowedClusters(ctx context.Context, clusters []string) error {
	if len(clusters) == 0 || slices.ContainsFunc(clusters, func(c string) bool { return strings.TrimSpace(c) == "" }) {
		return kindf(ErrPrecondition, "allowedClusters: clusters can not be empty")
	}
	known, err := r.ListClusters(ctx)
	if err != nil {
		return err
	}
	var missing []string
	for i, c := range clusters {
		if err := ValidateName(fmt.Sprintf("allowedClusters[%d]", i), c); err != nil {
			return err
		}
		if c != GlobalCluster && !slices.Contains(known, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return kindf(ErrPrecondition, "allowedClusters: clusters %v do not exist", missing)
	}
	return nil
}

// checkClustersUnused fails if a cluster dropped from a tenant's allowed
// clusters is still replicated to by one of its namespaces.
func (r *Resources) checkClustersUnused(ctx context.Context, tenant string, before, after []string) error {
	var removed []string
	for _, c := range before {
		if !slices.Contains(after, c) {
			removed = append(removed, c)
		}
	}
	if len(removed) == 0 {
		return nil
	}
	user, err := r.tenantNamespaceReplicatingTo(ctx, tenant, removed)
	if err != nil {
		return err
	}
	if user != "" {
		return kindf(ErrPrecondition, "allowedClusters: namespace %s still replicates to a cluster among %v", user, removed)
	}
	return nil
}
