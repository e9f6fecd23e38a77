package admin

// Topics: /admin/v2/{persistent|non-persistent}/{tenant}/{namespace}[/{topic}/...],
// as Pulsar's PersistentTopics resource and as pulsaradmin (v0.19,
// pkg/admin/topic.go) calls it. Subscriptions are in subscriptions.go,
// messages in messages.go; the broker (Topics) does the work.
//
// Behavior:
//   - A request about one topic that another broker serves (cluster mode)
//     is answered 307 to that broker, as Pulsar does (routed).
//     Partitioned-topic calls are answered here; the broker reaches
//     partitions on other brokers over HTTP (Peers).
//   - A topic exists when it is loaded, stored (the managed-ledger factory
//     lists it) or a partition of a partitioned topic. Calls about other
//     topics answer 404 instead of creating them.
//   - Errors are {"reason": ...} with StatusOf's statuses: 400 bad input,
//     404 no such topic or subscription, 409 exists, 412 precondition
//     (clients connected, no metadata store), 501 what the storage or
//     broker cannot do (deleting a managed ledger when the factory is no
//     managedledger.Deleter, non-persistent topics), 503 topic moved while
//     the call ran, 500 others. Checks run before changes, so a refused
//     call changes nothing.
//   - Deleting a topic deletes its managed ledger and schema. Connected
//     clients make it 412 unless force=true, which disconnects them first;
//     a client that reconnects afterwards finds a new, empty topic.
//   - Terminate stops the stream: sends fail with TopicTerminatedError and
//     new producers are refused, also after a reload. It answers the last
//     message id.
//   - partitioned-stats sums the partitions' stats (subscriptions merged by
//     name) and lists them by partition name unless perPartition=false.
//     DELETE .../partitions checks every partition first (412 while one
//     has clients, unless force=true), then deletes them, then the count.
//   - Topic properties sent with a create are not stored (no place yet).

import (
	"errors"
	"net/http"
	"strconv"
)

// registerTopics adds the topic, message and subscription endpoints.
// Patterns name the domain literally, so they never overlap the other
// /admin/v2 resources (namespaces, clusters, schemas, brokers).
func (a *brokerAPI) registerTopics(mux *http.ServeMux) {
	for _, domain := range []string{"persistent", "non-persistent"} {
		ns := "/admin/v2/" + domain + "/{tenant}/{namespace}"
		tp := ns + "/{topic}"
		mux.HandleFunc("GET "+ns, a.listTopics(domain))
		mux.HandleFunc("GET "+ns+"/partitioned", a.listPartitioned(domain))
		own := func(pattern string, h topicHandler) { mux.HandleFunc(pattern, a.routed(domain, h)) }
		here := func(pattern string, h topicHandler) { mux.HandleFunc(pattern, a.parsed(domain, h)) }
		own("PUT "+tp, a.createTopic)
		own("DELETE "+tp, a.deleteTopic)
		here("POST "+tp+"/partitions", a.updatePartitions)
		here("DELETE "+tp+"/partitions", a.deletePartitioned)
		own("POST "+tp+"/terminate", a.terminate)
		own("GET "+tp+"/properties", a.getTopicProperties)
		own("PUT "+tp+"/properties", a.updateTopicProperties)
		own("DELETE "+tp+"/properties", a.removeTopicProperty)
		own("GET "+tp+"/lastMessageId", a.lastMessageID)
		own("GET "+tp+"/messageid/{timestamp}", a.messageIDByTimestamp)
		own("GET "+tp+"/stats", a.topicStats)
		here("GET "+tp+"/partitioned-stats", a.partitionedStats)
		own("GET "+tp+"/internalStats", a.internalStats)
		own("GET "+tp+"/ledger/{ledger}/entry/{entry}", a.messageByID)
		own("GET "+tp+"/examinemessage", a.examineMessage)
		a.registerSubscriptions(tp, own)
		a.registerCompaction(tp, own)
		a.registerOffload(tp, own)
		a.registerTopicPolicies(tp, here)
	}
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/unload", a.unloadTopic)
}

func (a *brokerAPI) listTopics(domain string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		topics, err := a.b.DomainTopics(r.Context(), domain, r.PathValue("tenant"), r.PathValue("namespace"))
		a.answer(w, r, topics, err)
	}
}

func (a *brokerAPI) listPartitioned(domain string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		topics, err := a.b.PartitionedTopics(r.Context(), domain, r.PathValue("tenant"), r.PathValue("namespace"))
		a.answer(w, r, topics, err)
	}
}

// createTopic creates a non-partitioned topic (its managed ledger).
// createTopic creates a non-partitioned topic; a body, if any, is the
// topic's properties (pulsaradmin's CreateWithProperties).
func (a *brokerAPI) createTopic(w http.ResponseWriter, r *http.Request, name string) {
	var props map[string]string
	if err := decodeBody(w, r, "properties", &props); err != nil && !errors.Is(err, errNoBody) {
		a.done(w, r, err)
		return
	}
	a.done(w, r, a.b.CreateTopic(r.Context(), name, props))
}

