// Package pebblelog is the glue between Pebble and our fail-stop storage:
// a Pebble logger that routes its lines through slog and turns Fatalf into
// a recoverable panic, and the recover that turns that panic into an error.
// Both Pebble users (metadata's local store, entrylog's index) share it.
//
// Fatalf must not return: Pebble calls it when going on would be unsafe,
// e.g. after a WAL write or sync failed during a commit. It panics with a
// Fatal. On a commit, which runs on the caller's goroutine, Recover turns
// it into an error and the store fails (fail-stop). In Pebble's background
// work (flushes, compactions) nothing can recover it and the process dies,
// as with Pebble's default logger, which exits.
package pebblelog

import (
	"context"
	"fmt"
	"log/slog"
)

// Fatal is the panic Logger.Fatalf raises. It unwraps to the first error
// among Fatalf's arguments (the I/O error, as a rule), so that errors.Is
// still finds the cause.
type Fatal struct {
	msg   string
	cause error
}

func (f Fatal) Error() string { return "pebble fatal error: " + f.msg }
func (f Fatal) Unwrap() error { return f.cause }

// Recover turns a Fatal panic on the calling goroutine into *err and lets
// any other panic go on. Use it deferred around Pebble commits.
func Recover(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(Fatal)
		if !ok {
			panic(r)
		}
		*err = f
	}
}

// Logger routes Pebble's log through slog, tagged with the component and
// the directory.
type Logger struct {
	Log       *slog.Logger
	Component string
	Dir       string
}

func (l Logger) Infof(format string, args ...any) {
	if !l.Log.Enabled(context.Background(), slog.LevelDebug) {
		return // Pebble is chatty; skip formatting what nobody keeps
	}
	l.Log.Debug(fmt.Sprintf(format, args...), "component", l.Component, "dir", l.Dir)
}

func (l Logger) Errorf(format string, args ...any) {
	l.Log.Error(fmt.Sprintf(format, args...), "component", l.Component, "dir", l.Dir)
}

func (l Logger) Fatalf(format string, args ...any) {
	f := Fatal{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			f.cause = err
			break
		}
	}
	l.Log.Error("fatal: "+f.msg, "component", l.Component, "dir", l.Dir)
	panic(f)
}
