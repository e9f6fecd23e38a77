package admin

// Compaction: PUT .../{topic}/compaction starts one (409 while one runs),
// GET .../{topic}/compaction answers its LongRunningStatus, as Pulsar's
// PersistentTopics resource. Served by the topic's owner (routed). A
// broker without Compactions answers 501.

import (
	"context"
	"net/http"
)

// Compactions is implemented by brokers that compact topics.
type Compactions interface {
	TriggerCompaction(ctx context.Context, name string) error
	CompactionStatus(ctx context.Context, name string) (LongRunningStatus, error)
}

func (a *brokerAPI) registerCompaction(tp string, own func(string, topicHandler)) {
	own("PUT "+tp+"/compaction", func(w http.ResponseWriter, r *http.Request, name string) {
		c, ok := a.b.(Compactions)
		if !ok {
			a.fail(w, r, Errorf(ErrNotSupported, "topic compaction is not supported by this broker"))
			return
		}
		a.done(w, r, c.TriggerCompaction(r.Context(), name))
	})
	own("GET "+tp+"/compaction", func(w http.ResponseWriter, r *http.Request, name string) {
		c, ok := a.b.(Compactions)
		if !ok {
			a.fail(w, r, Errorf(ErrNotSupported, "topic compaction is not supported by this broker"))
			return
		}
		st, err := c.CompactionStatus(r.Context(), name)
		a.answer(w, r, st, err)
	})
}
