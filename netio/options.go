package netio

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Errors. Close reasons wrap these with the details (sizes, limits); test
// with errors.Is.
var (
	// ErrFrameTooLarge: a size prefix above Options.MaxFrameSize.
	ErrFrameTooLarge = errors.New("netio: frame too large")
	// ErrEmptyFrame: a size prefix of 0.
	ErrEmptyFrame = errors.New("netio: frame of size 0")
	// ErrBackPressureIgnored: the client kept sending while reading was
	// paused until the inbound buffer passed Options.MaxInboundBuffered.
	ErrBackPressureIgnored = errors.New("netio: client ignored back-pressure")
	// ErrIdleTimeout: nothing was read for Options.IdleTimeout.
	ErrIdleTimeout = errors.New("netio: idle timeout")
	// ErrConnClosed: the connection is closed (writes after close, and
	// writes still queued when it closed).
	ErrConnClosed = errors.New("netio: connection closed")
	// ErrClosedLocally is the reason for Conn.Close(nil).
	ErrClosedLocally = errors.New("netio: closed by server")
	// ErrServerClosed: Server.Close closed the connection.
	ErrServerClosed = errors.New("netio: server closed")
)

// Limits and defaults.
const (
	// DefaultMaxFrameSize is Pulsar's default maxMessageSize (5 MiB) plus
	// the 10 KiB clients allow for the command and headers.
	DefaultMaxFrameSize = 5<<20 + 10<<10
	// DefaultWriteBufferHighWater is the default congestion threshold.
	DefaultWriteBufferHighWater = 1 << 20

	frameHeaderLen = 4
	// maxFrameSizeLimit keeps 4+size inside an int32-sized length on
	// every platform gnet supports.
	maxFrameSizeLimit = 1<<31 - 1 - frameHeaderLen
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// Addr is where to listen: "tcp://127.0.0.1:6650" or "127.0.0.1:6650"
	// (tcp is assumed); port 0 picks a free port (see Server.Addr).
	// Required.
	Addr string
	// Multicore runs one event loop per CPU; otherwise one loop.
	Multicore bool
	// NumEventLoop, when positive, sets the number of loops (overrides
	// Multicore).
	NumEventLoop int
	// MaxFrameSize bounds a frame's size prefix (default
	// DefaultMaxFrameSize); larger frames close the connection.
	MaxFrameSize int
	// MaxInboundBuffered bounds what gnet may hold for a connection whose
	// reading is paused (default 2*MaxFrameSize + 1 MiB).
	MaxInboundBuffered int
	// ReadBufferCap is the size of each loop's read buffer: how much one
	// read(2) takes (gnet rounds it up to a power of two; default 64 KiB).
	ReadBufferCap int
	// WriteBufferHighWater is the Pending level above which a connection
	// is Congested (default DefaultWriteBufferHighWater); it is drained
	// again at half of it.
	WriteBufferHighWater int
	// IdleTimeout, when positive, closes connections that sent nothing for
	// that long. Only reads count: a client that only receives must ping.
	IdleTimeout time.Duration
	// MaxConns, when positive, bounds the open connections: a connection
	// past it is closed as soon as it is accepted (Pulsar's
	// brokerMaxConnections).
	MaxConns int
	// MaxConnsPerIP, when positive, bounds the open connections from one
	// remote address the same way (brokerMaxConnectionsPerIp).
	MaxConnsPerIP int
	// FDHeadroom is how many file descriptors below the process's
	// RLIMIT_NOFILE connections may never take, so that ledgers, indexes
	// and outgoing connections can still open files during a connection
	// flood (default: a tenth of the limit, at least 64, at most 4096;
	// negative: none). A connection accepted on a descriptor inside the
	// headroom is closed at once.
	FDHeadroom int
	// Logger gets one line per closed connection and gnet's own messages
	// (default slog.Default()).
	Logger *slog.Logger
}

// defaultFDHeadroom is FDHeadroom's default for a descriptor limit.
func defaultFDHeadroom(limit uint64) int {
	return int(min(max(limit/10, 64), 4096))
}

// normalize fills the defaults and checks the values.
func (o Options) normalize() (Options, error) {
	if o.Addr == "" {
		return o, errors.New("netio: Options.Addr is required")
	}
	if !strings.Contains(o.Addr, "://") {
		o.Addr = "tcp://" + o.Addr
	}
	if !strings.HasPrefix(o.Addr, "tcp") {
		return o, fmt.Errorf("netio: Options.Addr %q: only tcp is supported", o.Addr)
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.MaxFrameSize < 0 || o.MaxFrameSize > maxFrameSizeLimit {
		return o, fmt.Errorf("netio: Options.MaxFrameSize %d out of range [1, %d]", o.MaxFrameSize, maxFrameSizeLimit)
	}
	if o.MaxInboundBuffered == 0 {
		o.MaxInboundBuffered = 2*o.MaxFrameSize + 1<<20
	}
	if o.MaxInboundBuffered < o.MaxFrameSize+frameHeaderLen {
		// Below one whole frame a paused connection could never hold the
		// frame it is in the middle of receiving.
		return o, fmt.Errorf("netio: Options.MaxInboundBuffered %d is below one frame (%d)",
			o.MaxInboundBuffered, o.MaxFrameSize+frameHeaderLen)
	}
	if o.WriteBufferHighWater == 0 {
		o.WriteBufferHighWater = DefaultWriteBufferHighWater
	}
	if o.WriteBufferHighWater < 2 {
		return o, fmt.Errorf("netio: Options.WriteBufferHighWater %d must be at least 2", o.WriteBufferHighWater)
	}
	if o.NumEventLoop < 0 || o.ReadBufferCap < 0 || o.IdleTimeout < 0 {
		return o, errors.New("netio: negative NumEventLoop, ReadBufferCap or IdleTimeout")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}
