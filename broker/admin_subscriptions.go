package broker

// Admin REST API for subscriptions, as pulsaradmin (v0.19,
// pkg/admin/subscription.go) calls it: .../{topic}/subscriptions,
// .../{topic}/subscription/{sub}[/...] and
// .../{topic}/all_subscription/expireMessages/{seconds}.
//
// Behaviour:
//   - A subscription is a durable cursor of the topic, whether or not a
//     consumer attached since the topic loaded. Calls act on its dispatcher
//     when it has one (so what consumers hold is dropped or sent again),
//     else on the cursor alone. Readers are not listed (stats show them).
//   - pulsaradmin escapes subscription names twice; they are unescaped once
//     more here, as Pulsar does.
//   - create (PUT, a MessageId body): Earliest, Latest (also an empty body)
//     or an entry, which is then read next; 409 if it exists.
//   - delete: 412 while consumers are connected unless force=true, which
//     disconnects them; they resubscribe to a new subscription.
//   - skip/{n} and skip_all acknowledge the next n unacknowledged entries
//     (a batch entry counts once, where Pulsar counts its messages) or all.
//   - resetcursor/{timestamp} and resetcursor (MessageId body) move the
//     subscription so that the first entry published at or after the time,
//     or the entry, is read next, and disconnect its consumers, as SEEK.
//   - expireMessages/{seconds} acknowledges the entries published more than
//     that long ago, as message TTL does (ttl.go); all_subscription does it
//     on every subscription.
//   - position/{n} answers the n-th unacknowledged entry (n from 1) as a
//     message (admin_messages.go); pulsaradmin's peek asks 1, 2, ...

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
)

// subTarget is a durable subscription an admin call acts on.
type subTarget struct {
	name   string
	s      *subscription // nil: no consumer attached since the topic loaded
	cursor managedledger.Cursor
}

// subOp is an admin action on one subscription.
type subOp func(ctx context.Context, r *http.Request, t *topic, st subTarget) error

func (b *Broker) registerSubscriptionAdmin(tp string, own func(string, topicHandler)) {
	sub := tp + "/subscription/{sub}"
	own("GET "+tp+"/subscriptions", b.httpListSubscriptions)
	own("PUT "+sub, b.httpCreateSubscription)
	own("DELETE "+sub, b.onSubscription(deleteSubscription))
	own("POST "+sub+"/skip/{n}", b.onSubscription(skipMessages))
	own("POST "+sub+"/skip_all", b.onSubscription(clearBacklog))
	own("POST "+sub+"/resetcursor/{timestamp}", b.onSubscription(resetToTime))
	own("POST "+sub+"/resetcursor", b.onSubscription(resetToMessage))
	own("POST "+sub+"/expireMessages/{seconds}", b.onSubscription(expireMessages))
	own("POST "+tp+"/all_subscription/expireMessages/{seconds}", b.httpExpireAll)
	own("GET "+sub+"/position/{n}", b.httpPeek)
}

// subscriptionName is the {sub} of the path, unescaped once more.
func subscriptionName(r *http.Request) (string, error) {
	name := r.PathValue("sub")
	if u, err := url.PathUnescape(name); err == nil {
		name = u
	}
	if name == "" {
		return "", badRequest("subscription", "empty name")
	}
	return name, nil
}

// durableSub finds a subscription by name.
func (t *topic) durableSub(name string) (subTarget, bool) {
	t.mu.Lock()
	s, ok := t.subs[name]
	t.mu.Unlock()
	if ok {
		return subTarget{name: name, s: s, cursor: s.cursor}, true
	}
	for _, c := range t.subscriptionCursors() {
		if c.Durable() && c.Name() == name {
			return subTarget{name: name, cursor: c}, true
		}
	}
	return subTarget{}, false
}