// Topic properties: GET answers them ({} when none), PUT merges a JSON
// object of them in, DELETE ?key= removes one.
func (a *brokerAPI) getTopicProperties(w http.ResponseWriter, r *http.Request, name string) {
	p, err := a.b.TopicProperties(r.Context(), name)
	a.answer(w, r, orEmptyMap(p), err)
}

func (a *brokerAPI) updateTopicProperties(w http.ResponseWriter, r *http.Request, name string) {
	var props map[string]string
	if err := requireBody(w, r, "properties", &props); err != nil {
		a.done(w, r, err)
		return
	}
	a.done(w, r, a.b.UpdateTopicProperties(r.Context(), name, props, nil))
}

func (a *brokerAPI) removeTopicProperty(w http.ResponseWriter, r *http.Request, name string) {
	key := r.URL.Query().Get("key")
	if key == "" {
		a.done(w, r, BadRequest("key", "name the property to remove with ?key="))
		return
	}
	a.done(w, r, a.b.UpdateTopicProperties(r.Context(), name, nil, []string{key}))
}

func (a *brokerAPI) deleteTopic(w http.ResponseWriter, r *http.Request, name string) {
	a.done(w, r, a.b.DeleteTopic(r.Context(), name, r.URL.Query().Get("force") == "true"))
}

// updatePartitions raises a partitioned topic's partition count (the
// body is the new count); it can only grow.
func (a *brokerAPI) updatePartitions(w http.ResponseWriter, r *http.Request, name string) {
	n, err := decodePartitionCount(r.Body)
	if err == nil {
		err = a.b.UpdatePartitions(r.Context(), name, n)
	}
	a.done(w, r, err)
}

func (a *brokerAPI) deletePartitioned(w http.ResponseWriter, r *http.Request, name string) {
	a.done(w, r, a.b.DeletePartitioned(r.Context(), name, r.URL.Query().Get("force") == "true"))
}

func (a *brokerAPI) terminate(w http.ResponseWriter, r *http.Request, name string) {
	id, err := a.b.Terminate(r.Context(), name)
	a.answer(w, r, id, err)
}

func (a *brokerAPI) lastMessageID(w http.ResponseWriter, r *http.Request, name string) {
	id, err := a.b.LastMessageID(r.Context(), name)
	a.answer(w, r, id, err)
}

func (a *brokerAPI) messageIDByTimestamp(w http.ResponseWriter, r *http.Request, name string) {
	ts, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil || ts < 0 {
		a.fail(w, r, Errorf(ErrBadRequest, "timestamp %q: want milliseconds since the epoch", r.PathValue("timestamp")))
		return
	}
	id, err := a.b.MessageIDByTimestamp(r.Context(), name, ts)
	a.answer(w, r, id, err)
}

func (a *brokerAPI) topicStats(w http.ResponseWriter, r *http.Request, name string) {
	st, err := a.b.TopicStats(r.Context(), name)
	exclude(r, &st)
	a.answer(w, r, st, err)
}

func (a *brokerAPI) partitionedStats(w http.ResponseWriter, r *http.Request, name string) {
	st, err := a.b.PartitionedStats(r.Context(), name)
	if r.URL.Query().Get("perPartition") == "false" {
		st.Partitions = nil
	}
	exclude(r, &st.TopicStats)
	for p, ps := range st.Partitions {
		exclude(r, &ps)
		st.Partitions[p] = ps
	}
	a.answer(w, r, st, err)
}

// exclude applies the stats options excludePublishers and
// excludeConsumers (Pulsar's GetStatsOptions): the lists are left empty.
func exclude(r *http.Request, st *TopicStats) {
	q := r.URL.Query()
	if q.Get("excludePublishers") == "true" {
		st.Publishers = []PublisherStats{}
	}
	if q.Get("excludeConsumers") == "true" {
		for name, sub := range st.Subscriptions {
			sub.Consumers = []ConsumerStats{}
			st.Subscriptions[name] = sub
		}
	}
}

func (a *brokerAPI) internalStats(w http.ResponseWriter, r *http.Request, name string) {
	st, err := a.b.InternalStats(r.Context(), name)
	a.answer(w, r, st, err)
}

// unloadTopic closes one topic here (its clients reconnect and it loads
// again); for a topic owned elsewhere the request is redirected.
func (a *brokerAPI) unloadTopic(w http.ResponseWriter, r *http.Request) {
	name, ok := a.pathTopic(w, r)
	if !ok {
		return
	}
	if res, err := a.b.LookupTopic(r.Context(), name, r.URL.Query().Get("authoritative") == "true"); err != nil {
		WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	} else if !res.Self {
		redirectTo(w, r, webURLFor(r, res.HTTPURL, res.HTTPURLTLS), true)
		return
	}
	a.b.UnloadTopic(r.Context(), name)
	w.WriteHeader(http.StatusNoContent)
}
