package main

// magnetar initialize-cluster-metadata: records a cluster in the
// configuration store, with the tenant and namespace Pulsar creates
// (public, public/default), once before its first broker starts.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

func runInitCluster(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("magnetar initialize-cluster-metadata", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cluster := fs.String("cluster", "", "cluster name (required)")
	metadataURL := fs.String("metadata-store", "", "the cluster's metadata store, e.g. zk:zk1:2181/pulsar (required)")
	configURL := fs.String("configuration-metadata-store", "", "the configuration store (default: the metadata store)")
	webURL := fs.String("web-service-url", "", "the cluster's HTTP service URL, e.g. http://broker1:8080 (required)")
	brokerURL := fs.String("broker-service-url", "", "the cluster's binary service URL, e.g. pulsar://broker1:6650 (required)")
	webURLTLS := fs.String("web-service-url-tls", "", "the cluster's HTTPS service URL, e.g. https://broker1:8443")
	brokerURLTLS := fs.String("broker-service-url-tls", "", "the cluster's TLS binary service URL, e.g. pulsar+ssl://broker1:6651")
	coordinators := fs.Int("initial-num-transaction-coordinators", 16, "transaction coordinators (partitions of pulsar/system/transaction_coordinator_assign), recorded unless the instance has them")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cluster == "" || *metadataURL == "" || *webURL == "" || *brokerURL == "" {
		fmt.Fprintln(stderr, "magnetar initialize-cluster-metadata: --cluster, --metadata-store, --web-service-url and --broker-service-url are required")
		return 2
	}
	if *configURL == "" {
		*configURL = *metadataURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	store, err := metadata.Open(ctx, *configURL, metadata.Options{Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "magnetar initialize-cluster-metadata: configuration store %s: %v\n", *configURL, err)
		return 1
	}
	defer store.Close()
	if err := initClusterMetadata(ctx, store, *cluster, resources.ClusterData{ServiceURL: *webURL, BrokerServiceURL: *brokerURL,
		ServiceURLTLS: *webURLTLS, BrokerServiceURLTLS: *brokerURLTLS}, *coordinators); err != nil {
		fmt.Fprintf(stderr, "magnetar initialize-cluster-metadata: %v\n", err)
		return 1
	}
	if *metadataURL != *configURL {
		// Nothing is stored there before the first broker and bookie
		// start, but a wrong address should fail here, not at their start.
		if err := checkStore(ctx, *metadataURL, log); err != nil {
			fmt.Fprintf(stderr, "magnetar initialize-cluster-metadata: metadata store %s: %v\n", *metadataURL, err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "cluster %s initialised in %s\n", *cluster, *configURL)
	return 0
}

// checkStore opens the store at url and reads its root.
func checkStore(ctx context.Context, url string, log *slog.Logger) error {
	store, err := metadata.Open(ctx, url, metadata.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.Children(ctx, "/"); err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return err
	}
	return nil
}

// initClusterMetadata creates the cluster, tenant public and namespace
// public/default (with its bundles), tenant pulsar, namespace pulsar/system
// and the transaction coordinators' assign topic (coordinators
// partitions) unless they exist, as Pulsar's
// PulsarClusterMetadataSetup does: a cluster joining an instance whose
// configuration store already has them is added to public's allowed
// clusters and to public/default's replication clusters, and nothing
// else is changed. Running it twice changes nothing.
func initClusterMetadata(ctx context.Context, store metadata.Store, cluster string, data resources.ClusterData, coordinators int) error {
	res, err := resources.New(ctx, store, resources.Options{})
	if err != nil {
		return fmt.Errorf("initialise metadata: %w", err)
	}
	defer res.Close()
	steps := []initStep{
		{"cluster " + cluster, func() error {
			return ignoreExists(res.CreateCluster(ctx, cluster, data))
		}},
		{"tenant public", func() error { return joinTenant(ctx, res, "public", cluster) }},
		{"namespace public/default", func() error { return joinNamespace(ctx, res, "public", "default", cluster) }},
		{"tenant pulsar", func() error { return joinTenant(ctx, res, "pulsar", cluster) }},
		{"namespace pulsar/system", func() error { return joinNamespace(ctx, res, "pulsar", "system", cluster) }},
		{"transaction coordinators", func() error {
			if coordinators <= 0 {
				return nil
			}
			return ignoreExists(res.CreatePartitionedTopic(ctx, resources.TopicName{Domain: "persistent", Tenant: "pulsar",
				Namespace: "system", Local: "transaction_coordinator_assign"}, resources.PartitionedTopicMetadata{Partitions: coordinators}))
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("initialise metadata: %s: %w", s.what, err)
		}
	}
	return nil
}

type initStep struct {
	what string
	do   func() error
}

// joinTenant creates the tenant allowing cluster, or adds cluster to its
// allowed clusters (nothing else of it changes).
func joinTenant(ctx context.Context, res *resources.Resources, tenant, cluster string) error {
	err := res.CreateTenant(ctx, tenant, resources.TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{cluster}})
	if !errors.Is(err, resources.ErrExists) {
		return err
	}
	_, err = res.UpdateTenant(ctx, tenant, func(t *resources.TenantInfo) error {
		t.AllowedClusters = appendMissing(t.AllowedClusters, cluster)
		return nil
	})
	return err
}

// joinNamespace creates the namespace replicated to cluster, or adds
// cluster to its replication clusters (nothing else of it changes).
func joinNamespace(ctx context.Context, res *resources.Resources, tenant, ns, cluster string) error {
	p := resources.NewPolicies()
	p.ReplicationClusters = []string{cluster}
	_, err := res.CreateNamespace(ctx, tenant, ns, p)
	if !errors.Is(err, resources.ErrExists) {
		return err
	}
	_, err = res.UpdateNamespace(ctx, tenant, ns, func(p *resources.Policies) error {
		p.ReplicationClusters = appendMissing(p.ReplicationClusters, cluster)
		return nil
	})
	return err
}

func ignoreExists(err error) error {
	if errors.Is(err, resources.ErrExists) {
		return nil
	}
	return err
}

// appendMissing is list with v at the end unless it holds v already.
func appendMissing(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}
