package netio

// Accepting connections, for both the gnet server and the TLS server.
//
// netio accepts connections itself rather than letting gnet do it: gnet's
// acceptor stops its whole engine when accept fails for any reason but a
// reset (acceptor_unix.go:30-46 in v2.9.7), so a flood of connections past
// the process's descriptor limit (EMFILE) left the port refusing every
// connection for good. Here:
//   - an accept that fails for want of a descriptor sheds the newest
//     connection: the acceptor frees a spare descriptor, accepts the
//     connection the kernel holds, closes it at once (its client sees a
//     close, not a hang in the backlog) and takes the spare again;
//   - other accept errors pause the acceptor (5 ms doubling to 200 ms) and
//     it retries, as net/http does;
//   - an accepted connection past a limit is closed before any handler
//     sees it: Options.MaxConns, MaxConnsPerIP (Pulsar's
//     brokerMaxConnections, brokerMaxConnectionsPerIp), and FDHeadroom,
//     which keeps connections off the process's last descriptors so that
//     ledgers, indexes and outgoing connections can still open files during
//     a flood;
//   - refusals and accept errors are logged at most once per 10 s each,
//     with their count.
//
// Lock rules: admission.mu guards the counts and the refusal log state;
// it is a leaf lock. The acceptor's own fields belong to its goroutine.

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrConnRefused: a connection was closed as soon as it was accepted,
// because a limit (Options.MaxConns, MaxConnsPerIP, FDHeadroom, or the
// process's descriptor limit itself) was reached.
var ErrConnRefused = errors.New("netio: connection refused")

const (
	// logEvery bounds the lines about refused connections and failed
	// accepts to one per interval each: a flood must not become a flood of
	// lines.
	logEvery = 10 * time.Second
	// acceptBackoffMax bounds the pause after an accept error shedding
	// cannot clear (ENOBUFS, ENOMEM): long enough not to spin, short
	// enough that Close does not wait on it.
	acceptBackoffMax = 200 * time.Millisecond
)

// limits are the bounds admission enforces.
type limits struct {
	maxConns, maxPerIP int
	fdCeiling          int // accepted descriptors at or above it are refused (0: no check)
}

// newLimits reads the descriptor limit once, at Listen.
func newLimits(maxConns, maxPerIP, headroom int) (limits, error) {
	if maxConns < 0 || maxPerIP < 0 {
		return limits{}, errors.New("netio: negative MaxConns or MaxConnsPerIP")
	}
	ceiling, err := fdCeiling(headroom)
	return limits{maxConns: maxConns, maxPerIP: maxPerIP, fdCeiling: ceiling}, err
}

// fdCeiling is the lowest descriptor a connection may not keep: the
// process's RLIMIT_NOFILE less the headroom (0: no check).
func fdCeiling(headroom int) (int, error) {
	if headroom < 0 {
		return 0, nil
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("netio: read RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur == unix.RLIM_INFINITY || lim.Cur > 1<<30 {
		return 0, nil
	}
	if headroom == 0 {
		headroom = defaultFDHeadroom(lim.Cur)
	}
	return max(int(lim.Cur)-headroom, 1), nil
}

// admission counts the open connections of one listener against its
// limits.
type admission struct {
	lim limits
	log *slog.Logger

	mu      sync.Mutex
	open    int            // guarded by mu: admitted and not released
	perIP   map[string]int // guarded by mu: open per remote IP, when maxPerIP is set
	refused int            // guarded by mu: refused since the last log line
	lastLog time.Time      // guarded by mu: when the last refusal line was written
}

func newAdmission(lim limits, log *slog.Logger) *admission {
	return &admission{lim: lim, log: log, perIP: make(map[string]int)}
}

// admit takes a slot for a connection from remote on descriptor fd, or
// says why it may not stay. Linux hands out the lowest free descriptor, so
// an accepted descriptor at or above the ceiling means at least that many
// are open: the check costs nothing and keeps connections out of the
// headroom whatever else holds descriptors.
func (a *admission) admit(remote net.Addr, fd int) error {
	ip := remoteIP(remote)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.lim.fdCeiling > 0 && fd >= a.lim.fdCeiling:
		return fmt.Errorf("%w: %d file descriptors open, the limit less the headroom is %d",
			ErrConnRefused, fd, a.lim.fdCeiling)
	case a.lim.maxConns > 0 && a.open >= a.lim.maxConns:
		return fmt.Errorf("%w: %d connections open (limit %d)", ErrConnRefused, a.open, a.lim.maxConns)
	case a.lim.maxPerIP > 0 && a.perIP[ip] >= a.lim.maxPerIP:
		return fmt.Errorf("%w: %d connections open from %s (limit %d)",
			ErrConnRefused, a.perIP[ip], ip, a.lim.maxPerIP)
	}
	a.open++
	if a.lim.maxPerIP > 0 {
		a.perIP[ip]++
	}
	return nil
}

