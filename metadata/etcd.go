package metadata

// The etcd backend (etcd:http://h1:2379,h2:2379/prefix), on the official
// client go.etcd.io/etcd/client/v3.
//
// Key layout (the on-disk format; frozen). Every key starts with the
// prefix from the connection string ("" when none, else "/prefix"):
//
//	{prefix}/n/{depth}{path}   node: its value, as given (no header)
//	{prefix}/t{path}           watch marker: empty, written with every change of the node
//	{prefix}/s{path}           sequence counter of the node's sequential children (decimal)
//
//	path /admin/clusters/c1 -> /n/3/admin/clusters/c1 and /t/admin/clusters/c1
//	path /                  -> /n/0/ (absent until a value is put there) and /t/
//
// Depth is the number of segments, in decimal. The children of /a/b (depth
// 2) are the keys with prefix {prefix}/n/3/a/b/: one prefix range that holds
// no grandchild, so Children reads exactly the direct children. A subtree
// is not one range in that layout, so every change also writes the node's
// marker under {prefix}/t, where a subtree is the range
// [{prefix}/t{path}, {prefix}/t{path}0): the watch range. Siblings whose
// name extends the watched one with a byte below '0' ('-', '.', ...) fall in
// it too and are filtered out on the client.
//
// Mapping:
//   - Version is etcd's per-key version minus one (0 for a new node, +1 per
//     value change, reset by delete); compare-and-set compares it inside the
//     transaction that writes, so it is atomic on the server.
//   - Every operation is one etcd transaction: parents created with the
//     node, guarded by create-revision comparisons of each ancestor read;
//     deletion guarded by "no key in the children range".
//   - Ephemeral nodes are written with the session's lease (both keys), kept
//     alive by this store; changes keep the lease (IgnoreLease).
//   - Sequential suffixes come from the parent's counter key, incremented in
//     the creating transaction; deleting the parent deletes its counter.
//   - etcd keeps no timestamps: Stat.Created and Modified are zero.
//   - Reads are linearizable (etcd's default), so the store is no Syncer.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// EtcdOptions tune the etcd backend. Zero values take Pulsar's defaults.
type EtcdOptions struct {
	// SessionTimeout is the TTL of the session's lease
	// (metadataStoreSessionTimeoutMillis; default 30 s, at least 2 s).
	SessionTimeout time.Duration
	// OperationTimeout bounds every operation whose context has no earlier
	// deadline (metadataStoreOperationTimeoutSeconds; default 30 s).
	OperationTimeout time.Duration
	// TLS, when set, is used for every connection (client certificates,
	// the CA); https:// endpoints without it use the system roots.
	TLS *tls.Config
	// Username and Password authenticate to an etcd with auth enabled.
	Username, Password string
	// Dial opens connections to servers; tests inject network faults here.
	Dial func(ctx context.Context, address string) (net.Conn, error)
	// Logger receives one line per event an operator would act on.
	Logger *slog.Logger
}

