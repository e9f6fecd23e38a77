package admin

// Transactions: Pulsar's /admin/v3/transactions resource (pulsar-admin
// transactions):
//
//	GET /admin/v3/transactions/coordinatorStats                  (?coordinatorId=)
//	GET /admin/v3/transactions/transactionMetadata/{most}/{least}
//	GET /admin/v3/transactions/slowTransactions/{timeout}        (ms; ?coordinatorId=)
//	POST /admin/v3/transactions/abortTransaction/{most}/{least}
//	POST /admin/v3/transactions/transactionCoordinator/replicas             (body: the number)
//	GET /admin/v3/transactions/transactionBufferStats/{domain}/{tenant}/{namespace}/{topic}
//	GET /admin/v3/transactions/pendingAckStats/{domain}/{tenant}/{namespace}/{topic}/{subName}
//	GET /admin/v3/transactions/transactionInBufferStats/{domain}/{tenant}/{namespace}/{topic}/{most}/{least}
//	GET /admin/v3/transactions/transactionInPendingAckStats/{domain}/{tenant}/{namespace}/{topic}/{subName}/{most}/{least}
//
// Calls about one transaction go to the broker hosting its coordinator
// (the owner of transaction_coordinator_assign-partition-{most}); calls
// about a topic to the topic's owner (307 elsewhere). coordinatorStats and
// slowTransactions without coordinatorId cover the coordinators this
// broker hosts. A broker without transactions answers 503, as Pulsar's
// ("Transaction coordinator is not enabled" style errors).

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Transactions is implemented by brokers with transactions.
type Transactions interface {
	CoordinatorStats(ctx context.Context, id *uint64) (map[string]CoordinatorStats, error)
	TransactionMetadata(ctx context.Context, most, least uint64) (TxnMetadata, error)
	AbortTransaction(ctx context.Context, most, least uint64) error
	// ScaleCoordinators raises the number of coordinators (never lowers
	// it: the transactions of a removed one would be lost).
	ScaleCoordinators(ctx context.Context, n int) error
	SlowTransactions(ctx context.Context, olderThan time.Duration, id *uint64) (map[string]TxnMetadata, error)
	TransactionBufferStats(ctx context.Context, topic string) (TxnBufferStats, error)
	PendingAckStats(ctx context.Context, topic, sub string) (PendingAckStats, error)
	TransactionInBufferStats(ctx context.Context, topic string, most, least uint64) (TxnInBufferStats, error)
	TransactionInPendingAckStats(ctx context.Context, topic, sub string, most, least uint64) (TxnInPendingAckStats, error)
	// CoordinatorTopic names the assign partition of coordinator id (for
	// routing).
	CoordinatorTopic(id uint64) string
}

// CoordinatorStats is Pulsar's TransactionCoordinatorStats.
type CoordinatorStats struct {
	State            string `json:"state"`
	LeastSigBits     uint64 `json:"leastSigBits"`
	LowWaterMark     uint64 `json:"lowWaterMark"`
	OngoingTxnSize   int    `json:"ongoingTxnSize"`
	RecoverStartTime int64  `json:"recoverStartTime"`
	RecoverEndTime   int64  `json:"recoverEndTime"`
}

// TxnMetadata is Pulsar's TransactionMetadata.
type TxnMetadata struct {
	TxnID              string                                     `json:"txnId"`
	Status             string                                     `json:"status"`
	OpenTimestamp      int64                                      `json:"openTimestamp"`
	TimeoutAt          int64                                      `json:"timeoutAt"`
	ProducedPartitions map[string]TxnInBufferStats                `json:"producedPartitions"`
	AckedPartitions    map[string]map[string]TxnInPendingAckStats `json:"ackedPartitions"`
}

// TxnInBufferStats is Pulsar's TransactionInBufferStats.
type TxnInBufferStats struct {
	StartPosition string `json:"startPosition,omitempty"`
	Aborted       bool   `json:"aborted"`
}

