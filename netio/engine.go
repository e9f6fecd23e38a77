package netio

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// engineHandler adapts a Server to gnet's EventHandler, keeping gnet's
// methods off Server's API.
type engineHandler struct {
	gnet.BuiltinEventEngine
	s *Server
}

// OnTick runs on gnet's ticker goroutine.
func (e *engineHandler) OnTick() (time.Duration, gnet.Action) {
	s := e.s
	if s.opts.IdleTimeout > 0 {
		s.closeIdle(time.Now())
	}
	return s.tickInterval(), gnet.None
}

// OnOpen creates the Conn (the acceptor admitted it). Writes the handler
// makes here are queued and written after it returns.
func (e *engineHandler) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	c := newConn(e.s, gc)
	e.s.track(c)
	gc.SetContext(c)
	c.holdFlush()
	e.s.h.OnOpen(c)
	c.flush()
	return nil, gnet.None
}

// OnTraffic delivers the whole frames buffered, then writes what was
// queued meanwhile (the handler's replies included) in one writev.
func (e *engineHandler) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.Close
	}
	if e.s.opts.IdleTimeout > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	c.holdFlush()
	err := drainFrames(gc, e.s.opts.MaxFrameSize, c)
	c.flush()
	if err == nil {
		err = c.checkInbound()
	}
	if err != nil {
		c.setReason(err)
		return gnet.Close
	}
	return gnet.None
}

// OnClose marks the connection closed, fails the writes still queued, logs
// the reason once, and tells the handler.
func (e *engineHandler) OnClose(gc gnet.Conn, gnetErr error) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.None
	}
	c.mu.Lock()
	c.closed = true
	c.closing.Store(true)
	reason := c.closeReasonLocked(gnetErr)
	local := c.reason != nil
	dones := c.failQueueLocked()
	c.updateCongestionLocked() // wakes Drained waiters
	c.mu.Unlock()
	// Writers that found the connection open may still be making their
	// kick: the loop must not exit (closing its eventfd) before they do.
	c.kicks.Wait()

	for _, done := range dones {
		done(ErrConnClosed)
	}
	e.s.logClose(c, reason, local)
	e.s.releaseSlot(c)
	e.s.h.OnClose(c, reason)
	e.s.forget(c)
	return gnet.None
}

// logClose writes the connection's one close line: at Info when we chose to
// close it (handler error, limit, Close), at Debug when the peer did or the
// server is stopping.
func (s *Server) logClose(c *Conn, reason error, local bool) {
	level := slog.LevelDebug
	if local {
		level = slog.LevelInfo
	}
	s.log.Log(context.Background(), level, "netio: connection closed",
		"remote", fmt.Sprint(c.remote), "reason", reason.Error())
}

// gnetLogger sends gnet's messages to slog. gnet's Info lines are startup
// chatter, so they go to Debug; while the server stops, its errors are the
// listener shut down on purpose (Accept fails, the reactor exits), so they
// go to Debug too.
type gnetLogger struct {
	l        *slog.Logger
	stopping *atomic.Bool
}

func (g gnetLogger) logf(level slog.Level, format string, args []any) {
	if level > slog.LevelDebug && g.stopping != nil && g.stopping.Load() {
		level = slog.LevelDebug
	}
	if g.l.Enabled(context.Background(), level) {
		g.l.Log(context.Background(), level, "gnet: "+fmt.Sprintf(format, args...))
	}
}

func (g gnetLogger) Debugf(format string, args ...any) { g.logf(slog.LevelDebug, format, args) }
func (g gnetLogger) Infof(format string, args ...any)  { g.logf(slog.LevelDebug, format, args) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.logf(slog.LevelWarn, format, args) }
func (g gnetLogger) Errorf(format string, args ...any) { g.logf(slog.LevelError, format, args) }
func (g gnetLogger) Fatalf(format string, args ...any) { g.logf(slog.LevelError, format, args) }