func (o EtcdOptions) withDefaults() EtcdOptions {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Second
	}
	o.SessionTimeout = max(o.SessionTimeout, 2*time.Second)
	if o.OperationTimeout <= 0 {
		o.OperationTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// etcdStore is one etcd session: a client and a lease.
//
// Lock rules: mu guards the session flags, ended and watchers; nothing
// blocks under it.
type etcdStore struct {
	cli     *clientv3.Client
	prefix  string // "" or "/a/b"
	hosts   string
	opts    EtcdOptions
	log     *slog.Logger
	lease   clientv3.LeaseID
	session *sessionHub
	closing chan struct{}
	done    chan struct{} // closed when the keepalive loop returns
	once    sync.Once

	pauseKeepAlive chan bool // tests: stop sending keepalives

	mu        sync.Mutex
	suspended bool
	ended     error // ErrClosed or ErrSessionLost once the store is over
	watchers  map[*Watcher]context.CancelFunc
}

// OpenEtcd connects to etcd, grants the session's lease (bounded by ctx)
// and starts keeping it alive.
func OpenEtcd(ctx context.Context, t Target, opts EtcdOptions) (Store, error) {
	if t.Scheme != "etcd" || len(t.Hosts) == 0 {
		return nil, fmt.Errorf("metadata: OpenEtcd needs an etcd: target, got %+v", t)
	}
	opts = opts.withDefaults()
	if err := t.etcdSecurity(&opts); err != nil {
		return nil, err
	}
	hosts := strings.Join(t.Hosts, ",")
	cfg := clientv3.Config{Endpoints: t.Hosts, DialTimeout: opts.OperationTimeout, TLS: opts.TLS,
		Username: opts.Username, Password: opts.Password, Logger: zap.NewNop(),
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		AutoSyncInterval: 0, RejectOldCluster: false, Context: context.Background()}
	if opts.Dial != nil {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(opts.Dial))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata store etcd:%s: %w", hosts, err)
	}
	s := &etcdStore{cli: cli, prefix: t.Chroot, hosts: hosts, opts: opts,
		log: opts.Logger.With("metadata_store", "etcd:"+hosts+t.Chroot), session: newSessionHub(),
		closing: make(chan struct{}), done: make(chan struct{}), pauseKeepAlive: make(chan bool, 1),
		watchers: map[*Watcher]context.CancelFunc{}}
	ttl := int64((opts.SessionTimeout + time.Second - 1) / time.Second)
	gctx, cancel := context.WithTimeout(ctx, opts.OperationTimeout)
	defer cancel()
	// A read first: etcd grants leases to anyone, so this is what tells
	// missing credentials or permissions at open.
	if _, err := cli.Get(gctx, s.markerKey("/"), clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("metadata store etcd:%s: cannot read %s: %w", hosts, s.markerKey("/"), err)
	}
	lease, err := cli.Grant(gctx, ttl)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("metadata store etcd:%s: no session (lease grant): %w", hosts, err)
	}
	s.lease = lease.ID
	s.log.Info("metadata: etcd session established", "lease", fmt.Sprintf("%#x", int64(lease.ID)), "ttl_s", lease.TTL)
	s.session.deliver(SessionConnected)
	go s.keepAlive(time.Duration(lease.TTL) * time.Second)
	return s, nil
}

// etcdSecurity fills TLS and credentials from the connection string's
// query parameters, unless the options already set them.
func (t Target) etcdSecurity(o *EtcdOptions) error {
	q := t.Params
	if o.Username == "" {
		o.Username = q["user"]
	}
	if o.Password == "" {
		o.Password = q["password"]
		if f := q["password-file"]; f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("metadata store etcd: password-file: %w", err)
			}
			o.Password = strings.TrimRight(string(b), "\r\n")
		}
	}
	if o.TLS != nil || (q["cacert"] == "" && q["cert"] == "" && q["key"] == "") {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := q["cacert"]; ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("metadata store etcd: cacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("metadata store etcd: cacert %s holds no PEM certificate", ca)
		}
	}
	if q["cert"] != "" || q["key"] != "" {
		if q["cert"] == "" || q["key"] == "" {
			return errors.New("metadata store etcd: cert and key go together")
		}
		pair, err := tls.LoadX509KeyPair(q["cert"], q["key"])
		if err != nil {
			return fmt.Errorf("metadata store etcd: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	o.TLS = cfg
	return nil
}

// keepAlive renews the lease every third of its TTL (at most every 2 s). A failed renewal is
// SessionSuspended, the next success SessionReconnected; the lease gone on
// the server, or no renewal for a whole TTL, is SessionLost: the store is
// then over, as a ZooKeeper store after expiry.
func (s *etcdStore) keepAlive(ttl time.Duration) {
	defer close(s.done)
	lastOK := time.Now()
	every := min(ttl/3, 2*time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	paused := false
	for {
		select {
		case <-s.closing:
			return
		case paused = <-s.pauseKeepAlive:
		case <-tick.C:
		}
		if time.Since(lastOK) >= ttl {
			s.lose("no lease renewal for a whole session timeout")
			return
		}
		if paused {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		resp, err := s.cli.KeepAliveOnce(ctx, s.lease)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			s.lose("the server expired the session's lease")
			return
		case err != nil:
			s.setSuspended(true, err)
		default:
			lastOK = time.Now()
			s.setSuspended(false, nil)
		}
	}
}

func (s *etcdStore) setSuspended(suspended bool, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil || s.suspended == suspended {
		return
	}
	s.suspended = suspended
	if suspended {
		s.log.Warn("metadata: cannot renew the etcd lease; session suspended", "err", cause)
		s.session.deliver(SessionSuspended)
		return
	}
	s.log.Info("metadata: etcd lease renewed again; same session")
	s.session.deliver(SessionReconnected)
}

// lose ends the store with ErrSessionLost. The lease is revoked in case
// the server still holds it, so its ephemerals go now.
func (s *etcdStore) lose(why string) {
	s.mu.Lock()
	if s.ended != nil {
		s.mu.Unlock()
		return
	}
	s.ended = ErrSessionLost
	s.log.Error("metadata: etcd session lost; its ephemeral nodes are gone and this store is closed", "reason", why)
	s.session.deliver(SessionLost)
	s.endWatchersLocked(ErrSessionLost)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, _ = s.cli.Revoke(ctx, s.lease)
	cancel()
}

func (s *etcdStore) endWatchersLocked(err error) {
	for w, cancel := range s.watchers {
		cancel()
		w.end(err)
	}
	s.watchers = map[*Watcher]context.CancelFunc{}
}

// Keys (see the layout above).

func depth(path string) int {
	if path == "/" {
		return 0
	}
	return strings.Count(path, "/")
}

func (s *etcdStore) nodeKey(path string) string {
	return s.prefix + "/n/" + strconv.Itoa(depth(path)) + path
}

// childrenPrefix is the range of path's direct children.
func (s *etcdStore) childrenPrefix(path string) string {
	if path == "/" {
		return s.prefix + "/n/1/"
	}
	return s.prefix + "/n/" + strconv.Itoa(depth(path)+1) + path + "/"
}

func (s *etcdStore) markerKey(path string) string { return s.prefix + "/t" + path }
func (s *etcdStore) seqKey(path string) string    { return s.prefix + "/s" + path }

// begin checks what every call checks and bounds ctx by the operation
// timeout.
func (s *etcdStore) begin(ctx context.Context, op, path string) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, opError(op, path, err)
	}
	if err := ValidatePath(path); err != nil {
		return nil, nil, opError(op, path, err)
	}
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended != nil {
		return nil, nil, opError(op, path, ended)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OperationTimeout)
	return ctx, cancel, nil
}

// mapError turns etcd client errors into the contract's.
func (s *etcdStore) mapError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended != nil {
		return opError(op, path, ended)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return opError(op, path, fmt.Errorf("no answer from etcd %s: %w", s.hosts, err))
	}
	return opError(op, path, fmt.Errorf("etcd %s: %w", s.hosts, err))
}

