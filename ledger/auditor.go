package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/metadata"
)

// AuditorConfig configures an Auditor. Zero values take the defaults;
// names in parentheses are BookKeeper settings.
type AuditorConfig struct {
	// Name identifies this candidate in its election node and logs
	// (default "auditor"; a bookie passes its id).
	Name string
	// LostBookieRecoveryDelay (lostBookieRecoveryDelay; default 0, at
	// once): how long a bookie must stay unregistered before its ledgers
	// are marked. A delay longer than a restart keeps rolling restarts
	// from copying whole bookies.
	LostBookieRecoveryDelay time.Duration
	// PeriodicCheckInterval (auditorPeriodicCheckInterval; default 1 h,
	// negative: never): how often the leader scans every ledger's
	// metadata for lost bookies besides when bookies leave. It catches
	// what the event-driven audit cannot see: ledgers created with a stale
	// bookie list, marks a previous leader did not finish.
	PeriodicCheckInterval time.Duration
}

func (c AuditorConfig) withDefaults() AuditorConfig {
	if c.Name == "" {
		c.Name = "auditor"
	}
	if c.PeriodicCheckInterval == 0 {
		c.PeriodicCheckInterval = time.Hour
	}
	return c
}

// Retry delays of the auditor's metadata operations.
const (
	auditorWatchRetry = 500 * time.Millisecond // re-establish a lost watch
	auditorRetry      = time.Second            // an election or audit step that failed
	auditorMaxRetry   = 30 * time.Second
)

// Auditor finds ledgers with replicas on lost bookies and marks them for
// the replication workers (BookKeeper's Auditor). Every bookie runs a
// candidate; the one with the lowest ephemeral sequential node under
// AuditorElectionPath leads, the others watch that directory. Two leaders
// at once (a session expiring while its owner still acts) only mark the
// same ledgers twice, which is harmless: marks are merged by CAS.
type Auditor struct {
	c      *Client
	store  metadata.Store
	cfg    AuditorConfig
	log    *slog.Logger
	leader atomic.Bool

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
}

// NewAuditor returns an auditor candidate that campaigns with c's
// metadata session. Start runs it.
func NewAuditor(c *Client, cfg AuditorConfig) *Auditor {
	return &Auditor{c: c, store: c.cfg.Store, cfg: cfg.withDefaults(), log: c.log, done: make(chan struct{})}
}

// Start campaigns and, once elected, audits until Stop or until the
// session is lost.
func (a *Auditor) Start() {
	a.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		a.cancel = cancel
		go a.run(ctx)
	})
}

// Stop ends the auditor and withdraws its candidacy, so that another
// takes over at once.
func (a *Auditor) Stop() {
	a.stopOnce.Do(func() {
		a.startOnce.Do(func() {}) // a Start after Stop does nothing
		if a.cancel == nil {
			close(a.done)
			return
		}
		a.cancel()
		<-a.done
	})
}

// IsLeader reports whether this candidate is the auditor now.
func (a *Auditor) IsLeader() bool { return a.leader.Load() }

func (a *Auditor) run(ctx context.Context) {
	defer close(a.done)
	node := ""
	defer func() { a.withdraw(node) }()
	delay, lastErr := time.Duration(0), ""
	for ctx.Err() == nil {
		var err error
		node, err = a.campaign(ctx, node)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if msg := err.Error(); msg != lastErr { // one line per new trouble, not per retry
				a.log.Warn("auditor election failed; retrying", "candidate", a.cfg.Name, "err", err)
				lastErr = msg
			}
			delay = min(max(2*delay, auditorRetry), auditorMaxRetry)
			sleepCtx(ctx, delay)
			continue
		}
		delay, lastErr = 0, ""
		a.lead(ctx, node)
	}
}

// withdraw deletes the candidate's election node.
func (a *Auditor) withdraw(node string) {
	if node == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.c.cfg.MetadataTimeout)
	defer cancel()
	if err := a.store.Delete(ctx, node, metadata.AnyVersion); err != nil && !errors.Is(err, metadata.ErrNotFound) &&
		!errors.Is(err, metadata.ErrSessionLost) && !errors.Is(err, metadata.ErrClosed) {
		a.log.Warn("auditor could not withdraw its candidacy; it goes with the session", "candidate", a.cfg.Name, "err", err)
	}
}

