package broker

// Recovery boundaries: a panic in one connection's command, in a command's
// goroutine, in an HTTP handler or in a metrics collector is a bug, but
// it must cost that connection or that request, never the process (a
// panic on a gnet event loop or in a Prometheus collector goroutine is
// otherwise fatal). Each boundary logs the panic with its stack and counts
// it in magnetar_broker_recovered_panics_total, so the bug is seen and
// fixed; the input validation in conn.go is the first line, this the
// second.

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"
)

// boundary is where a panic was recovered: the metric's boundary label.
type boundary int

const (
	boundaryCommand   boundary = iota // a frame's handler on the event loop
	boundaryGoroutine                 // a goroutine a command started
	boundaryHTTP                      // an HTTP request's handler
	boundaryMetrics                   // a metrics collector
	numBoundaries
)

var boundaryNames = [numBoundaries]string{"command", "goroutine", "http", "metrics"}

func (b boundary) String() string { return boundaryNames[b] }

// panicCounter counts recovered panics by boundary.
type panicCounter struct{ n [numBoundaries]atomic.Int64 }

func (p *panicCounter) add(b boundary)       { p.n[b].Add(1) }
func (p *panicCounter) get(b boundary) int64 { return p.n[b].Load() }

func (p *panicCounter) total() int64 {
	var sum int64
	for i := range p.n {
		sum += p.n[i].Load()
	}
	return sum
}

// recovered turns a recovered panic value into an error after logging it
// with its stack and counting it; nil if v is nil (no panic). Call it as
// `if err := b.recovered(recover(), ...); err != nil` in a deferred func.
func (b *Broker) recovered(v any, where boundary, log *slog.Logger, attrs ...any) error {
	if v == nil {
		return nil
	}
	b.panics.add(where)
	log.Error("recovered from a panic (a bug: please report it with this stack)",
		append(attrs, "boundary", where.String(), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))...)
	return fmt.Errorf("internal error (recovered panic): %v", v)
}

// goSafe runs fn on its own goroutine, one the broker's Close waits for;
// a panic in it closes the connection instead of the process.
func (c *serverConn) goSafe(what string, fn func()) {
	c.b.spawn(func() {
		defer func() {
			if err := c.b.recovered(recover(), boundaryGoroutine, c.log, "command", what); err != nil {
				c.t.Close(err)
			}
		}()
		fn()
	})
}

// recoverHTTP answers 500 for a request whose handler panicked, instead
// of net/http's reset connection and unstructured log line.
func (b *Broker) recoverHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == http.ErrAbortHandler { // net/http's own way to abort a response
				panic(v)
			}
			if err := b.recovered(v, boundaryHTTP, b.log, "method", r.Method, "path", r.URL.Path); err != nil {
				httpError(w, http.StatusInternalServerError, "internal error; the broker logged it")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// RecoveredPanics is how many panics the recovery boundaries caught since
// the broker started (the magnetar_broker_recovered_panics_total series
// summed): each one is a bug; the fuzzer against the running server
// fails on any.
func (b *Broker) RecoveredPanics() int64 { return b.panics.total() }