// stat builds a Stat from a node's key-value and its children count.
func etcdStat(kv *etcdKV, children int64) Stat {
	return Stat{Version: kv.Version - 1, CreateID: kv.CreateRevision, Ephemeral: kv.Lease != 0, NumChildren: int(children)}
}

type etcdKV struct {
	Version, CreateRevision, ModRevision, Lease int64
	Value                                       []byte
}

// readNode reads a node and counts its children in one revision. The
// root exists even when no key holds it.
func (s *etcdStore) readNode(ctx context.Context, path string) (*etcdKV, int64, error) {
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.nodeKey(path)),
		clientv3.OpGet(s.childrenPrefix(path), clientv3.WithPrefix(), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return nil, 0, err
	}
	node, kids := resp.Responses[0].GetResponseRange(), resp.Responses[1].GetResponseRange().Count
	if len(node.Kvs) == 0 {
		if path == "/" {
			return &etcdKV{Version: 1}, kids, nil
		}
		return nil, 0, ErrNotFound
	}
	kv := node.Kvs[0]
	return &etcdKV{Version: kv.Version, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Lease: kv.Lease, Value: kv.Value}, kids, nil
}

func (s *etcdStore) Get(ctx context.Context, path string) ([]byte, Stat, error) {
	ctx, cancel, err := s.begin(ctx, "get", path)
	if err != nil {
		return nil, Stat{}, err
	}
	defer cancel()
	kv, kids, err := s.readNode(ctx, path)
	if errors.Is(err, ErrNotFound) {
		return nil, Stat{}, opError("get", path, err)
	}
	if err != nil {
		return nil, Stat{}, s.mapError("get", path, err)
	}
	return kv.Value, etcdStat(kv, kids), nil
}

func (s *etcdStore) Exists(ctx context.Context, path string) (bool, Stat, error) {
	ctx, cancel, err := s.begin(ctx, "exists", path)
	if err != nil {
		return false, Stat{}, err
	}
	defer cancel()
	kv, kids, err := s.readNode(ctx, path)
	if errors.Is(err, ErrNotFound) {
		return false, Stat{}, nil
	}
	if err != nil {
		return false, Stat{}, s.mapError("exists", path, err)
	}
	return true, etcdStat(kv, kids), nil
}

