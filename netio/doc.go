// Package netio is the TCP server layer under the broker and the bookie
// server: a gnet (github.com/panjf2000/gnet/v2) engine that cuts the byte
// stream into length-prefixed frames and hands them to a Handler. It knows
// nothing about Pulsar or the bookie protocol.
//
// # Accepting
//
// netio accepts connections on a listener of its own and enrolls each into
// gnet's event loops (a gnet.Client engine), instead of letting gnet
// accept: gnet stops its whole engine on a failed accept (EMFILE in a
// connection flood). The acceptor (accept.go, shared with the TLS ports)
// sheds connections when the process is out of descriptors, keeps
// connections off the last FDHeadroom descriptors, enforces MaxConns and
// MaxConnsPerIP, and logs refusals once per 10 s.
//
// # Frames
//
//	+------+--------------------+
//	| size | size bytes         |
//	+------+--------------------+
//	  4 bytes, big-endian uint32
//
// This is Pulsar's framing (size = totalSize) and our bookie protocol's. A
// frame's size is the value of its prefix, so the whole frame is 4+size
// bytes. Size 0 and sizes over Options.MaxFrameSize close the connection.
// OnFrame gets the whole frame, prefix included, as a slice of gnet's inbound
// buffer: no copy, valid only during the call.
//
// # Threads
//
// gnet runs a fixed set of event loops, one goroutine each. A connection
// belongs to one loop for its life, and every Handler callback for it runs
// on that loop, one at a time. Handlers must not block: a blocked callback
// stalls every connection of its loop.
//
// # Writes
//
// Conn's methods are safe from any goroutine. Every write, from a callback
// or from a dispatcher goroutine, is appended to the connection's queue
// under Conn.mu; the loop writes the queue with one gnet Conn.Writev:
//
//   - at the end of the connection's own OnOpen and OnTraffic, so the
//     replies to all frames of one read go out in one system call (writes
//     made during the callback do not wake the loop: a flush is coming);
//   - otherwise in a loop task, queued by the write that found the queue
//     idle, through gnet's AsyncWritev with no buffers (its high-priority
//     way to run code on the loop). Writes arriving before that task runs
//     join its writev.
//
// Whatever the socket does not take gnet copies into its outbound buffer
// and sends as the socket drains. Writes reach the socket in the order they
// entered the queue, and each Write's buffers stay contiguous.
//
// Writev runs only where no Handler callback is on the stack: when a socket
// write fails gnet closes the connection on the spot, and OnClose inside
// OnFrame would re-enter the handler (maybe under its own locks) and hand
// the inbound buffer the current frame aliases back to gnet's pool. This is
// also why a callback's own writes wait for the callback to return.
//
// # Back-pressure
//
// Reading: PauseReading stops frame delivery; frames stay in gnet's inbound
// buffer, and ResumeReading delivers them in order (through Conn.Wake, which
// runs OnTraffic on the loop). gnet has no way to stop reading the socket, so
// it keeps appending to the inbound buffer while paused; past
// Options.MaxInboundBuffered the connection closes with
// ErrBackPressureIgnored. The broker uses this for
// maxPendingPublishRequestsPerConnection.
//
// Writing: Pending counts bytes queued and not yet written to the socket.
// Above Options.WriteBufferHighWater the connection is Congested and Drained
// returns a channel closed once Pending falls to half the high-water mark.
// Writes are still accepted (nothing is dropped): stopping is the caller's
// job. gnet has no writable callback, so while congested a timer asks the
// loop to look at the outbound buffer (every 1 ms, backing off to 16 ms).
//
// # Lock rules
//
// Conn.mu guards the connection's closed state, close reason, write queue
// and congestion state. It is never held while calling a Handler method, a
// write's done callback, or gnet's Writev. A task is queued on the loop
// only while the connection is open: once a loop has exited gnet closes its
// poller, and its eventfd number may then belong to an unrelated file, so
// nothing may be queued after OnClose. Either mu is held while queueing (the
// drain poll; gnet's Trigger never blocks), or, for a write's kick, the kick
// is registered in Conn.kicks under mu while open and made after mu is
// released (the kick wakes the loop's thread, which must not happen with
// every other writer of the connection queued behind it), and OnClose waits
// for the registered kicks. OnClose runs for every connection before its
// loop exits, and fails the writes still queued, so every accepted write's
// done runs exactly once.
// Server.mu guards the connection set; it is never held together with a
// Conn.mu. Fields documented as loop-only are touched only on the
// connection's loop goroutine and need no lock.
//
// # What we rely on in gnet v2.9.7 (paths in its module)
//
//   - connection_unix.go:349-376 Peek(n) returns the next n inbound bytes
//     without consuming them: a slice of the fresh read (c.buffer) or of the
//     ring buffer when contiguous, else a copy into a pooled slice; valid
//     until Discard. :378-403 Discard(n) consumes n bytes and returns that
//     copy to the pool (hence: frames are valid only during OnFrame).
//     :453-455 InboundBuffered counts the ring buffer plus the fresh read.
//   - eventloop_unix.go:254-300 read: OnTraffic is called once per read(2)
//     with that read in c.buffer; whatever OnTraffic leaves unconsumed is
//     appended to the ring buffer (:284), which grows without bound
//     (pkg/buffer/ring/ring_buffer.go:217-226), so a paused connection keeps
//     growing it: we cap it ourselves.
//   - connection_unix.go:520-528 and eventloop_unix.go:405-413 Wake queues a
//     task that calls OnTraffic for a still-open connection.
//   - connection_unix.go:184-245 writev writes what the socket takes and
//     copies the rest into the outbound buffer, behind what is already
//     there (pkg/buffer/elastic/elastic_ring_list_buffer.go:101-132,
//     pkg/buffer/linkedlist/linked_list_buffer.go:108-116), so buffers are
//     free once it returns; on a socket error it closes the connection
//     itself, synchronously (:200-204). It may shorten the elements of the
//     [][]byte it is given (:221-233), which is our queue. It passes the
//     whole list to writev(2) (pkg/io/io_linux.go:23-28), so we pass at most
//     1024 (IOV_MAX) buffers per call; an empty list returns before any
//     system call (:24-26).
//   - connection_unix.go:273-287, 513-518 AsyncWritev queues a
//     high-priority task that calls our callback on the loop, with
//     net.ErrClosed if the connection closed meanwhile (:281-283).
//     :457-459 OutboundBuffered is loop-only; we read it in loop code.
//   - pkg/netpoll/poller_epoll_default.go:90-111 Trigger enqueues, then
//     signals the loop's eventfd; :144-163 the loop runs queued tasks after
//     each batch of I/O events, and drops what is left when it exits
//     (:149-151): hence OnClose, not the task, is what fails leftover writes.
//   - eventloop_unix.go:362-403 close calls OnClose before it releases the
//     connection (so Context is still set), flushes the outbound buffer
//     best-effort, and ignores already-closed connections; release resets
//     isEOF (connection_unix.go:90-114), so closing inside OnTraffic is safe.
//   - reactor_default.go:46-77 a sub-reactor closes all its connections
//     (OnClose for each, :73) when it exits.
//   - client_unix.go:106-176 a Client engine runs the same event loops as a
//     server engine, without a listener; Start calls OnBoot and starts the
//     loops and the ticker, Stop makes every loop exit (closing its
//     connections, OnClose for each) and waits for them. :199-291
//     EnrollContext duplicates a net.Conn's descriptor, closes the net.Conn,
//     queues the registration on a loop and returns after OnOpen ran; so
//     Close closes the listener, waits for the acceptor (and the enrolment
//     it may be in), then stops the loops: no accepted connection is left
//     without a loop.
//   - eventloop_unix.go:415-448 OnTick runs on its own goroutine; idle
//     connections are found there.
//
// gnet keeps process-wide state we cannot avoid: its default logger (set to
// the last Server's Logger, client_unix.go:60), and a worker pool started
// at init (pkg/pool/goroutine/goroutine.go:44).
package netio
