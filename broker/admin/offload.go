package admin

// Offload: PUT .../{topic}/offload with a MessageId body offloads the
// ledgers before that message's (409 while one runs), GET
// .../{topic}/offload answers its OffloadStatus, as Pulsar's
// PersistentTopics resource. Served by the topic's owner (routed). A
// broker without Offloads answers 501.

import (
	"context"
	"net/http"
)

// Offloads is implemented by brokers with tiered storage.
type Offloads interface {
	TriggerOffload(ctx context.Context, name string, upTo MessageID) error
	OffloadStatus(ctx context.Context, name string) (OffloadStatus, error)
}

func (a *brokerAPI) registerOffload(tp string, own func(string, topicHandler)) {
	offloads := func(w http.ResponseWriter, r *http.Request) (Offloads, bool) {
		o, ok := a.b.(Offloads)
		if !ok {
			a.fail(w, r, Errorf(ErrNotSupported, "tiered storage offload is not supported by this broker"))
		}
		return o, ok
	}
	own("PUT "+tp+"/offload", func(w http.ResponseWriter, r *http.Request, name string) {
		o, ok := offloads(w, r)
		if !ok {
			return
		}
		id, err := messageIDBody(r)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		a.done(w, r, o.TriggerOffload(r.Context(), name, id))
	})
	own("GET "+tp+"/offload", func(w http.ResponseWriter, r *http.Request, name string) {
		o, ok := offloads(w, r)
		if !ok {
			return
		}
		st, err := o.OffloadStatus(r.Context(), name)
		a.answer(w, r, st, err)
	})
}