func (s *etcdStore) Children(ctx context.Context, path string) ([]string, error) {
	ctx, cancel, err := s.begin(ctx, "children", path)
	if err != nil {
		return nil, err
	}
	defer cancel()
	prefix := s.childrenPrefix(path)
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.nodeKey(path), clientv3.WithKeysOnly()),
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, s.mapError("children", path, err)
	}
	if path != "/" && len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
		return nil, opError("children", path, ErrNotFound)
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	kids := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		kids = append(kids, string(kv.Key[len(prefix):]))
	}
	sort.Strings(kids)
	return kids, nil
}

func (s *etcdStore) Put(ctx context.Context, path string, value []byte, expectedVersion int64) (Stat, error) {
	if err := validateValue(path, value); err != nil {
		return Stat{}, opError("put", path, err)
	}
	if expectedVersion < AnyVersion {
		return Stat{}, opError("put", path, ErrBadVersion)
	}
	ctx, cancel, err := s.begin(ctx, "put", path)
	if err != nil {
		return Stat{}, err
	}
	defer cancel()
	for attempt := 0; attempt < 100; attempt++ {
		st, err := s.update(ctx, path, value, expectedVersion)
		if !errors.Is(err, ErrNotFound) || expectedVersion != AnyVersion {
			return st, s.wrap("put", path, err)
		}
		st, _, err = s.create(ctx, path, value, CreateOptions{})
		if !errors.Is(err, ErrExists) {
			return st, s.wrap("put", path, err)
		}
		// created by someone else meanwhile: set it
	}
	return Stat{}, opError("put", path, errors.New("too much contention on the node"))
}

// wrap maps err unless it already is one of the contract's sentinels.
func (s *etcdStore) wrap(op, path string, err error) error {
	for _, sentinel := range []error{ErrNotFound, ErrExists, ErrBadVersion, ErrNotEmpty, ErrEphemeralKids} {
		if errors.Is(err, sentinel) {
			return opError(op, path, sentinel)
		}
	}
	return s.mapError(op, path, err)
}

// update changes an existing node's value if its version matches,
// keeping its lease; ErrNotFound when it does not exist.
func (s *etcdStore) update(ctx context.Context, path string, value []byte, expected int64) (Stat, error) {
	key := s.nodeKey(path)
	cmp := clientv3.Compare(clientv3.Version(key), "=", expected+1)
	if expected == AnyVersion {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	}
	resp, err := s.cli.Txn(ctx).If(cmp).
		Then(clientv3.OpPut(key, string(value), clientv3.WithIgnoreLease()),
			clientv3.OpPut(s.markerKey(path), "", clientv3.WithIgnoreLease()),
			clientv3.OpGet(key, clientv3.WithKeysOnly()),
			clientv3.OpGet(s.childrenPrefix(path), clientv3.WithPrefix(), clientv3.WithCountOnly())).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return Stat{}, err
	}
	if !resp.Succeeded {
		if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
			return Stat{}, ErrNotFound
		}
		return Stat{}, ErrBadVersion
	}
	kv := resp.Responses[2].GetResponseRange().Kvs[0]
	return etcdStat(&etcdKV{Version: kv.Version, Lease: kv.Lease}, resp.Responses[3].GetResponseRange().Count), nil
}

func (s *etcdStore) Create(ctx context.Context, path string, value []byte, opts CreateOptions) (string, Stat, error) {
	if err := validateValue(path, value); err != nil {
		return "", Stat{}, opError("create", path, err)
	}
	if path == "/" {
		return "", Stat{}, opError("create", path, ErrExists)
	}
	ctx, cancel, err := s.begin(ctx, "create", path)
	if err != nil {
		return "", Stat{}, err
	}
	defer cancel()
	st, created, err := s.create(ctx, path, value, opts)
	if err != nil {
		return "", Stat{}, s.wrap("create", path, err)
	}
	return created, st, nil
}

