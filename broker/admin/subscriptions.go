package admin

// Subscriptions, as pulsaradmin (v0.19, pkg/admin/subscription.go) calls
// them: .../{topic}/subscriptions, .../{topic}/subscription/{sub}[/...]
// and .../{topic}/all_subscription/expireMessages/{seconds}.
//
// Behavior (the broker's Subscriptions does the work):
//   - A subscription is a durable cursor of the topic, whether or not a
//     consumer attached since the topic loaded. Readers are not listed
//     (stats show them).
//   - pulsaradmin escapes subscription names twice; they are unescaped once
//     more here, as Pulsar does.
//   - create (PUT, a MessageId body): Earliest, Latest (also an empty body)
//     or an entry, which is then read next; 409 if it exists.
//   - delete: 412 while consumers are connected unless force=true, which
//     disconnects them.
//   - skip/{n} and skip_all acknowledge the next n unacknowledged entries
//     (a batch entry counts once, where Pulsar counts its messages) or all.
//   - resetcursor/{timestamp} and resetcursor (MessageId body) move the
//     subscription to the first entry published at or after the time, or
//     to the entry, and disconnect its consumers, as SEEK.
//   - resetcursor with isExcluded (pulsar-admin's -e) moves it to the entry
//     after the one given.
//   - expireMessages/{seconds} acknowledges the entries published more than
//     that long ago; all_subscription does it on every subscription;
//     expireMessages with a ResetCursorData body acknowledges up to the
//     entry (the one before it with isExcluded); 400 past the last entry.
//   - position/{n} answers the n-th unacknowledged entry (n from 1) as a
//     message (messages.go); pulsaradmin's peek asks 1, 2, ...
//   - replicatedSubscriptionStatus (POST, body true or false) turns the
//     subscription's replication across clusters on or off.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

func (a *brokerAPI) registerSubscriptions(tp string, own func(string, topicHandler)) {
	sub := tp + "/subscription/{sub}"
	own("GET "+tp+"/subscriptions", a.listSubscriptions)
	own("PUT "+sub, a.onSubscription(a.createSubscription))
	own("DELETE "+sub, a.onSubscription(a.deleteSubscription))
	own("POST "+sub+"/skip/{n}", a.onSubscription(a.skipMessages))
	own("POST "+sub+"/skip_all", a.onSubscription(a.clearBacklog))
	own("POST "+sub+"/resetcursor/{timestamp}", a.onSubscription(a.resetToTime))
	own("POST "+sub+"/resetcursor", a.onSubscription(a.resetToMessage))
	own("POST "+sub+"/expireMessages/{seconds}", a.onSubscription(a.expireMessages))
	own("POST "+sub+"/expireMessages", a.onSubscription(a.expireToMessage))
	own("POST "+tp+"/all_subscription/expireMessages/{seconds}", a.expireAll)
	own("GET "+sub+"/position/{n}", a.peek)
	own("POST "+sub+"/replicatedSubscriptionStatus", a.onSubscription(a.replicatedStatus))
}

// replicatedStatus turns replication of the subscription on or off: the
// body is JSON true or false, as Pulsar's.
func (a *brokerAPI) replicatedStatus(r *http.Request, topic, sub string) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<10))
	if err != nil {
		return BadRequest("enabled", "read body: %v", err)
	}
	var enabled bool
	if err := json.Unmarshal(raw, &enabled); err != nil {
		return BadRequest("enabled", "want true or false, got %q", raw)
	}
	return a.b.SetReplicatedSubscriptionStatus(r.Context(), topic, sub, enabled)
}

// subscriptionName is the {sub} of the path, unescaped once more.
func subscriptionName(r *http.Request) (string, error) {
	name := r.PathValue("sub")
	if u, err := url.PathUnescape(name); err == nil {
		name = u
	}
	if name == "" {
		return "", BadRequest("subscription", "empty name")
	}
	return name, nil
}

// subOp is a change to one subscription.
type subOp func(r *http.Request, topic, sub string) error

// onSubscription serves a change to one subscription and answers 204.
func (a *brokerAPI) onSubscription(op subOp) topicHandler {
	return func(w http.ResponseWriter, r *http.Request, topic string) {
		sub, err := subscriptionName(r)
		if err == nil {
			err = op(r, topic, sub)
		}
		a.done(w, r, err)
	}
}

