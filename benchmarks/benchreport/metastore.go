package main

// The metadata section (etcd issue): "Metadata operations per second and
// latency percentiles (create, CAS put, get, children) for local,
// ZooKeeper and etcd in one run; topic load time with 1,000 topics on
// each." ZooKeeper and etcd are single real servers started by
// scripts/zookeeper.sh and scripts/etcd.sh (zktest, etcdtest). The
// operations run here, in this process, through metadata.Open, a fixed
// number of goroutines at once; then a durable standalone runs with the
// backend as its metadata store (local: its default) and a Go client
// creates a producer on each of the topics, closes them, unloads the
// namespace and times how long producers on all of them take again.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/etcdtest"
	"github.com/magnetar-io/magnetar/metadata/zktest"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

const (
	metaConcurrency = 16  // goroutines issuing metadata operations at once
	metaValueBytes  = 128 // each node's value
	metaParents     = 100 // nodes are spread over this many parents, which children lists
	topicWorkers    = 32  // producers created at once in the topic load
)

// metaOpKinds are the measured operations, in the order they run.
var metaOpKinds = []string{"create", "cas-put", "get", "children"}

// runMetadata measures each backend in turn; one that fails is noted in
// its row and the others still run.
func (r *runner) runMetadata(ctx context.Context) error {
	d := &r.res.Metadata
	dir := filepath.Join(r.o.work, "metadata")
	d.Ran, d.Concurrency, d.ValueBytes = true, metaConcurrency, metaValueBytes
	for _, name := range []string{"local", "zookeeper", "etcd"} {
		b := MetaBackend{Name: name}
		if err := r.metaBackend(ctx, filepath.Join(dir, name), &b); err != nil {
			b.Skipped = err.Error()
			fmt.Fprintf(os.Stderr, "== metadata %s: %v\n", name, err)
		}
		d.Backends = append(d.Backends, b)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// metaBackend starts the backend's server (none for local), measures the
// operations and the topic load on it, and stops the server.
func (r *runner) metaBackend(ctx context.Context, dir string, b *MetaBackend) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var opsURL, brokerURL string
	switch b.Name {
	case "local":
		opsURL = "local:" + filepath.Join(dir, "ops")
	case "zookeeper":
		zk, err := zktest.Start(filepath.Join(dir, "server"), 1)
		if err != nil {
			return fmt.Errorf("zookeeper (scripts/zookeeper.sh install): %w", err)
		}
		defer zk.Stop()
		opsURL, brokerURL = zk.Connection+"/bench-ops", zk.Connection+"/bench-broker"
	case "etcd":
		etcd, err := etcdtest.Start(filepath.Join(dir, "server"), 1, "")
		if err != nil {
			return fmt.Errorf("etcd (scripts/etcd.sh install): %w", err)
		}
		defer etcd.Stop()
		opsURL, brokerURL = etcd.Connection+"/bench-ops", etcd.Connection+"/bench-broker"
	}
	b.URL = opsURL
	ops, err := metaOps(ctx, opsURL, r.o.metaOps)
	b.Ops = ops
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "== metadata %s: %s\n", b.Name, metaOpsLine(ops))
	b.Topics = r.o.metaTopics
	if err := r.topicLoad(ctx, dir, brokerURL, b); err != nil {
		b.TopicsSkipped = err.Error()
		fmt.Fprintf(os.Stderr, "== metadata %s topic load: %v\n", b.Name, err)
	}
	return nil
}

func metaOpsLine(ops []MetaOp) string {
	var parts []string
	for _, o := range ops {
		parts = append(parts, fmt.Sprintf("%s %.0f/s p99 %s", o.Op, o.PerSec, us(o.Latency.P99)))
	}
	return strings.Join(parts, ", ")
}