// create makes path (with a sequential suffix if asked) and its missing
// ancestors in one transaction, guarded by what it read of them; it
// retries when an ancestor changed meanwhile.
func (s *etcdStore) create(ctx context.Context, path string, value []byte, opts CreateOptions) (Stat, string, error) {
	var ancestors []string
	for p := parentOf(path); p != "/"; p = parentOf(p) {
		ancestors = append([]string{p}, ancestors...)
	}
	parent := parentOf(path)
	for attempt := 0; attempt < 100; attempt++ {
		reads := make([]clientv3.Op, 0, len(ancestors)+1)
		for _, a := range ancestors {
			reads = append(reads, clientv3.OpGet(s.nodeKey(a), clientv3.WithKeysOnly()))
		}
		reads = append(reads, clientv3.OpGet(s.seqKey(parent)))
		resp, err := s.cli.Txn(ctx).Then(reads...).Commit()
		if err != nil {
			return Stat{}, "", err
		}
		var cmps []clientv3.Cmp
		var writes []clientv3.Op
		for i, a := range ancestors {
			kvs := resp.Responses[i].GetResponseRange().Kvs
			if len(kvs) == 0 {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.nodeKey(a)), "=", 0))
				writes = append(writes, clientv3.OpPut(s.nodeKey(a), ""), clientv3.OpPut(s.markerKey(a), ""))
				continue
			}
			if a == parent && kvs[0].Lease != 0 {
				return Stat{}, "", ErrEphemeralKids
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.nodeKey(a)), "=", kvs[0].CreateRevision))
		}
		name := path
		if opts.Sequential {
			seq := resp.Responses[len(ancestors)].GetResponseRange().Kvs
			var next int64
			var rev int64
			if len(seq) == 1 {
				next, _ = strconv.ParseInt(string(seq[0].Value), 10, 64)
				rev = seq[0].ModRevision
			}
			name = fmt.Sprintf("%s%010d", path, next)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.seqKey(parent)), "=", rev))
			writes = append(writes, clientv3.OpPut(s.seqKey(parent), strconv.FormatInt(next+1, 10)))
		}
		var lease []clientv3.OpOption
		if opts.Ephemeral {
			lease = append(lease, clientv3.WithLease(s.lease))
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.nodeKey(name)), "=", 0))
		writes = append(writes, clientv3.OpPut(s.nodeKey(name), string(value), lease...),
			clientv3.OpPut(s.markerKey(name), "", lease...))
		tx, err := s.cli.Txn(ctx).If(cmps...).Then(writes...).
			Else(clientv3.OpGet(s.nodeKey(name), clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return Stat{}, "", err
		}
		if tx.Succeeded {
			return Stat{Ephemeral: opts.Ephemeral}, name, nil
		}
		if len(tx.Responses[0].GetResponseRange().Kvs) > 0 && !opts.Sequential {
			return Stat{}, "", ErrExists
		}
	}
	return Stat{}, "", errors.New("too much contention on the parent nodes")
}

func (s *etcdStore) Delete(ctx context.Context, path string, expectedVersion int64) error {
	if path == "/" {
		return opError("delete", path, ErrInvalidPath)
	}
	if expectedVersion < AnyVersion {
		return opError("delete", path, ErrBadVersion)
	}
	ctx, cancel, err := s.begin(ctx, "delete", path)
	if err != nil {
		return err
	}
	defer cancel()
	key, kids := s.nodeKey(path), s.childrenPrefix(path)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(kids), "=", 0).WithPrefix()}
	if expectedVersion != AnyVersion {
		cmps = append(cmps, clientv3.Compare(clientv3.Version(key), "=", expectedVersion+1))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(s.markerKey(path)), clientv3.OpDelete(s.seqKey(path))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly()),
			clientv3.OpGet(kids, clientv3.WithPrefix(), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return s.mapError("delete", path, err)
	}
	if resp.Succeeded {
		return nil
	}
	node := resp.Responses[0].GetResponseRange().Kvs
	switch {
	case len(node) == 0:
		return opError("delete", path, ErrNotFound)
	case expectedVersion != AnyVersion && node[0].Version != expectedVersion+1:
		return opError("delete", path, ErrBadVersion)
	default:
		return opError("delete", path, ErrNotEmpty)
	}
}

func (s *etcdStore) SessionEvents() *SessionWatcher { return s.session.subscribe() }

// Close revokes the lease (etcd deletes the ephemeral nodes) and closes
// the client.
func (s *etcdStore) Close() error {
	s.mu.Lock()
	if s.ended == ErrClosed {
		s.mu.Unlock()
		return opError("close", "session", ErrClosed)
	}
	lost := s.ended != nil
	s.ended = ErrClosed
	s.endWatchersLocked(ErrClosed)
	s.session.end(ErrClosed)
	s.mu.Unlock()
	s.once.Do(func() { close(s.closing) })
	<-s.done
	var err error
	if !lost {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.OperationTimeout)
		_, err = s.cli.Revoke(ctx, s.lease)
		cancel()
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.log.Warn("metadata: revoking the etcd lease failed; its ephemeral nodes go when it expires", "err", err)
		}
	}
	s.cli.Close()
	return nil
}