func (a *brokerAPI) listSubscriptions(w http.ResponseWriter, r *http.Request, topic string) {
	subs, err := a.b.Subscriptions(r.Context(), topic)
	a.answer(w, r, subs, err)
}

// createSubscription opens the subscription at the MessageId in the body
// (Latest without one).
func (a *brokerAPI) createSubscription(r *http.Request, topic, sub string) error {
	start := MessageID{LedgerID: LatestLedger, EntryID: LatestLedger}
	if raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10)); err == nil && len(raw) > 0 {
		if start, err = decodeMessageID(raw); err != nil {
			return err
		}
	}
	return a.b.CreateSubscription(r.Context(), topic, sub, start)
}

func (a *brokerAPI) deleteSubscription(r *http.Request, topic, sub string) error {
	return a.b.DeleteSubscription(r.Context(), topic, sub, r.URL.Query().Get("force") == "true")
}

func (a *brokerAPI) skipMessages(r *http.Request, topic, sub string) error {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 {
		return BadRequest("numMessages", "want a non-negative number, got %q", r.PathValue("n"))
	}
	return a.b.SkipMessages(r.Context(), topic, sub, n)
}

func (a *brokerAPI) clearBacklog(r *http.Request, topic, sub string) error {
	return a.b.ClearBacklog(r.Context(), topic, sub)
}

func (a *brokerAPI) resetToTime(r *http.Request, topic, sub string) error {
	ms, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil || ms < 0 {
		return BadRequest("timestamp", "want milliseconds since the epoch, got %q", r.PathValue("timestamp"))
	}
	return a.b.ResetCursorToTime(r.Context(), topic, sub, ms)
}

func (a *brokerAPI) resetToMessage(r *http.Request, topic, sub string) error {
	id, err := messageIDBody(r)
	if err != nil {
		return err
	}
	return a.b.ResetCursor(r.Context(), topic, sub, id)
}

func (a *brokerAPI) expireMessages(r *http.Request, topic, sub string) error {
	cutoff, err := expiryCutoff(r)
	if err != nil {
		return err
	}
	return a.b.ExpireMessages(r.Context(), topic, sub, cutoff)
}

func (a *brokerAPI) expireToMessage(r *http.Request, topic, sub string) error {
	id, err := messageIDBody(r)
	if err != nil {
		return err
	}
	return a.b.ExpireMessagesTo(r.Context(), topic, sub, id)
}

func (a *brokerAPI) expireAll(w http.ResponseWriter, r *http.Request, topic string) {
	cutoff, err := expiryCutoff(r)
	if err == nil {
		err = a.b.ExpireAllSubscriptions(r.Context(), topic, cutoff)
	}
	a.done(w, r, err)
}

// expiryCutoff is the publish time before which expireMessages
// acknowledges.
func expiryCutoff(r *http.Request) (time.Time, error) {
	secs, err := strconv.ParseInt(r.PathValue("seconds"), 10, 64)
	if err != nil || secs < 0 {
		return time.Time{}, BadRequest("expireTimeInSeconds", "want a non-negative number, got %q", r.PathValue("seconds"))
	}
	return time.Now().Add(-time.Duration(secs) * time.Second), nil
}

func (a *brokerAPI) peek(w http.ResponseWriter, r *http.Request, topic string) {
	sub, err := subscriptionName(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		a.fail(w, r, BadRequest("messagePosition", "want a number from 1, got %q", r.PathValue("n")))
		return
	}
	m, err := a.b.PeekMessage(r.Context(), topic, sub, n)
	a.writeMessage(w, r, m, err)
}

// messageIDBody reads the request's MessageId (or ResetCursorData) body.
func messageIDBody(r *http.Request) (MessageID, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return MessageID{}, BadRequest("messageId", "read body: %v", err)
	}
	return decodeMessageID(raw)
}

// decodeMessageID reads a MessageId body.
func decodeMessageID(raw []byte) (MessageID, error) {
	var m MessageID
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, BadRequest("messageId", "body must be {\"ledgerId\": L, \"entryId\": E}: %v", err)
	}
	return m, nil
}