// metaOps opens url and runs n operations of each kind on fresh nodes.
func metaOps(ctx context.Context, url string, n int) ([]MetaOp, error) {
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	store, err := metadata.Open(octx, url, metadata.Options{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	defer store.Close()
	value := make([]byte, metaValueBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	root := fmt.Sprintf("/bench-%d", time.Now().UnixNano())
	parent := func(k int) string { return fmt.Sprintf("%s/p%03d", root, k%metaParents) }
	node := func(k int) string { return fmt.Sprintf("%s/n%08d", parent(k), k) }
	for k := range metaParents {
		if _, _, err := store.Create(ctx, parent(k), nil, metadata.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create %s: %w", parent(k), err)
		}
	}
	kinds := map[string]func(ctx context.Context, k int) error{
		"create": func(ctx context.Context, k int) error {
			_, _, err := store.Create(ctx, node(k), value, metadata.CreateOptions{})
			return err
		},
		// A compare-and-set on the version create left (0).
		"cas-put": func(ctx context.Context, k int) error {
			_, err := store.Put(ctx, node(k), value, 0)
			return err
		},
		"get": func(ctx context.Context, k int) error {
			_, _, err := store.Get(ctx, node(k))
			return err
		},
		"children": func(ctx context.Context, k int) error {
			_, err := store.Children(ctx, parent(k))
			return err
		},
	}
	var out []MetaOp
	for _, kind := range metaOpKinds {
		op, firstErr := metaPhase(ctx, kind, n, kinds[kind])
		out = append(out, op)
		if op.Errors == op.Count {
			return out, fmt.Errorf("%s: every operation failed: %w", kind, firstErr)
		}
	}
	return out, nil
}

// metaPhase runs do for k = 0..n-1 on metaConcurrency goroutines and
// returns the rate and latencies, with the first error.
func metaPhase(ctx context.Context, kind string, n int, do func(context.Context, int) error) (MetaOp, error) {
	var next, errs atomic.Int64
	var firstErr atomic.Value
	tallies := make([]*perfkit.Tally, metaConcurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range metaConcurrency {
		tallies[g] = perfkit.NewTally()
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= n || ctx.Err() != nil {
					return
				}
				octx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				err := do(octx, k)
				tallies[g].Record(time.Since(t0))
				cancel()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	h, count := perfkit.Merge(tallies)
	op := MetaOp{Op: kind, Count: count, Errors: errs.Load(), PerSec: float64(count) / elapsed.Seconds(), Latency: perfkit.LatencyOf(h)}
	err, _ := firstErr.Load().(error)
	return op, err
}

// topicLoad runs a durable standalone on metadataURL ("" for its default
// local store) and times producers on b.Topics new topics, then on the
// same topics again after unloading their namespace.
func (r *runner) topicLoad(ctx context.Context, dir, metadataURL string, b *MetaBackend) error {
	var extra []string
	if metadataURL != "" {
		extra = []string{"--metadata-store", metadataURL}
	}
	t, err := r.startStandalone(filepath.Join(dir, "broker"), extra...)
	if err != nil {
		return err
	}
	defer t.servers[0].stop()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: t.service, Logger: plog.DefaultNopLogger(),
		OperationTimeout: 2 * time.Minute, MaxConnectionsPerBroker: 4})
	if err != nil {
		return err
	}
	defer client.Close()
	topics := make([]string, b.Topics)
	for i := range topics {
		topics[i] = fmt.Sprintf("persistent://public/default/load-%s-%d", b.Name, i)
	}
	created, err := openProducers(ctx, client, topics)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	b.CreateSeconds = created.Seconds()
	if err := httpSend(ctx, "PUT", t.admin+"/admin/v2/namespaces/public/default/unload", ""); err != nil {
		return err
	}
	reloaded, err := openProducers(ctx, client, topics)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	b.ReloadSeconds = reloaded.Seconds()
	fmt.Fprintf(os.Stderr, "== metadata %s: %d topics created in %.2f s, loaded again after unload in %.2f s\n",
		b.Name, b.Topics, b.CreateSeconds, b.ReloadSeconds)
	return nil
}

// openProducers creates a producer on each topic, topicWorkers at once,
// and closes them all; it returns how long until the last was created.
func openProducers(ctx context.Context, client pulsar.Client, topics []string) (time.Duration, error) {
	producers := make([]pulsar.Producer, len(topics))
	defer func() {
		for _, p := range producers {
			if p != nil {
				p.Close()
			}
		}
	}()
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range topicWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(topics) || ctx.Err() != nil {
					return
				}
				p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topics[i]})
				if err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("%s: %w", topics[i], err))
					continue
				}
				producers[i] = p
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return elapsed, err
	}
	return elapsed, ctx.Err()
}

// writeMetadata is the metadata section of the report.
func writeMetadata(w io.Writer, res *Results) {
	d := res.Metadata
	if !d.Ran {
		skippedSection(w, "Metadata backends", d.Skipped)
		return
	}
	fmt.Fprintf(w, "## Metadata backends: local, ZooKeeper, etcd\n\n"+
		"Operations through metadata.Open from this process, %d at once, %d-byte values, nodes spread over %d parents "+
		"(children lists one parent); ZooKeeper and etcd are one real server each on this machine. "+
		"cas-put is a put with the expected version.\n\n"+
		"| backend | operation | ops | ops/s | p50 | p99 | p99.9 | max | errors |\n|---|---|---|---|---|---|---|---|---|\n",
		d.Concurrency, d.ValueBytes, metaParents)
	for _, b := range d.Backends {
		if len(b.Ops) == 0 {
			fmt.Fprintf(w, "| %s | - | - | - | - | - | - | - | not measured: %s |\n", b.Name, oneLine(b.Skipped))
		}
		for _, o := range b.Ops {
			fmt.Fprintf(w, "| %s | %s | %d | %.0f | %s | %s | %s | %s | %d |\n", b.Name, o.Op, o.Count, o.PerSec,
				us(o.Latency.P50), us(o.Latency.P99), us(o.Latency.P999), us(o.Latency.Max), o.Errors)
		}
	}
	fmt.Fprintf(w, "\nTopic load time: a durable standalone with the backend as its metadata store; a Go client creates a "+
		"producer on each topic (%d at once), closes them, unloads the namespace, and creates them again.\n\n"+
		"| backend | topics | first load (new topics) | topics/s | load after unload | topics/s |\n|---|---|---|---|---|---|\n", topicWorkers)
	for _, b := range d.Backends {
		switch {
		case b.TopicsSkipped != "":
			fmt.Fprintf(w, "| %s | %d | not measured: %s | | | |\n", b.Name, b.Topics, oneLine(b.TopicsSkipped))
		case b.ReloadSeconds > 0:
			fmt.Fprintf(w, "| %s | %d | %.2f s | %.0f | %.2f s | %.0f |\n", b.Name, b.Topics, b.CreateSeconds,
				float64(b.Topics)/b.CreateSeconds, b.ReloadSeconds, float64(b.Topics)/b.ReloadSeconds)
		}
	}
	fmt.Fprintln(w)
}

// oneLine keeps a message on one table row.
func oneLine(s string) string {
	return truncate(strings.NewReplacer("\n", " ", "|", "/").Replace(s), 300)
}
