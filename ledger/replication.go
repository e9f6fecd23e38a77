package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// ReplicationConfig configures a ReplicationWorker. Zero values take the
// defaults; names in parentheses are BookKeeper settings.
type ReplicationConfig struct {
	// Name identifies the worker in its lock nodes and logs (default
	// "replication-worker"; a bookie passes its id).
	Name string
	// OpenLedgerGracePeriod (openLedgerRereplicationGracePeriod; default
	// 30 s): how long the last fragment of an open ledger may keep a lost
	// bookie, with the ledger's metadata unchanged, before the worker
	// recovers the ledger (fencing its writer) to replicate it. A writer
	// that is writing replaces a failed bookie itself within its add
	// timeout, which changes the metadata; one that is idle or dead does
	// not.
	OpenLedgerGracePeriod time.Duration
	// PollInterval: marks are listed this often besides when they change,
	// and a ledger that failed is retried after it, doubling per failure
	// up to MaxRetryDelay (rwRereplicateBackoffMs; default 5 s).
	PollInterval time.Duration
	// MaxRetryDelay caps the retry delay of a failing ledger (default 5 min).
	MaxRetryDelay time.Duration
}

func (c ReplicationConfig) withDefaults() ReplicationConfig {
	if c.Name == "" {
		c.Name = "replication-worker"
	}
	if c.OpenLedgerGracePeriod <= 0 {
		c.OpenLedgerGracePeriod = 30 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.MaxRetryDelay <= 0 {
		c.MaxRetryDelay = 5 * time.Minute
	}
	return c
}

// Bounds on the work one worker does at once.
const (
	// copyWindow: entries of one fragment read and written concurrently.
	copyWindow = 16
	// maxDeferred: open ledgers one worker waits on (each holds its lock).
	maxDeferred = 64
	// maxTargets: replacement bookies tried for one lost replica in one
	// attempt before the ledger backs off.
	maxTargets = 3
	// maxReplicationSteps bounds one pass over one ledger: each step
	// replaces one lost replica or finds that another worker did.
	maxReplicationSteps = 10000
	// maxMetadataMoves bounds the copies one pass may redo because the
	// metadata changed under them.
	maxMetadataMoves = 16
)

// ReplicationWorker copies the replicas that marked ledgers had on lost
// bookies to other bookies (BookKeeper's ReplicationWorker). Every bookie
// runs one; a per-ledger lock keeps two from working on one ledger, and
// every metadata change is a compare-and-set, so even two workers that
// both think they hold the lock (a session lost mid-copy) cannot leave
// metadata naming a bookie that lacks the entries.
//
// Lock rules: mu guards the fields under it; nothing blocks under it.
type ReplicationWorker struct {
	c     *Client
	store metadata.Store
	cfg   ReplicationConfig
	log   *slog.Logger
	kick  chan struct{} // a deferred ledger was released: look again
	hooks replicationHooks

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
	deferWG             sync.WaitGroup

	mu struct {
		sync.Mutex
		rng      *rand.Rand
		retry    map[int64]retryState // ledgers that failed, by id
		deferred map[int64]bool       // open ledgers waiting out the grace period
	}
}

// replicationHooks let tests observe and slow down a worker.
type replicationHooks struct {
	// beforeCopy runs once the worker holds a ledger's lock and chose a
	// target for one lost replica, before it copies anything.
	beforeCopy func(ledgerID int64, lost, target string)
}

type retryState struct {
	failures  int
	notBefore time.Time
}

// NewReplicationWorker returns a worker that uses c (its metadata session,
// for the ephemeral locks, and its bookies). Start runs it.
func NewReplicationWorker(c *Client, cfg ReplicationConfig) *ReplicationWorker {
	w := &ReplicationWorker{c: c, store: c.cfg.Store, cfg: cfg.withDefaults(), log: c.log, kick: make(chan struct{}, 1), done: make(chan struct{})}
	seed := uint64(time.Now().UnixNano())
	w.mu.rng = rand.New(rand.NewPCG(seed, seed>>7|1))
	w.mu.retry = map[int64]retryState{}
	w.mu.deferred = map[int64]bool{}
	return w
}

// Start runs the worker until Stop.
func (w *ReplicationWorker) Start() {
	w.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel = cancel
		go w.run(ctx)
	})
}

// Stop ends the worker and waits for it; the locks it held are released.
func (w *ReplicationWorker) Stop() {
	w.stopOnce.Do(func() {
		w.startOnce.Do(func() {}) // a Start after Stop does nothing
		if w.cancel == nil {
			close(w.done)
			return
		}
		w.cancel()
		<-w.done
		w.deferWG.Wait()
	})
}

