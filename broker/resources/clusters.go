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

// ClusterData is Pulsar's ClusterData, stored at /admin/clusters/<name>.
// Members not modelled here (key-store TLS settings and later additions)
// are kept in Extra.
type ClusterData struct {
	ServiceURL                     string   `json:"serviceUrl,omitempty"`
	ServiceURLTLS                  string   `json:"serviceUrlTls,omitempty"`
	BrokerServiceURL               string   `json:"brokerServiceUrl,omitempty"`
	BrokerServiceURLTLS            string   `json:"brokerServiceUrlTls,omitempty"`
	ProxyServiceURL                string   `json:"proxyServiceUrl,omitempty"`
	ProxyProtocol                  string   `json:"proxyProtocol,omitempty"`
	PeerClusterNames               []string `json:"peerClusterNames,omitempty"`
	AuthenticationPlugin           string   `json:"authenticationPlugin,omitempty"`
	AuthenticationParameters       string   `json:"authenticationParameters,omitempty"`
	BrokerClientTLSEnabled         bool     `json:"brokerClientTlsEnabled"`
	TLSAllowInsecureConnection     bool     `json:"tlsAllowInsecureConnection"`
	BrokerClientTrustCertsFilePath string   `json:"brokerClientTrustCertsFilePath,omitempty"`
	ListenerName                   string   `json:"listenerName,omitempty"`

	// Extra holds the members this type does not model, verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

type plainCluster ClusterData

// UnmarshalJSON keeps unknown members in Extra.
func (c *ClusterData) UnmarshalJSON(data []byte) error {
	var v plainCluster
	extra, err := decodeWithExtra(data, &v)
	if err != nil {
		return err
	}
	v.Extra = extra
	*c = ClusterData(v)
	return nil
}

// MarshalJSON writes the modelled and the Extra members.
func (c ClusterData) MarshalJSON() ([]byte, error) {
	return encodeWithExtra(plainCluster(c), c.Extra)
}

// Validate checks the URLs' schemes as Pulsar's checkPropertiesIfPresent
// (only those set) and the peer names.
func (c *ClusterData) Validate() error {
	urls := []struct {
		field, value, example string
		schemes               []string
	}{
		{"serviceUrl", c.ServiceURL, "http://pulsar.example.com:8080", []string{"http"}},
		{"serviceUrlTls", c.ServiceURLTLS, "https://pulsar.example.com:8443", []string{"https"}},
		{"brokerServiceUrl", c.BrokerServiceURL, "pulsar://pulsar.example.com:6650", []string{"pulsar"}},
		{"brokerServiceUrlTls", c.BrokerServiceURLTLS, "pulsar+ssl://pulsar.example.com:6651", []string{"pulsar+ssl"}},
		{"proxyServiceUrl", c.ProxyServiceURL, "pulsar+ssl://proxy.example.com:4443", []string{"pulsar", "pulsar+ssl"}},
	}
	for _, u := range urls {
		if err := checkURL(u.field, u.value, u.example, u.schemes); err != nil {
			return err
		}
	}
	if c.ProxyProtocol != "" && c.ProxyProtocol != "SNI" {
		return invalidf("proxyProtocol", "unknown protocol %q, want SNI", c.ProxyProtocol)
	}
	for i, p := range c.PeerClusterNames {
		if err := ValidateName(fmt.Sprintf("peerClusterNames[%d]", i), p); err != nil {
			return err
		}
	}
	return nil
}

// checkURL checks only the scheme and that something follows it: Pulsar
// allows several comma-separated hosts, which is no single URL.
func checkURL(field, value, example string, schemes []string) error {
	if value == "" {
		return nil
	}
	scheme, rest, ok := strings.Cut(value, "://")
	if !ok || rest == "" || !slices.Contains(schemes, scheme) || strings.ContainsAny(value, " \t\r\n") {
		return invalidf(field, "illegal URL %q, want e.g. %s", value, example)
	}
	return nil
}

func clusterPath(name string) string { return clustersRoot + "/" + name }

func clusterWhat(name string) string { return "cluster " + name }

// ListClusters returns the clusters' names, sorted, without "global".
func (r *Resources) ListClusters(ctx context.Context) ([]string, error) {
	names, err := children(ctx, r.store, clustersRoot)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(names, func(n string) bool { return n == GlobalCluster }), nil
}

// GetCluster returns a cluster's data.
func (r *Resources) GetCluster(ctx context.Context, name string) (ClusterData, error) {
	if err := ValidateName("cluster", name); err != nil {
		return ClusterData{}, err
	}
	c, _, err := getJSON[ClusterData](ctx, r.store, clusterPath(name), clusterWhat(name))
	return c, err
}

// ClusterExists reports whether a cluster exists.
func (r *Resources) ClusterExists(ctx context.Context, name string) (bool, error) {
	if err := ValidateName("cluster", name); err != nil {
		return false, err
	}
	return nodeExists(ctx, r.store, clusterPath(name), clusterWhat(name))
}

// CreateCluster records a new cluster (ErrExists if there is one).
func (r *Resources) CreateCluster(ctx context.Context, name string, c ClusterData) error {
	if err := ValidateName("cluster", name); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	return createJSON(ctx, r.store, clusterPath(name), clusterWhat(name), c)
}

// UpdateCluster applies mutate to a cluster's data and writes the result
// if it is valid (read-modify-write with compare-and-set).
func (r *Resources) UpdateCluster(ctx context.Context, name string, mutate func(*ClusterData) error) (ClusterData, error) {
	if err := ValidateName("cluster", name); err != nil {
		return ClusterData{}, err
	}
	return updateJSON(ctx, r.store, clusterPath(name), clusterWhat(name), func(c *ClusterData) error {
		if err := mutate(c); err != nil {
			return err
		}
		return c.Validate()
	})
}

// SetPeerClusters replaces a cluster's peers; each must be another
// existing cluster (ErrPrecondition otherwise, as Pulsar's 412).
func (r *Resources) SetPeerClusters(ctx context.Context, name string, peers []string) (ClusterData, error) {
	for i, p := range peers {
		if err := ValidateName(fmt.Sprintf("peerClusterNames[%d]", i), p); err != nil {
			return ClusterData{}, err
		}
		if p == name {
			return ClusterData{}, kindf(ErrPrecondition, "peer cluster %s must be different from cluster %s", p, name)
		}
		ok, err := r.ClusterExists(ctx, p)
		if err != nil {
			return ClusterData{}, err
		}
		if !ok {
			return ClusterData{}, kindf(ErrPrecondition, "peer cluster %s does not exist", p)
		}
	}
	return r.UpdateCluster(ctx, name, func(c *ClusterData) error {
		c.PeerClusterNames = sortedSet(peers)
		return nil
	})
}

// DeleteCluster removes a cluster that no namespace replicates to
// (ErrPrecondition otherwise, as Pulsar's "Cluster not empty").
//
// The check and the delete are two steps: a namespace may start using the
// cluster in between, as in Pulsar. The store has no multi-node
// transactions to close that window.
func (r *Resources) DeleteCluster(ctx context.Context, name string) error {
	if err := ValidateName("cluster", name); err != nil {
		return err
	}
	ok, stat, err := r.store.Exists(ctx, clusterPath(name))
	if err != nil {
		return fmt.Errorf("read %s: %w", clusterWhat(name), err)
	}
	if !ok {
		return notFound(clusterWhat(name))
	}
	if user, err := r.namespaceReplicatingTo(ctx, name); err != nil {
		return err
	} else if user != "" {
		return kindf(ErrPrecondition, "cluster %s is not empty: namespace %s replicates to it", name, user)
	}
	err = r.store.Delete(ctx, clusterPath(name), stat.Version)
	switch {
	case errors.Is(err, metadata.ErrNotEmpty):
		return kindf(ErrPrecondition, "cluster %s is not empty: it has failure domains or isolation policies", name)
	case errors.Is(err, metadata.ErrNotFound):
		return notFound(clusterWhat(name))
	case errors.Is(err, metadata.ErrBadVersion):
		return fmt.Errorf("delete %s: %w (changed meanwhile)", clusterWhat(name), ErrConflict)
	case err != nil:
		return fmt.Errorf("delete %s: %w", clusterWhat(name), err)
	}
	return nil
}

// namespaceReplicatingTo returns a namespace ("tenant/ns") whose
// replication clusters include cluster, or "".
func (r *Resources) namespaceReplicatingTo(ctx context.Context, cluster string) (string, error) {
	tenants, err := r.ListTenants(ctx)
	if err != nil {
		return "", err
	}
	for _, t := range tenants {
		user, err := r.tenantNamespaceReplicatingTo(ctx, t, []string{cluster})
		if err != nil || user != "" {
			return user, err
		}
	}
	return "", nil
}

// tenantNamespaceReplicatingTo returns a namespace of tenant that
// replicates to any of clusters, or "".
func (r *Resources) tenantNamespaceReplicatingTo(ctx context.Context, tenant string, clusters []string) (string, error) {
	namespaces, err := children(ctx, r.store, tenantPath(tenant))
	if err != nil {
		return "", err
	}
	for _, ns := range namespaces {
		p, err := r.GetNamespace(ctx, tenant, ns)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
			continue // deleted meanwhile, or not a v2 namespace node
		}
		if err != nil {
			return "", err
		}
		for _, c := range clusters {
			if slices.Contains(p.ReplicationClusters, c) {
				return tenant + "/" + ns, nil
			}
		}
	}
	return "", nil
}