// release gives back an admitted connection's slot.
func (a *admission) release(remote net.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.open--
	if a.lim.maxPerIP > 0 {
		ip := remoteIP(remote)
		if a.perIP[ip]--; a.perIP[ip] <= 0 {
			delete(a.perIP, ip)
		}
	}
}

// noteRefused logs refusals, one line per logEvery with their count.
func (a *admission) noteRefused(now time.Time, what string, reason error) {
	a.mu.Lock()
	a.refused++
	if now.Sub(a.lastLog) < logEvery {
		a.mu.Unlock()
		return
	}
	n := a.refused
	a.refused, a.lastLog = 0, now
	a.mu.Unlock()
	a.log.Warn("netio: refusing new connections", "listener", what, "refused", n, "reason", reason.Error())
}

// acceptor runs one listener's accept loop.
type acceptor struct {
	ln   net.Listener
	adm  *admission
	what string // the listener, for log lines

	spareFD  int // a descriptor held for EMFILE (-1: none), see shed
	errCount int // accept errors since the last line
	errLog   time.Time
}

func newAcceptor(ln net.Listener, adm *admission, what string) *acceptor {
	return &acceptor{ln: ln, adm: adm, what: what, spareFD: openSpareFD()}
}

// run accepts until the listener is closed, handing each admitted
// connection to serve, which must release its slot when it is gone (or at
// once, if it cannot serve it). Nothing but closing the listener stops it.
func (a *acceptor) run(serve func(nc net.Conn)) {
	defer a.closeSpare()
	var backoff time.Duration
	for {
		nc, err := a.ln.Accept()
		if err == nil {
			backoff = 0
			if err := a.adm.admit(nc.RemoteAddr(), connFD(nc)); err != nil {
				// Noted before the close, so the line is written by the
				// time the client sees its connection end.
				a.adm.noteRefused(time.Now(), a.what, err)
				nc.Close()
				continue
			}
			serve(nc)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		a.noteError(time.Now(), err)
		if isOutOfFDs(err) && a.shed() {
			continue
		}
		backoff = min(max(2*backoff, 5*time.Millisecond), acceptBackoffMax)
		time.Sleep(backoff)
	}
}

// shed closes the newest connection when accept failed for want of a
// descriptor (see the file comment). It reports whether one was shed;
// without a spare it only tries to take one again.
func (a *acceptor) shed() bool {
	if a.spareFD < 0 {
		a.spareFD = openSpareFD()
		return false
	}
	a.closeSpare()
	nc, err := a.ln.Accept()
	if err == nil {
		nc.Close()
		a.adm.noteRefused(time.Now(), a.what, fmt.Errorf("%w: the process is out of file descriptors", ErrConnRefused))
	}
	a.spareFD = openSpareFD()
	return err == nil
}

// noteError logs failed accepts, one line per logEvery with their count.
func (a *acceptor) noteError(now time.Time, err error) {
	a.errCount++
	if now.Sub(a.errLog) < logEvery {
		return
	}
	a.adm.log.Error("netio: accept failed", "listener", a.what, "failures", a.errCount, "err", err.Error())
	a.errCount, a.errLog = 0, now
}

func (a *acceptor) closeSpare() {
	if a.spareFD >= 0 {
		unix.Close(a.spareFD)
		a.spareFD = -1
	}
}

func isOutOfFDs(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// openSpareFD opens the descriptor shed frees (-1 if it cannot: shedding
// is then skipped until it can).
func openSpareFD() int {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// connFD is nc's descriptor (-1 if it has none).
func connFD(nc net.Conn) int {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return -1
	}
	return fd
}

func remoteIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return a.String()
}