// TxnInPendingAckStats is Pulsar's TransactionInPendingAckStats.
type TxnInPendingAckStats struct {
	CumulativeAckPosition string `json:"cumulativeAckPosition,omitempty"`
}

// TxnBufferStats is Pulsar's TransactionBufferStats.
type TxnBufferStats struct {
	State                  string `json:"state"`
	MaxReadPosition        string `json:"maxReadPosition"`
	LastSnapshotTimestamps int64  `json:"lastSnapshotTimestamps"`
	OngoingTxnSize         int64  `json:"ongoingTxnSize"`
	AbortedTxnSize         int64  `json:"abortedTxnSize"`
	CommittedTxnCount      int64  `json:"committedTxnCount"`
	AbortedTxnCount        int64  `json:"abortedTxnCount"`
}

// PendingAckStats is Pulsar's TransactionPendingAckStats.
type PendingAckStats struct {
	State          string `json:"state"`
	OngoingTxnSize int64  `json:"ongoingTxnSize"`
}

func (a *brokerAPI) registerTransactions(mux *http.ServeMux) {
	const base = "/admin/v3/transactions/"
	txns := func(w http.ResponseWriter, r *http.Request) (Transactions, bool) {
		t, ok := a.b.(Transactions)
		if !ok {
			a.fail(w, r, Errorf(ErrNotSupported, "transactions are not supported by this broker"))
		}
		return t, ok
	}
	mux.HandleFunc("GET "+base+"coordinatorStats", func(w http.ResponseWriter, r *http.Request) {
		if t, ok := txns(w, r); ok {
			a.byCoordinator(w, r, t, func(id *uint64) (any, error) {
				st, err := t.CoordinatorStats(r.Context(), id)
				if id != nil && err == nil {
					return st[strconv.FormatUint(*id, 10)], nil
				}
				return st, err
			})
		}
	})
	mux.HandleFunc("GET "+base+"slowTransactions/{timeout}", func(w http.ResponseWriter, r *http.Request) {
		t, ok := txns(w, r)
		if !ok {
			return
		}
		ms, err := strconv.ParseInt(r.PathValue("timeout"), 10, 64)
		if err != nil || ms < 0 {
			a.fail(w, r, BadRequest("timeout", "%q is not a number of milliseconds", r.PathValue("timeout")))
			return
		}
		a.byCoordinator(w, r, t, func(id *uint64) (any, error) {
			return t.SlowTransactions(r.Context(), time.Duration(ms)*time.Millisecond, id)
		})
	})
	mux.HandleFunc("GET "+base+"transactionMetadata/{most}/{least}", func(w http.ResponseWriter, r *http.Request) {
		t, ok := txns(w, r)
		if !ok {
			return
		}
		most, least, err := txnIDOfPath(r)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		a.routedTo(w, r, t.CoordinatorTopic(most), func() {
			m, err := t.TransactionMetadata(r.Context(), most, least)
			a.answer(w, r, m, err)
		})
	})
	mux.HandleFunc("POST "+base+"abortTransaction/{most}/{least}", func(w http.ResponseWriter, r *http.Request) {
		t, ok := txns(w, r)
		if !ok {
			return
		}
		most, least, err := txnIDOfPath(r)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		a.routedTo(w, r, t.CoordinatorTopic(most), func() { a.done(w, r, t.AbortTransaction(r.Context(), most, least)) })
	})
	mux.HandleFunc("POST "+base+"transactionCoordinator/replicas", func(w http.ResponseWriter, r *http.Request) {
		t, ok := txns(w, r)
		if !ok {
			return
		}
		var n int
		if err := json.NewDecoder(io.LimitReader(r.Body, 64)).Decode(&n); err != nil || n < 1 {
			a.fail(w, r, BadRequest("replicas", "the body must be a number of coordinators, at least 1"))
			return
		}
		a.done(w, r, t.ScaleCoordinators(r.Context(), n))
	})
	a.registerTopicTransactions(mux, base, txns)
}

