// Package faultstore wraps a metadata.Store and injects faults, so the
// packages above it can test what a slow, failing or lagging metadata
// store does to them: a delay before an operation, an error instead of
// it, or a read answered with the node's value from before the last
// write (a lagging ZooKeeper follower). Faults are chosen per operation
// by an Injector: by operation index (for failure sweeps), by path
// pattern, or at random with a seed, as engine/errorfs does for files.
//
// The wrapper counts every operation from 0 (Ops), so a sweep can fail
// operation 0, 1, 2, ... until a run succeeds.
package faultstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Op is a kind of store operation.
type Op uint8

// The operations faults can be injected into.
const (
	OpGet Op = iota
	OpPut
	OpCreate
	OpDelete
	OpChildren
	OpExists
	OpWatch
	numOps
)

var opNames = [...]string{"get", "put", "create", "delete", "children", "exists", "watch"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Reads are the operations a Stale fault applies to.
var Reads = []Op{OpGet, OpExists, OpChildren}

// Writes are the operations that change nodes.
var Writes = []Op{OpPut, OpCreate, OpDelete}

// ErrInjected matches every injected error (errors.Is).
var ErrInjected = errors.New("injected metadata fault")

// Fault is what to inject. Delay applies first (bounded by the call's
// context); then Stale or Fail, if set.
type Fault struct {
	// Delay holds the operation back this long before it runs.
	Delay time.Duration
	// Fail makes the operation fail with Err without running it.
	Fail bool
	// Err is the error a failing operation returns, wrapped in an
	// *InjectedError (default: none, only ErrInjected matches), e.g.
	// metadata.ErrSessionLost.
	Err error
	// Stale, for reads, answers with the node as it was before the last
	// write made through this wrapper (absent if that write created it),
	// as a lagging follower would. Paths never written through the
	// wrapper read normally.
	Stale bool
}

// InjectedError is the error an injected failure returns. It matches
// ErrInjected and unwraps to the fault's Err.
type InjectedError struct {
	Op    Op
	Path  string
	Index int64 // the operation's index in this store
	Err   error
}

func (e *InjectedError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("metadata %s %s: injected fault at op #%d", e.Op, e.Path, e.Index)
	}
	return fmt.Sprintf("metadata %s %s: %v (injected fault at op #%d)", e.Op, e.Path, e.Err, e.Index)
}
func (e *InjectedError) Unwrap() error        { return e.Err }
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// Injector decides, for each operation, whether it gets a fault. index
// counts every operation of the store from 0.
type Injector interface {
	Inject(op Op, path string, index int64) (Fault, bool)
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, path string, index int64) (Fault, bool)

// Inject implements Injector.
func (f InjectorFunc) Inject(op Op, path string, index int64) (Fault, bool) {
	return f(op, path, index)
}

// None injects nothing (a pass-through wrapper that still counts ops).
var None = InjectorFunc(func(Op, string, int64) (Fault, bool) { return Fault{}, false })

// AtIndex injects fault into the operation with index n (and only it).
func AtIndex(n int64, fault Fault) Injector {
	return InjectorFunc(func(_ Op, _ string, index int64) (Fault, bool) { return fault, index == n })
}

// OnPath injects fault into operations of the given kinds (all kinds
// when none are given) on paths that pattern matches: path.Match over
// the whole path ("*" is one segment or part of one), or pattern is the
// path or one of its ancestors.
func OnPath(pattern string, fault Fault, ops ...Op) Injector {
	return InjectorFunc(func(op Op, p string, _ int64) (Fault, bool) {
		if len(ops) > 0 && !containsOp(ops, op) {
			return Fault{}, false
		}
		return fault, Matches(pattern, p)
	})
}

// Matches reports whether pattern (as OnPath takes it) matches p.
func Matches(pattern, p string) bool {
	if ok, _ := path.Match(pattern, p); ok {
		return true
	}
	return p == pattern || strings.HasPrefix(p, strings.TrimSuffix(pattern, "/")+"/")
}

func containsOp(ops []Op, op Op) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// Random injects fault into each operation with probability p,
// reproducibly for a seed (given the same order of operations).
func Random(seed uint64, p float64, fault Fault) Injector {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return InjectorFunc(func(Op, string, int64) (Fault, bool) {
		mu.Lock()
		defer mu.Unlock()
		return fault, rng.Float64() < p
	})
}

// Times passes on at most n of inj's faults, then injects nothing.
func Times(n int64, inj Injector) Injector {
	var left atomic.Int64
	left.Store(n)
	return InjectorFunc(func(op Op, p string, index int64) (Fault, bool) {
		f, ok := inj.Inject(op, p, index)
		if !ok || left.Add(-1) < 0 {
			return Fault{}, false
		}
		return f, true
	})
}

// Any asks each injector in turn and takes the first fault.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(op Op, p string, index int64) (Fault, bool) {
		for _, inj := range injs {
			if f, ok := inj.Inject(op, p, index); ok {
				return f, true
			}
		}
		return Fault{}, false
	})
}

// Toggle wraps an injector so tests can switch it on and off.
type Toggle struct {
	Injector
	on atomic.Bool
}

// NewToggle returns a Toggle, initially on.
func NewToggle(inj Injector) *Toggle {
	t := &Toggle{Injector: inj}
	t.on.Store(true)
	return t
}

// Set turns injection on or off.
func (t *Toggle) Set(on bool) { t.on.Store(on) }

// Inject implements Injector.
func (t *Toggle) Inject(op Op, path string, index int64) (Fault, bool) {
	if !t.on.Load() {
		return Fault{}, false
	}
	return t.Injector.Inject(op, path, index)
}