func (w *ReplicationWorker) run(ctx context.Context) {
	defer close(w.done)
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	var watch *metadata.Watcher
	defer func() {
		if watch != nil {
			watch.Close()
		}
	}()
	for {
		if watch == nil {
			// Without a watch the worker still polls; it tries again next time.
			watch, _ = w.store.Watch(ctx, UnderreplicatedPath)
		}
		w.pass(ctx)
		var events <-chan metadata.Event
		if watch != nil {
			events = watch.Events()
		}
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-poll.C:
		case _, ok := <-events:
			if !ok {
				watch.Close()
				watch = nil
			}
			drain(events) // one pass covers every change so far
		}
	}
}

func drain(events <-chan metadata.Event) {
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// pass tries every marked ledger once, in random order so that workers
// on several bookies spread over different ledgers.
func (w *ReplicationWorker) pass(ctx context.Context) {
	ids, err := ListUnderreplicated(ctx, w.store)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("replication worker cannot list under-replicated ledgers", "worker", w.cfg.Name, "err", err)
		}
		return
	}
	isMarked := make(map[int64]bool, len(ids))
	for _, id := range ids {
		isMarked[id] = true
	}
	w.mu.Lock()
	w.mu.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for id := range w.mu.retry { // forget ledgers no longer marked
		if !isMarked[id] {
			delete(w.mu.retry, id)
		}
	}
	w.mu.Unlock()
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if !w.due(id) {
			continue
		}
		locked, err := tryLock(ctx, w.store, id, w.cfg.Name)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("replication worker cannot take a ledger lock", "worker", w.cfg.Name, "ledger", id, "err", err)
			}
			return
		}
		if !locked {
			continue // another worker has it
		}
		w.handle(ctx, id)
	}
}

// handle replicates one locked ledger and releases the lock, unless the
// ledger waits for its writer: then the lock stays held for the grace
// period, so that no other worker picks the ledger up meanwhile.
func (w *ReplicationWorker) handle(ctx context.Context, id int64) {
	wait, err := w.replicate(ctx, id)
	if err == nil && wait != nil {
		if w.startDeferral(ctx, id, wait.version) {
			return
		}
		err = fmt.Errorf("ledger %d waits for its writer, and %d other ledgers wait already", id, maxDeferred)
	}
	w.release(id)
	if err != nil {
		if ctx.Err() == nil {
			w.failed(id, err)
		}
		return
	}
	w.mu.Lock()
	delete(w.mu.retry, id)
	w.mu.Unlock()
}

// release drops a ledger lock, also after Stop (a lock left behind would
// hold the ledger until this session ends).
func (w *ReplicationWorker) release(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), w.c.cfg.MetadataTimeout)
	defer cancel()
	if err := unlock(ctx, w.store, id); err != nil {
		w.log.Warn("replication worker cannot release a ledger lock; it goes with the session", "worker", w.cfg.Name, "ledger", id, "err", err)
	}
}

func (w *ReplicationWorker) due(id int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.mu.deferred[id] && !time.Now().Before(w.mu.retry[id].notBefore)
}

func (w *ReplicationWorker) failed(id int64, err error) {
	w.mu.Lock()
	r := w.mu.retry[id]
	r.failures++
	delay := min(w.cfg.PollInterval<<min(r.failures-1, 16), w.cfg.MaxRetryDelay)
	r.notBefore = time.Now().Add(delay)
	w.mu.retry[id] = r
	w.mu.Unlock()
	w.log.Warn("ledger re-replication failed; retrying later", "worker", w.cfg.Name, "ledger", id,
		"failures", r.failures, "retry_in", delay, "err", err)
}

// openWait is a ledger whose last fragment holds a lost bookie while the
// ledger is open (or in recovery): metadata version seen.
type openWait struct{ version int64 }

// errMetadataMoved: the ledger's metadata changed under a replication in
// a way that needs the step decided again.
var errMetadataMoved = errors.New("ledger metadata changed during re-replication")