// campaign returns once node (created if empty or gone) is the lowest
// candidate.
func (a *Auditor) campaign(ctx context.Context, node string) (string, error) {
	w, err := a.store.Watch(ctx, AuditorElectionPath)
	if err != nil {
		return node, fmt.Errorf("watch %s: %w", AuditorElectionPath, err)
	}
	defer w.Close()
	for {
		kids, err := a.store.Children(ctx, AuditorElectionPath)
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			return node, fmt.Errorf("list %s: %w", AuditorElectionPath, err)
		}
		if node == "" || !containsName(kids, baseName(node)) {
			made, _, err := a.store.Create(ctx, AuditorElectionPath+"/candidate-", []byte(a.cfg.Name),
				metadata.CreateOptions{Ephemeral: true, Sequential: true})
			if err != nil {
				return "", fmt.Errorf("create election node: %w", err)
			}
			node = made
			continue
		}
		if lowestCandidate(kids) == baseName(node) {
			return node, nil
		}
		select {
		case <-ctx.Done():
			return node, ctx.Err()
		case _, ok := <-w.Events():
			if !ok {
				return node, fmt.Errorf("watch %s ended: %w", AuditorElectionPath, w.Err())
			}
		}
	}
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// lowestCandidate is the candidate with the lowest sequence number (the
// 10 digits every backend appends; names differ only there).
func lowestCandidate(names []string) string {
	best := ""
	for _, n := range names {
		if len(n) < 10 {
			continue
		}
		if best == "" || n[len(n)-10:] < best[len(best)-10:] {
			best = n
		}
	}
	return best
}

// lead audits until ctx ends or leadership is lost: the election node
// went away, or the session did.
func (a *Auditor) lead(ctx context.Context, node string) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	guarded := make(chan struct{})
	go func() {
		defer close(guarded)
		a.guard(lctx, node)
		cancel()
	}()
	a.leader.Store(true)
	a.log.Info("auditor elected", "candidate", a.cfg.Name, "node", node)
	a.audit(lctx)
	cancel()
	<-guarded
	a.leader.Store(false)
	if ctx.Err() == nil {
		a.log.Warn("auditor lost its leadership", "candidate", a.cfg.Name, "node", node)
	}
}

// guard returns when leadership can no longer be trusted: the session
// was lost or the election node is gone. Once a candidate is the lowest,
// no lower one can appear, so "my node exists" is "I lead".
func (a *Auditor) guard(ctx context.Context, node string) {
	sess := a.store.SessionEvents()
	var w *metadata.Watcher
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	rewatch := time.NewTimer(0)
	defer rewatch.Stop()
	for {
		var events <-chan metadata.Event
		if w != nil {
			events = w.Events()
		}
		select {
		case <-ctx.Done():
			return
		case st, ok := <-sess.States():
			if !ok && errors.Is(sess.Err(), metadata.ErrWatchOverflow) {
				sess = a.store.SessionEvents()
				continue
			}
			if !ok || st == metadata.SessionLost {
				return // the election node went with the session
			}
		case <-rewatch.C:
			var err error
			if w, err = a.store.Watch(ctx, AuditorElectionPath); err != nil {
				w = nil
				rewatch.Reset(auditorWatchRetry)
				continue
			}
			if !a.candidate(ctx, node) { // it may have gone while unwatched
				return
			}
		case _, ok := <-events:
			if !ok {
				w.Close()
				w = nil
				rewatch.Reset(auditorWatchRetry)
				continue
			}
			if !a.candidate(ctx, node) {
				return
			}
		}
	}
}

// candidate reports whether node still exists (false when that cannot be
// read: a leader that cannot tell steps down and campaigns again).
func (a *Auditor) candidate(ctx context.Context, node string) bool {
	exists, _, err := a.store.Exists(ctx, node)
	return err == nil && exists
}

// auditState is what the leader knows about bookies.
type auditState struct {
	registered  map[string]bool
	absentSince map[string]time.Time // known bookies not registered now, since when
	audited     map[string]bool      // lost bookies whose ledgers were all marked
	retryAt     time.Time            // a failed audit is retried then
	failures    int
}

// lost returns the absent bookies whose delay has passed at now.
func (s *auditState) lost(now time.Time, delay time.Duration) map[string]bool {
	out := map[string]bool{}
	for b, since := range s.absentSince {
		if now.Sub(since) >= delay {
			out[b] = true
		}
	}
	return out
}