// durableSubNames lists the subscriptions, sorted.
func (t *topic) durableSubNames() []string {
	seen := map[string]bool{}
	for _, s := range t.durableSubs() {
		seen[s.name] = true
	}
	for _, c := range t.subscriptionCursors() {
		if c.Durable() {
			seen[c.Name()] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// targetOf loads the topic and finds the subscription a call is about.
func (b *Broker) targetOf(r *http.Request, name TopicName) (*topic, subTarget, error) {
	sub, err := subscriptionName(r)
	if err != nil {
		return nil, subTarget{}, err
	}
	t, err := b.existingTopic(r.Context(), name)
	if err != nil {
		return nil, subTarget{}, err
	}
	st, ok := t.durableSub(sub)
	if !ok {
		return nil, subTarget{}, fmt.Errorf("subscription %s of %s: %w", sub, name, errSubNotFound)
	}
	return t, st, nil
}

// onSubscription serves a call that acts on one subscription and answers
// 204.
func (b *Broker) onSubscription(op subOp) topicHandler {
	return func(w http.ResponseWriter, r *http.Request, name TopicName) {
		t, st, err := b.targetOf(r, name)
		if err == nil {
			err = op(r.Context(), r, t, st)
		}
		if err != nil {
			adminError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (b *Broker) httpListSubscriptions(w http.ResponseWriter, r *http.Request, name TopicName) {
	t, err := b.existingTopic(r.Context(), name)
	if err != nil {
		adminError(w, err)
		return
	}
	writeJSON(w, t.durableSubNames())
}

func (b *Broker) httpCreateSubscription(w http.ResponseWriter, r *http.Request, name TopicName) {
	sub, err := subscriptionName(r)
	var t *topic
	if err == nil {
		t, err = b.existingTopic(r.Context(), name)
	}
	if err == nil {
		err = createSubscription(r.Context(), r.Body, t, sub)
	}
	if err != nil {
		adminError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// createSubscription opens a durable cursor at the MessageId in body.
func createSubscription(ctx context.Context, body io.Reader, t *topic, sub string) error {
	if _, ok := t.durableSub(sub); ok {
		return fmt.Errorf("subscription %s of %s: %w", sub, t.name, errExists)
	}
	start := messageIDJSON{LedgerID: latestLedger, EntryID: latestLedger}
	if raw, err := io.ReadAll(io.LimitReader(body, 64<<10)); err == nil && len(raw) > 0 {
		if start, err = decodeMessageID(raw); err != nil {
			return err
		}
	}
	initial := managedledger.Latest
	if start.LedgerID < 0 {
		initial = managedledger.Earliest
	}
	c, err := t.ml.OpenCursor(ctx, sub, managedledger.CursorOptions{Initial: initial})
	if err != nil {
		return fmt.Errorf("subscription %s of %s: %w", sub, t.name, err)
	}
	if start.LedgerID >= 0 && start.LedgerID != latestLedger {
		if err := c.Reset(ctx, start.position()); err != nil {
			_ = t.ml.DeleteCursor(ctx, sub) // no half-made subscription
			return fmt.Errorf("subscription %s of %s: start at %v: %w", sub, t.name, start.position(), err)
		}
	}
	t.b.log.Info("subscription created", "topic", t.name.String(), "subscription", sub, "start", start.position().String())
	return nil
}

// deleteSubscription removes a subscription: refused while consumers are
// connected unless force, which disconnects them. The closed subscription
// stays in the topic until its cursor is gone, so a consumer coming back
// meanwhile is refused (and retries) rather than handed the dying cursor.
func deleteSubscription(ctx context.Context, r *http.Request, t *topic, st subTarget) error {
	if st.s != nil {
		if err := st.s.closeForDelete(r.URL.Query().Get("force") == "true"); err != nil {
			return err
		}
		st.s.disconnectConsumers()
	}
	err := t.ml.DeleteCursor(ctx, st.name)
	if st.s != nil {
		t.mu.Lock()
		if t.subs[st.name] == st.s {
			delete(t.subs, st.name)
		}
		t.mu.Unlock()
		st.s.close()
	}
	if err != nil && !errors.Is(err, managedledger.ErrCursorNotFound) {
		return fmt.Errorf("delete subscription %s of %s: %w", st.name, t.name, err)
	}
	t.b.log.Info("subscription deleted", "topic", t.name.String(), "subscription", st.name)
	return nil
}

// closeForDelete marks the subscription closed for deletion, so no
// consumer can join; errInUse while it has consumers, unless force.
func (s *subscription) closeForDelete(force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.consumers); n > 0 && !force {
		return fmt.Errorf("subscription %s %w: %d consumers", s.name, errInUse, n)
	}
	s.closed = true
	return nil
}

func skipMessages(ctx context.Context, r *http.Request, _ *topic, st subTarget) error {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 {
		return badRequest("numMessages", "want a non-negative number, got %q", r.PathValue("n"))
	}
	if err := st.cursor.SkipEntries(ctx, n); err != nil {
		return fmt.Errorf("skip %d on subscription %s: %w", n, st.name, err)
	}
	st.dropAcknowledged()
	return nil
}

func clearBacklog(ctx context.Context, _ *http.Request, _ *topic, st subTarget) error {
	if err := st.cursor.ClearBacklog(ctx); err != nil {
		return fmt.Errorf("clear backlog of subscription %s: %w", st.name, err)
	}
	st.dropAcknowledged()
	return nil
}

// dropAcknowledged makes the dispatcher forget what the cursor now counts
// as acknowledged.
func (st subTarget) dropAcknowledged() {
	if st.s != nil {
		st.s.dropUpTo(st.cursor.MarkDeletePosition())
	}
}

func resetToTime(ctx context.Context, r *http.Request, t *topic, st subTarget) error {
	ms, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil || ms < 0 {
		return badRequest("timestamp", "want milliseconds since the epoch, got %q", r.PathValue("timestamp"))
	}
	pos, err := findByPublishTime(ctx, t.ml, uint64(ms))
	if err != nil {
		return fmt.Errorf("reset subscription %s: find publish time %d: %w", st.name, ms, err)
	}
	return st.reset(ctx, pos)
}

func resetToMessage(ctx context.Context, r *http.Request, _ *topic, st subTarget) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return badRequest("messageId", "read body: %v", err)
	}
	id, err := decodeMessageID(raw)
	if err != nil {
		return err
	}
	return st.reset(ctx, id.position())
}

// reset moves the subscription so that pos is read next and disconnects
// its consumers, as SEEK does.
func (st subTarget) reset(ctx context.Context, pos managedledger.Position) error {
	if st.s == nil {
		if err := st.cursor.Reset(ctx, pos); err != nil {
			return fmt.Errorf("reset subscription %s to %v: %w", st.name, pos, err)
		}
		return nil
	}
	if err := st.s.seek(ctx, pos); err != nil {
		return fmt.Errorf("reset subscription %s to %v: %w", st.name, pos, err)
	}
	st.s.disconnectConsumers()
	return nil
}

func expireMessages(ctx context.Context, r *http.Request, t *topic, st subTarget) error {
	cutoff, err := expiryCutoff(r)
	if err != nil {
		return err
	}
	last, ok := lastPublishedBefore(ctx, t.ml, cutoff)
	if !ok {
		return nil
	}
	return st.expireUpTo(ctx, last)
}

func (b *Broker) httpExpireAll(w http.ResponseWriter, r *http.Request, name TopicName) {
	cutoff, err := expiryCutoff(r)
	var t *topic
	if err == nil {
		t, err = b.existingTopic(r.Context(), name)
	}
	if err == nil {
		err = expireAll(r.Context(), t, cutoff)
	}
	if err != nil {
		adminError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// expireAll acknowledges, on every subscription, what was published
// before cutoff (ms).
func expireAll(ctx context.Context, t *topic, cutoff uint64) error {
	last, ok := lastPublishedBefore(ctx, t.ml, cutoff)
	if !ok {
		return nil
	}
	for _, sub := range t.durableSubNames() {
		st, found := t.durableSub(sub)
		if !found {
			continue // deleted meanwhile
		}
		if err := st.expireUpTo(ctx, last); err != nil {
			return err
		}
	}
	return nil
}

// expiryCutoff is the publish time (ms) before which expireMessages
// acknowledges.
func expiryCutoff(r *http.Request) (uint64, error) {
	secs, err := strconv.ParseInt(r.PathValue("seconds"), 10, 64)
	if err != nil || secs < 0 {
		return 0, badRequest("expireTimeInSeconds", "want a non-negative number, got %q", r.PathValue("seconds"))
	}
	return uint64(time.Now().Add(-time.Duration(secs) * time.Second).UnixMilli()), nil
}

// expireUpTo acknowledges everything up to pos (never moving back).
func (st subTarget) expireUpTo(ctx context.Context, pos managedledger.Position) error {
	if st.cursor.MarkDeletePosition().Compare(pos) >= 0 {
		return nil
	}
	if err := st.cursor.MarkDelete(ctx, pos); err != nil {
		return fmt.Errorf("expire messages of subscription %s up to %v: %w", st.name, pos, err)
	}
	st.dropAcknowledged()
	return nil
}

func (b *Broker) httpPeek(w http.ResponseWriter, r *http.Request, name TopicName) {
	t, st, err := b.targetOf(r, name)
	if err != nil {
		adminError(w, err)
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		adminError(w, badRequest("messagePosition", "want a number from 1, got %q", r.PathValue("n")))
		return
	}
	e, err := nthUnacknowledged(r.Context(), t.ml, st.cursor, n)
	if err != nil {
		adminError(w, fmt.Errorf("peek subscription %s: %w", st.name, err))
		return
	}
	b.writeMessage(w, r, e)
}