// replicate replaces, one by one, the replicas that closed fragments have
// on lost bookies, and unmarks the ledger once none is left. It returns
// an openWait if what is left belongs to the writer (or a recovery).
func (w *ReplicationWorker) replicate(ctx context.Context, id int64) (*openWait, error) {
	moved := 0
	for range maxReplicationSteps {
		mark, markVersion, err := readMark(ctx, w.store, id)
		if errors.Is(err, metadata.ErrNotFound) {
			return nil, nil // another worker finished it before we locked it
		}
		if err != nil {
			return nil, err
		}
		md, version, err := w.c.meta.read(ctx, id)
		if errors.Is(err, ErrNoSuchLedger) {
			w.log.Info("under-replicated ledger was deleted; unmarking it", "ledger", id)
			return nil, unmark(ctx, w.store, id, markVersion)
		}
		if err != nil {
			return nil, err
		}
		lost, err := w.lostBookies(ctx, mark.MissingBookies)
		if err != nil {
			return nil, err
		}
		task, wait := nextTask(md, lost)
		if task == nil && !wait && len(mark.MisplacedBookies) > 0 {
			task = misplacedTask(w.c.cfg.Placement, md, candidates(w.c.bookies(), groupsOf(md), md.EnsembleSize+1))
		}
		if task == nil {
			if wait {
				return &openWait{version: version}, nil
			}
			err := unmark(ctx, w.store, id, markVersion)
			if errors.Is(err, metadata.ErrBadVersion) {
				continue // the auditor added a lost bookie meanwhile
			}
			if err == nil {
				w.log.Info("ledger fully replicated; unmarked", "worker", w.cfg.Name, "ledger", id, "lost_bookies", mark.MissingBookies)
			}
			return nil, err
		}
		err = w.replaceReplica(ctx, id, md, version, task, lost)
		if errors.Is(err, errMetadataMoved) {
			if moved++; moved > maxMetadataMoves {
				return nil, fmt.Errorf("ledger %d: metadata changed under %d copies in a row: %w", id, moved, err)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("ledger %d: re-replication did not settle in %d steps", id, maxReplicationSteps)
}

// lostBookies returns those of missing that are not registered now: a
// bookie that came back (with its cookie, so with its data) keeps its
// replicas.
func (w *ReplicationWorker) lostBookies(ctx context.Context, missing []string) (map[string]bool, error) {
	lost := map[string]bool{}
	for _, b := range missing {
		ok, _, err := w.store.Exists(ctx, registry.AvailablePath+"/"+b)
		if err != nil {
			return nil, fmt.Errorf("is bookie %s registered: %w", b, err)
		}
		if !ok {
			lost[b] = true
		}
	}
	return lost, nil
}

// replicaTask is one replica to replace: position pos of fragment frag,
// held by the lost bookie.
type replicaTask struct {
	frag, pos int
	bookie    string
}

// nextTask returns the first replica on a lost bookie in a closed
// fragment, and whether some fragment with a lost bookie is not closed:
// the last one of an open ledger, or any of a ledger in recovery (whose
// close must not race a metadata change of ours).
func nextTask(md *Metadata, lost map[string]bool) (*replicaTask, bool) {
	wait := false
	for i, f := range md.Ensembles {
		closed := md.State == StateClosed || (md.State == StateOpen && i < len(md.Ensembles)-1)
		for p, b := range f.Bookies {
			if !lost[b] {
				continue
			}
			if !closed {
				wait = true
				continue
			}
			return &replicaTask{frag: i, pos: p, bookie: b}, wait
		}
	}
	return nil, wait
}

// fragmentEnd is the last entry of fragment i, which must be closed
// (-1 less than its first entry when it holds none).
func fragmentEnd(md *Metadata, i int) int64 {
	if i < len(md.Ensembles)-1 {
		return md.Ensembles[i+1].FirstEntry - 1
	}
	return md.LastEntryID
}

// onPosition reports whether entry's write set includes ensemble
// position pos: pos is slot (pos - entry) mod E of the write set that
// starts at entry mod E.
func onPosition(md *Metadata, entry int64, pos int) bool {
	e := int64(md.EnsembleSize)
	return ((int64(pos)-entry)%e+e)%e < int64(md.WriteQuorumSize)
}

// errTargetFailed marks a copy that failed on the replacement bookie (as
// opposed to on the surviving replicas): another target may do.
var errTargetFailed = errors.New("replacement bookie failed")

// replaceReplica copies the entries of one lost replica to a new bookie
// and then stores the replacement in that fragment by CAS.
func (w *ReplicationWorker) replaceReplica(ctx context.Context, id int64, md *Metadata, version int64, t *replicaTask, lost map[string]bool) error {
	f := md.Ensembles[t.frag]
	first, end := f.FirstEntry, fragmentEnd(md, t.frag)
	exclude := make([]string, 0, len(lost)+maxTargets)
	for b := range lost {
		exclude = append(exclude, b) // never a lost bookie, even one the registry still lists
	}
	var errs []error
	for range maxTargets {
		target, err := w.c.cfg.Placement.Replace(candidates(w.c.bookies(), groupsOf(md), md.EnsembleSize+1), f.Bookies, t.pos, md.WriteQuorumSize, exclude)
		if err != nil {
			errs = append(errs, err)
			break
		}
		// The registry may lag: a bookie that left may still be listed.
		registered, _, err := w.store.Exists(ctx, registry.AvailablePath+"/"+target)
		if err != nil {
			return fmt.Errorf("ledger %d: is bookie %s registered: %w", id, target, err)
		}
		if !registered {
			errs = append(errs, fmt.Errorf("placement chose bookie %s, which is not registered", target))
			exclude = append(exclude, target)
			continue
		}
		if w.hooks.beforeCopy != nil {
			w.hooks.beforeCopy(id, t.bookie, target)
		}
		copied, err := w.copyEntries(ctx, id, md, t, end, target, lost)
		if err == nil {
			return w.storeReplacement(ctx, id, md, version, t, end, target, copied)
		}
		errs = append(errs, err)
		if !errors.Is(err, errTargetFailed) {
			break
		}
		exclude = append(exclude, target)
	}
	return fmt.Errorf("ledger %d: replace bookie %s in the fragment from entry %d: %w", id, t.bookie, first, errors.Join(errs...))
}

// copyEntries copies the entries of the task's replica, up to end: each
// is read from a surviving replica (verified) and its exact bytes are
// written to target with a recovery add. It returns how many it copied.
func (w *ReplicationWorker) copyEntries(ctx context.Context, id int64, md *Metadata, t *replicaTask, end int64, target string, lost map[string]bool) (int, error) {
	r, err := w.c.newReadHandle(id, md, md.Password)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		copied   int
	)
	sem := make(chan struct{}, copyWindow)
	for e := md.Ensembles[t.frag].FirstEntry; e <= end; e++ {
		if !onPosition(md, e, t.pos) {
			continue
		}
		copied++
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := w.copyEntry(ctx, r, md, e, target, lost); err != nil {
				once.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return copied, ctx.Err()
}

func (w *ReplicationWorker) copyEntry(ctx context.Context, r *ReadHandle, md *Metadata, e int64, target string, lost map[string]bool) error {
	var sources []string
	for _, b := range writeSet(md, e) {
		if !lost[b] {
			sources = append(sources, b)
		}
	}
	raw, err := r.readVerified(ctx, e, sources)
	if err != nil {
		return err
	}
	req := &bkproto.Request{Op: bkproto.OpAdd, Flags: bkproto.FlagRecoveryAdd, LedgerID: r.id, EntryID: e, MasterKey: r.key, Data: raw}
	done := make(chan error, 1)
	w.c.transport.Send(target, req, func(_ *bkproto.Response, err error) { done <- err })
	timeout := time.NewTimer(w.c.cfg.AddTimeout)
	defer timeout.Stop()
	select {
	case err = <-done:
	case <-timeout.C:
		err = ErrAddTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("ledger %d entry %d to bookie %s: %w: %w", r.id, e, target, errTargetFailed, err)
	}
	return nil
}

// readVerified reads one entry from the given replicas in turn and
// returns the first copy whose digest verifies, as the bookie stored it
// (the digest covers the header, so the copy must be byte for byte).
func (r *ReadHandle) readVerified(ctx context.Context, e int64, replicas []string) ([]byte, error) {
	if len(replicas) == 0 {
		return nil, fmt.Errorf("ledger %d entry %d: every replica is on a lost bookie", r.id, e)
	}
	var errs []error
	for _, b := range replicas {
		results := make(chan replicaResult, 1)
		r.sendRead(b, &bkproto.Request{Op: bkproto.OpRead, LedgerID: r.id, EntryID: e}, e, results)
		timeout := time.NewTimer(r.c.cfg.ReadTimeout)
		select {
		case res := <-results:
			timeout.Stop()
			if res.err == nil {
				return bytes.Clone(res.resp.Data), nil
			}
			errs = append(errs, fmt.Errorf("bookie %s: %w", b, res.err))
		case <-timeout.C:
			errs = append(errs, fmt.Errorf("bookie %s: no answer in %v", b, r.c.cfg.ReadTimeout))
		case <-ctx.Done():
			timeout.Stop()
			return nil, ctx.Err()
		}
	}
	return nil, readFailure(r.id, e, errs)
}

// storeReplacement puts target in place of the lost bookie in the
// fragment, by CAS. On a version conflict it re-reads and applies the
// change to the new metadata if the copy still covers it: same fragment,
// still closed, no more entries than were copied, the lost bookie still
// at that position and target not elsewhere in it. Otherwise the step is
// decided again (errMetadataMoved).
func (w *ReplicationWorker) storeReplacement(ctx context.Context, id int64, md *Metadata, version int64, t *replicaTask, end int64, target string, copied int) error {
	first := md.Ensembles[t.frag].FirstEntry
	for range maxCASRetries {
		j := slices.IndexFunc(md.Ensembles, func(f Fragment) bool { return f.FirstEntry == first })
		switch {
		case j < 0, md.State == StateInRecovery:
			return errMetadataMoved
		case md.State != StateClosed && j == len(md.Ensembles)-1:
			return errMetadataMoved
		case md.Ensembles[j].Bookies[t.pos] != t.bookie, slices.Contains(md.Ensembles[j].Bookies, target):
			return errMetadataMoved
		case fragmentEnd(md, j) > end:
			return errMetadataMoved
		}
		next := md.clone()
		next.Ensembles[j].Bookies[t.pos] = target
		_, err := w.c.meta.write(ctx, id, next, version)
		if err == nil {
			w.log.Info("ledger fragment re-replicated", "worker", w.cfg.Name, "ledger", id, "first_entry", first,
				"last_entry", end, "lost_bookie", t.bookie, "replacement", target, "entries", copied)
			return nil
		}
		if !errors.Is(err, metadata.ErrBadVersion) {
			return err
		}
		if md, version, err = w.c.meta.read(ctx, id); err != nil {
			return err
		}
	}
	return fmt.Errorf("ledger %d: %d metadata version conflicts in a row", id, maxCASRetries)
}

// startDeferral holds the lock of an open ledger for the grace period,
// then recovers the ledger if its metadata did not change meanwhile. It
// reports false (the caller releases the lock) when too many wait already.
func (w *ReplicationWorker) startDeferral(ctx context.Context, id, version int64) bool {
	w.mu.Lock()
	if len(w.mu.deferred) >= maxDeferred {
		w.mu.Unlock()
		return false
	}
	w.mu.deferred[id] = true
	w.mu.Unlock()
	w.deferWG.Add(1)
	go func() {
		defer w.deferWG.Done()
		err := w.awaitWriter(ctx, id, version)
		w.release(id)
		w.mu.Lock()
		delete(w.mu.deferred, id)
		w.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			w.failed(id, err)
		}
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}()
	return true
}

// awaitWriter waits the grace period; if the ledger's metadata is still
// at version and a fragment the worker may not touch still holds a lost
// bookie, the writer (or the recovery) made no progress: recover the
// ledger, which closes it, so its fragments become closed.
func (w *ReplicationWorker) awaitWriter(ctx context.Context, id, version int64) error {
	t := time.NewTimer(w.cfg.OpenLedgerGracePeriod)
	defer t.Stop()
	// A change of the ledger's metadata (the writer replaced the bookie,
	// or closed the ledger) ends the wait early; without the watch, the
	// grace period still bounds it.
	var changes <-chan metadata.Event
	if watch, err := w.store.Watch(ctx, Path(id)); err == nil {
		defer watch.Close()
		changes = watch.Events()
	}
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			waiting = false
		case _, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			if _, v, err := w.c.meta.read(ctx, id); err != nil || v != version {
				return nil // deleted or changed: the next pass decides again
			}
		}
	}
	md, v, err := w.c.meta.read(ctx, id)
	if err != nil || v != version {
		return nil
	}
	mark, _, err := readMark(ctx, w.store, id)
	if err != nil {
		return nil
	}
	lost, err := w.lostBookies(ctx, mark.MissingBookies)
	if err != nil {
		return err
	}
	if _, wait := nextTask(md, lost); !wait {
		return nil
	}
	w.log.Warn("ledger kept a lost bookie in its open last fragment through the grace period; recovering it (fences its writer)",
		"worker", w.cfg.Name, "ledger", id, "state", md.State, "grace", w.cfg.OpenLedgerGracePeriod)
	if _, err := w.c.OpenRecover(ctx, id, md.Password); err != nil {
		return fmt.Errorf("ledger %d: recover to re-replicate: %w", id, err)
	}
	return nil
}