func (a *brokerAPI) registerTopicTransactions(mux *http.ServeMux, base string, txns func(http.ResponseWriter, *http.Request) (Transactions, bool)) {
	const tp = "{domain}/{tenant}/{namespace}/{topic}"
	topicRoute := func(pattern string, h func(Transactions, http.ResponseWriter, *http.Request, string)) {
		mux.HandleFunc("GET "+base+pattern, a.routed("", func(w http.ResponseWriter, r *http.Request, name string) {
			if t, ok := txns(w, r); ok {
				h(t, w, r, name)
			}
		}))
	}
	topicRoute("transactionBufferStats/"+tp, func(t Transactions, w http.ResponseWriter, r *http.Request, name string) {
		st, err := t.TransactionBufferStats(r.Context(), name)
		a.answer(w, r, st, err)
	})
	topicRoute("pendingAckStats/"+tp+"/{subName}", func(t Transactions, w http.ResponseWriter, r *http.Request, name string) {
		st, err := t.PendingAckStats(r.Context(), name, r.PathValue("subName"))
		a.answer(w, r, st, err)
	})
	// withTxnID answers a route whose path ends with a transaction id.
	withTxnID := func(serve func(t Transactions, r *http.Request, name string, most, least uint64) (any, error)) func(Transactions, http.ResponseWriter, *http.Request, string) {
		return func(t Transactions, w http.ResponseWriter, r *http.Request, name string) {
			most, least, err := txnIDOfPath(r)
			if err != nil {
				a.fail(w, r, err)
				return
			}
			st, err := serve(t, r, name, most, least)
			a.answer(w, r, st, err)
		}
	}
	topicRoute("transactionInBufferStats/"+tp+"/{most}/{least}", withTxnID(func(t Transactions, r *http.Request, name string, most, least uint64) (any, error) {
		return t.TransactionInBufferStats(r.Context(), name, most, least)
	}))
	topicRoute("transactionInPendingAckStats/"+tp+"/{subName}/{most}/{least}", withTxnID(func(t Transactions, r *http.Request, name string, most, least uint64) (any, error) {
		return t.TransactionInPendingAckStats(r.Context(), name, r.PathValue("subName"), most, least)
	}))
}

// byCoordinator serves a call for one coordinator (?coordinatorId=, on
// its broker) or for those hosted here.
func (a *brokerAPI) byCoordinator(w http.ResponseWriter, r *http.Request, t Transactions, serve func(*uint64) (any, error)) {
	raw := r.URL.Query().Get("coordinatorId")
	if raw == "" {
		v, err := serve(nil)
		a.answer(w, r, v, err)
		return
	}
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		a.fail(w, r, BadRequest("coordinatorId", "%q is not a coordinator id", raw))
		return
	}
	a.routedTo(w, r, t.CoordinatorTopic(id), func() {
		v, err := serve(&id)
		a.answer(w, r, v, err)
	})
}

// routedTo runs serve here if this broker owns topic, else redirects it
// there (307); routed uses it for the topic of the path.
func (a *brokerAPI) routedTo(w http.ResponseWriter, r *http.Request, topic string, serve func()) {
	res, err := a.b.LookupTopic(r.Context(), topic, r.URL.Query().Get("authoritative") == "true")
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if !res.Self {
		redirectTo(w, r, webURLFor(r, res.HTTPURL, res.HTTPURLTLS), true)
		return
	}
	serve()
}

func txnIDOfPath(r *http.Request) (most, least uint64, err error) {
	most, err1 := strconv.ParseUint(r.PathValue("most"), 10, 64)
	least, err2 := strconv.ParseUint(r.PathValue("least"), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, BadRequest("transaction id", "%q/%q are not the id's most and least bits", r.PathValue("most"), r.PathValue("least"))
	}
	return most, least, nil
}