// nextDeadline is when the next absent bookie becomes lost (zero: none).
func (s *auditState) nextDeadline(delay time.Duration) time.Time {
	var next time.Time
	for b, since := range s.absentSince {
		if s.audited[b] {
			continue
		}
		if d := since.Add(delay); next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next
}

// audit is the leader's loop: it keeps the bookie list current through a
// watch (re-listed whenever the watch is re-established, since changes
// made while it was down are not replayed) and marks the ledgers of
// bookies lost for the delay, plus a full check periodically.
func (a *Auditor) audit(ctx context.Context) {
	st := &auditState{registered: map[string]bool{}, absentSince: map[string]time.Time{}, audited: map[string]bool{}}
	var w *metadata.Watcher
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	var periodic <-chan time.Time
	if a.cfg.PeriodicCheckInterval > 0 {
		t := time.NewTicker(a.cfg.PeriodicCheckInterval)
		defer t.Stop()
		periodic = t.C
	}
	wake := time.NewTimer(0)
	defer wake.Stop()
	needFull, needList, rewatchAt := true, true, time.Time{}
	for ctx.Err() == nil {
		now := time.Now()
		if w == nil && !now.Before(rewatchAt) {
			var err error
			if w, err = a.store.Watch(ctx, registry.AvailablePath); err != nil {
				w, rewatchAt = nil, now.Add(auditorWatchRetry)
			} else {
				needList = true // what changed while unwatched is not replayed
			}
		}
		if !now.Before(st.retryAt) {
			needFull, needList = a.step(ctx, st, needFull, needList)
		}
		var events <-chan metadata.Event
		if w != nil {
			events = w.Events()
		}
		wake.Reset(a.wakeIn(st, w == nil, rewatchAt))
		select {
		case <-ctx.Done():
		case _, ok := <-events:
			if !ok {
				w.Close()
				w, rewatchAt = nil, time.Now().Add(auditorWatchRetry)
			}
			drain(events)
			needList = true
		case <-periodic:
			needFull = true
		case <-wake.C:
		}
	}
}

// wakeIn is how long the loop may sleep: until the next bookie becomes
// lost (not before a pending retry), or until the watch is retried.
func (a *Auditor) wakeIn(st *auditState, unwatched bool, rewatchAt time.Time) time.Duration {
	next := st.nextDeadline(a.cfg.LostBookieRecoveryDelay)
	if !st.retryAt.IsZero() && (next.IsZero() || next.Before(st.retryAt)) {
		next = st.retryAt // a failed step must wait, whatever became due meanwhile
	}
	if unwatched && (next.IsZero() || rewatchAt.Before(next)) {
		next = rewatchAt
	}
	if next.IsZero() {
		return time.Hour // only events or the periodic check can bring work
	}
	return max(time.Until(next), time.Millisecond)
}

// step re-lists the bookies if asked, then scans the ledgers if a full
// check is due or a bookie became lost since the last scan. It returns
// what is still to do.
func (a *Auditor) step(ctx context.Context, st *auditState, full, list bool) (bool, bool) {
	if list || full {
		joined, err := a.relist(ctx, st)
		if err != nil {
			a.failedStep(ctx, st, err)
			return full, true
		}
		if sp, spread := a.c.cfg.Placement.(*SpreadPlacement); joined && spread && sp.knownDomains(a.c.bookies()) > 1 {
			full = true // a bookie that joined may restore the spread of ledgers placed without it
		}
	}
	now := time.Now()
	lost := st.lost(now, a.cfg.LostBookieRecoveryDelay)
	pending := false
	for b := range lost {
		if !st.audited[b] {
			pending = true
		}
	}
	if !full && !pending {
		return false, false
	}
	marked, err := a.scan(ctx, st, now)
	if err != nil {
		a.failedStep(ctx, st, err)
		return full, false
	}
	st.failures, st.retryAt = 0, time.Time{}
	newlyLost := []string{}
	for b := range st.lost(now, a.cfg.LostBookieRecoveryDelay) {
		if !st.audited[b] {
			newlyLost = append(newlyLost, b)
		}
		st.audited[b] = true
	}
	if len(newlyLost) > 0 || marked > 0 {
		a.log.Info("auditor marked under-replicated ledgers", "candidate", a.cfg.Name, "newly_lost_bookies", sortedSet(newlyLost),
			"ledgers_marked", marked, "full_check", full)
	}
	return false, false
}

func (a *Auditor) failedStep(ctx context.Context, st *auditState, err error) {
	if ctx.Err() != nil {
		return
	}
	st.failures++
	delay := min(auditorRetry<<min(st.failures-1, 5), auditorMaxRetry)
	st.retryAt = time.Now().Add(delay)
	a.log.Warn("auditor step failed; retrying", "candidate", a.cfg.Name, "failures", st.failures, "retry_in", delay, "err", err)
}

// relist reads the registered bookies and starts or stops the absence
// clock of the bookies that left or came back. It reports whether a
// bookie joined (or came back) since the last list.
func (a *Auditor) relist(ctx context.Context, st *auditState) (bool, error) {
	regs, err := registry.Bookies(ctx, a.store)
	if err != nil {
		return false, err
	}
	now := time.Now()
	cur := make(map[string]bool, len(regs))
	joined := false
	for _, r := range regs {
		cur[r.BookieID] = true
		joined = joined || (len(st.registered) > 0 && !st.registered[r.BookieID])
		if _, ok := st.absentSince[r.BookieID]; ok {
			a.log.Info("bookie registered again; its replicas are kept", "candidate", a.cfg.Name, "bookie", r.BookieID)
			delete(st.absentSince, r.BookieID)
			delete(st.audited, r.BookieID)
		}
	}
	for b := range st.registered {
		if !cur[b] {
			if _, ok := st.absentSince[b]; !ok {
				a.log.Warn("bookie left; its ledgers are re-replicated unless it returns in time", "candidate", a.cfg.Name,
					"bookie", b, "delay", a.cfg.LostBookieRecoveryDelay)
				st.absentSince[b] = now
			}
		}
	}
	st.registered = cur
	return joined, nil
}

// scan reads every ledger's metadata, starts the absence clock of the
// unregistered bookies it finds in ensembles (a bookie gone before this
// leader was elected), marks the ledgers that hold a bookie lost at now
// and, with a rack- or region-aware policy, those with a replica the
// policy would move (misplacedTask), and forgets absent bookies no ledger
// holds. Ledgers it cannot read are
// skipped and reported in the error, after the others were marked.
func (a *Auditor) scan(ctx context.Context, st *auditState, now time.Time) (int, error) {
	seen := map[string]bool{}
	marked := 0
	var errs []error
	var placed []BookieInfo // for the placement check (spread policies only)
	if _, ok := a.c.cfg.Placement.(*SpreadPlacement); ok {
		var err error
		if placed, err = listBookies(ctx, a.store); err != nil {
			return 0, err
		}
	}
	err := ForEachLedger(ctx, a.store, func(id int64) error {
		md, _, err := a.c.meta.read(ctx, id)
		if errors.Is(err, ErrNoSuchLedger) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil || len(errs) >= 10 {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
			return nil
		}
		var missing []string
		for _, f := range md.Ensembles {
			for _, b := range f.Bookies {
				seen[b] = true
				if st.registered[b] || containsName(missing, b) {
					continue
				}
				since, ok := st.absentSince[b]
				if !ok {
					since = now
					st.absentSince[b] = now
				}
				if now.Sub(since) >= a.cfg.LostBookieRecoveryDelay {
					missing = append(missing, b)
				}
			}
		}
		if len(missing) == 0 {
			if placed == nil {
				return nil
			}
			t := misplacedTask(a.c.cfg.Placement, md, candidates(placed, groupsOf(md), md.EnsembleSize+1))
			if t == nil {
				return nil
			}
			if err := MarkMisplaced(ctx, a.store, id, []string{t.bookie}); err != nil {
				return err
			}
			marked++
			return nil
		}
		if err := MarkUnderreplicated(ctx, a.store, id, missing); err != nil {
			return err
		}
		marked++
		return nil
	})
	if err != nil {
		return marked, err
	}
	if len(errs) > 0 {
		return marked, errors.Join(errs...)
	}
	for b := range st.absentSince {
		if !seen[b] {
			delete(st.absentSince, b) // holds nothing: nothing to audit
			delete(st.audited, b)
		}
	}
	return marked, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
