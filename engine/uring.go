package engine

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/magnetar-io/magnetar/engine/internal/iouring"
	"github.com/magnetar-io/magnetar/internal/invariants"
	"golang.org/x/sys/unix"
)

// UringOptions configure the io_uring backend.
type UringOptions struct {
	// Entries is the submission queue size (default 256). The completion
	// queue is twice as large, and the number of operations in flight is
	// bounded by it, so the completion queue can never overflow.
	Entries uint32
	// FixedFiles is the size of the registered-file table (default 1024);
	// files opened beyond it use plain descriptors.
	FixedFiles int
}

// NewUring returns the io_uring backend, or an error (ENOSYS, EPERM, ...)
// when the kernel does not allow io_uring or lacks an opcode it needs.
func NewUring(opts UringOptions) (FS, error) {
	u, err := newUringIO(opts)
	if err != nil {
		return nil, wrapErr("uring", "setup", "io_uring", err)
	}
	return &osFS{io: u, bounces: newBouncePool()}, nil
}

// uringIO moves bytes through one io_uring.
//
// Completion model (leader/followers): any goroutine submits under subMu and
// then waits for its slot. One waiter at a time is the leader (holds reapMu):
// it blocks in io_uring_enter(GETEVENTS), reaps every completion and wakes
// their owners. When the leader's own operation is done it steps down and
// hands leadership to a waiter still in flight. A lone operation therefore
// reaps its own completion with no thread hand-off, and many goroutines share
// one waiting thread. Requests are identified by slot index (user_data),
// never by pointer, so the kernel holds no Go pointers.
//
// Memory handed to the kernel: iovec arrays live in an mmap'd area outside
// the Go heap (one fixed array per slot); data buffers are pinned with
// runtime.Pinner from submission until their completion is reaped.
//
// Lock order: acquireMu -> subMu; reapMu is only ever taken with TryLock.
// bufMu (read) is held around an operation that uses registered buffers;
// filesMu only around the fixed-file table.
type uringIO struct {
	ring *iouring.Ring
	opts UringOptions // as given, for Separate

	acquireMu sync.Mutex // serialises taking several slots at once (no deadlock)
	free      chan uint32
	slots     []uringSlot
	iovArea   []byte // mmap'd: len(slots) * maxIovecs iovecs

	subMu  sync.Mutex  // guards the ring's submission side
	broken error       // guarded by subMu: why the ring is unusable
	failed atomic.Bool // set with broken; checked without the lock

	reapMu sync.Mutex // held by the leader, the one goroutine reading the CQ
	closed atomic.Bool

	filesMu   sync.Mutex
	fixedFree []int32 // free registered-file slots; nil when unsupported

	bufMu   sync.RWMutex
	regions []bufRegion // registered buffers, guarded by bufMu
}

// Slot states.
const (
	slotFree     uint32 = iota
	slotInFlight        // submitted, owner not yet waiting on it
	slotWaiting         // owner waits on it (maybe blocked): handOff may wake it
	slotDone            // completion reaped, res valid
)

type uringSlot struct {
	res    atomic.Int32  // atomic: the kernel, not Go, orders reuse of a slot
	state  atomic.Uint32 // slot* states above
	wake   chan struct{} // capacity 1: "done" or "try to lead"; spurious wakes are fine
	pinner runtime.Pinner
}

type bufRegion struct {
	mem   []byte // outside the Go heap
	index uint16
}

// iovec mirrors struct iovec with raw addresses: it lives outside the Go
// heap, so it must hold no Go pointers.
type iovec struct{ base, len uint64 }

func newUringIO(opts UringOptions) (*uringIO, error) {
	given := opts
	if opts.Entries == 0 {
		opts.Entries = 256
	}
	opts.Entries = max(opts.Entries, 2) // a linked write+datasync needs two SQEs at once
	if opts.FixedFiles == 0 {
		opts.FixedFiles = 1024
	}
	ring, err := iouring.Setup(iouring.Options{Entries: opts.Entries, CQEntries: 2 * opts.Entries})
	if err != nil {
		return nil, err
	}
	if err := checkOpcodes(ring); err != nil {
		ring.Close()
		return nil, err
	}
	n := int(ring.CQEntries())
	iovArea, err := unix.Mmap(-1, 0, n*maxIovecs*int(unsafe.Sizeof(iovec{})),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		ring.Close()
		return nil, fmt.Errorf("mmap iovec area: %w", err)
	}
	u := &uringIO{ring: ring, opts: given, free: make(chan uint32, n), slots: make([]uringSlot, n),
		iovArea: iovArea}
	for i := range u.slots {
		u.slots[i].wake = make(chan struct{}, 1)
		u.free <- uint32(i)
	}
	u.registerFileTable(opts.FixedFiles)
	return u, nil
}

func checkOpcodes(ring *iouring.Ring) error {
	ops, err := ring.Probe()
	if err != nil {
		return fmt.Errorf("probe io_uring opcodes: %w", err)
	}
	need := map[uint8]string{iouring.OpWritev: "WRITEV", iouring.OpReadv: "READV", iouring.OpRead: "READ",
		iouring.OpWrite: "WRITE", iouring.OpFsync: "FSYNC", iouring.OpFallocate: "FALLOCATE"}
	for op, name := range need {
		if !ops[op] {
			return fmt.Errorf("kernel lacks io_uring opcode %s: %w", name, unix.ENOSYS)
		}
	}
	return nil
}

func (u *uringIO) registerFileTable(size int) {
	table := make([]int32, size)
	for i := range table {
		table[i] = -1
	}
	if err := u.ring.RegisterFiles(table); err != nil {
		return // fixed files are an optimisation; plain fds work everywhere
	}
	u.fixedFree = make([]int32, 0, size)
	for i := size - 1; i >= 0; i-- {
		u.fixedFree = append(u.fixedFree, int32(i))
	}
}

func (u *uringIO) name() string { return "uring" }

func (u *uringIO) attach(f *osFile) {
	u.filesMu.Lock()
	defer u.filesMu.Unlock()
	if len(u.fixedFree) == 0 {
		return
	}
	slot := u.fixedFree[len(u.fixedFree)-1]
	if err := u.ring.UpdateFiles(uint32(slot), []int32{int32(f.fd)}); err != nil {
		return
	}
	u.fixedFree = u.fixedFree[:len(u.fixedFree)-1]
	f.fixed = slot
}

func (u *uringIO) detach(f *osFile) {
	if f.fixed < 0 {
		return
	}
	u.filesMu.Lock()
	defer u.filesMu.Unlock()
	if err := u.ring.UpdateFiles(uint32(f.fixed), []int32{-1}); err == nil {
		u.fixedFree = append(u.fixedFree, f.fixed)
	}
	f.fixed = -1
}

// registerBuffers adds memory regions (outside the Go heap) to the ring's
// registered buffers; single-buffer reads and writes inside them then use
// READ_FIXED / WRITE_FIXED, saving the kernel a page pin per operation.
func (u *uringIO) registerBuffers(regions [][]byte) error {
	for _, r := range regions {
		if len(r) == 0 {
			return fmt.Errorf("register buffers: empty region")
		}
	}
	if len(regions) == 0 {
		return nil
	}
	u.bufMu.Lock()
	defer u.bufMu.Unlock()
	all := make([][]byte, 0, len(u.regions)+len(regions))
	for _, r := range u.regions {
		all = append(all, r.mem)
	}
	all = append(all, regions...)
	if len(u.regions) > 0 {
		if err := u.ring.UnregisterBuffers(); err != nil {
			return err
		}
	}
	if err := u.ring.RegisterBuffers(all); err != nil {
		u.regions = nil
		return err
	}
	u.regions = u.regions[:0]
	for i, b := range all {
		u.regions = append(u.regions, bufRegion{mem: b, index: uint16(i)})
	}
	return nil
}

// fixedIndexLocked returns the registered buffer holding p. Caller holds bufMu.
func (u *uringIO) fixedIndexLocked(p []byte) (uint16, bool) {
	if len(p) == 0 {
		return 0, false
	}
	start := uintptr(unsafe.Pointer(&p[0]))
	for _, r := range u.regions {
		base := uintptr(unsafe.Pointer(&r.mem[0]))
		if start >= base && start+uintptr(len(p)) <= base+uintptr(len(r.mem)) {
			return r.index, true
		}
	}
	return 0, false
}

// sqeReq is one SQE to submit, without the fd and user data.
type sqeReq struct {
	op, flags uint8
	off, addr uint64
	len       uint32
	opFlags   uint32
	bufIndex  uint16
}

// run submits reqs (at most 2, linked by the caller's flags) for file f,
// pins bufs until every completion is reaped, and stores the kernel's
// results in res. When vectored, bufs are written into the first slot's
// iovec array and reqs[0].addr is pointed at it.
func (u *uringIO) run(f *osFile, reqs []sqeReq, bufs [][]byte, vectored bool, res []int32) error {
	if err := u.failure(); err != nil {
		return err
	}
	var ids [2]uint32
	u.acquireMu.Lock()
	for i := range reqs {
		ids[i] = <-u.free
	}
	u.acquireMu.Unlock()
	for i := range reqs {
		if invariants.Enabled && u.slots[ids[i]].state.Load() != slotFree {
			invariants.Failf("uring slot %d taken from the free list in state %d", ids[i], u.slots[ids[i]].state.Load())
		}
		u.slots[ids[i]].state.Store(slotInFlight)
	}
	first := &u.slots[ids[0]]
	for _, b := range bufs {
		if len(b) > 0 {
			first.pinner.Pin(&b[0])
		}
	}
	if vectored {
		reqs[0].addr = u.fillIovecs(ids[0], bufs)
	}
	published, err := u.submit(f, reqs, ids[:len(reqs)])
	if err != nil && !published {
		u.release(first, ids[:len(reqs)])
		return err
	}
	for i := 0; err == nil && i < len(reqs); i++ {
		if err = u.wait(ids[i]); err == nil {
			res[i] = u.slots[ids[i]].res.Load()
		}
	}
	if err != nil {
		// The kernel may still use these SQEs' memory: keep it pinned and
		// the slots taken forever rather than risk reuse.
		return err
	}
	u.release(first, ids[:len(reqs)])
	return nil
}

// release unpins an operation's buffers and frees its slots.
func (u *uringIO) release(first *uringSlot, ids []uint32) {
	first.pinner.Unpin()
	for _, id := range ids {
		if invariants.Enabled {
			// Freed after its completion was reaped, or unsubmitted.
			if st := u.slots[id].state.Load(); st != slotDone && st != slotInFlight {
				invariants.Failf("uring slot %d freed in state %d", id, st)
			}
		}
		u.slots[id].state.Store(slotFree)
		u.free <- id
	}
}

// failure returns why the ring is unusable, or nil.
func (u *uringIO) failure() error {
	if !u.failed.Load() {
		return nil
	}
	u.subMu.Lock()
	defer u.subMu.Unlock()
	return u.broken
}

// fail marks the ring unusable and wakes every waiter so none hangs.
// Caller holds subMu.
func (u *uringIO) failLocked(err error) error {
	if u.broken == nil {
		u.broken = fmt.Errorf("io_uring failed, ring unusable: %w", err)
		u.failed.Store(true)
	}
	for i := range u.slots {
		select {
		case u.slots[i].wake <- struct{}{}:
		default:
		}
	}
	return u.broken
}

func (u *uringIO) fillIovecs(slot uint32, bufs [][]byte) uint64 {
	area := unsafe.Pointer(&u.iovArea[int(slot)*maxIovecs*int(unsafe.Sizeof(iovec{}))])
	vecs := unsafe.Slice((*iovec)(area), maxIovecs)
	for i, b := range bufs {
		vecs[i] = iovec{len: uint64(len(b))}
		if len(b) > 0 {
			vecs[i].base = uint64(uintptr(unsafe.Pointer(&b[0])))
		}
	}
	return uint64(uintptr(area))
}

// submit writes reqs into the ring and submits them. published reports
// whether the SQEs reached the ring (after which their memory belongs to the
// kernel until their completions are reaped).
func (u *uringIO) submit(f *osFile, reqs []sqeReq, ids []uint32) (published bool, err error) {
	u.subMu.Lock()
	defer u.subMu.Unlock()
	if u.broken != nil {
		return false, u.broken
	}
	for i, r := range reqs {
		sqe, err := u.ring.PrepareSQE()
		if err != nil {
			// Cannot happen: the SQ is empty whenever subMu is free and
			// holds at least two entries. If it did, a prepared SQE could
			// be published later, so the ring is done for.
			return i > 0, u.failLocked(err)
		}
		sqe.Opcode, sqe.Flags, sqe.Off, sqe.Addr = r.op, r.flags, r.off, r.addr
		sqe.Len, sqe.OpFlags, sqe.BufIndex, sqe.UserData = r.len, r.opFlags, r.bufIndex, uint64(ids[i])
		sqe.Fd = int32(f.fd)
		if f.fixed >= 0 {
			sqe.Fd = f.fixed
			sqe.Flags |= iouring.SqeFixedFile
		}
	}
	return true, u.flushLocked()
}

// flushLocked pushes every published SQE into the kernel, retrying while
// the kernel is temporarily out of resources.
func (u *uringIO) flushLocked() error {
	for backoff := time.Microsecond; ; {
		_, err := u.ring.Submit()
		if err == nil && u.ring.SQPending() == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EBUSY) {
			return u.failLocked(fmt.Errorf("submit: %w", err))
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Millisecond)
	}
}

// wait returns once slot id's completion has been reaped, leading the
// reaping while no one else does. It fails only when the ring has failed.
func (u *uringIO) wait(id uint32) error {
	s := &u.slots[id]
	for {
		if err := u.failure(); err != nil {
			return err
		}
		switch s.state.Load() {
		case slotDone:
			return nil
		case slotInFlight:
			// Announce the wait before trying to lead, so that the leader
			// we lose to finds us when it steps down. CAS: the leader may
			// have marked the slot done meanwhile.
			s.state.CompareAndSwap(slotInFlight, slotWaiting)
			continue
		}
		if !u.reapMu.TryLock() {
			<-s.wake // the leader wakes us when we are done or must lead
			continue
		}
		err := u.lead(s)
		u.reapMu.Unlock()
		if err != nil {
			u.subMu.Lock()
			err = u.failLocked(fmt.Errorf("wait for completions: %w", err))
			u.subMu.Unlock()
			return err
		}
		u.handOff()
	}
}

// lead reaps completions until s is done. Caller holds reapMu.
func (u *uringIO) lead(s *uringSlot) error {
	for s.state.Load() != slotDone {
		if err := u.ring.WaitCQE(); err != nil {
			return err
		}
		for {
			cqe, ok := u.ring.PeekCQE()
			if !ok {
				break
			}
			u.ring.AdvanceCQ(1)
			done := &u.slots[cqe.UserData]
			done.res.Store(cqe.Res)
			done.state.Store(slotDone)
			select {
			case done.wake <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// handOff wakes one waiter whose operation is still in flight so that it
// becomes the leader. A waiter marks its slot slotWaiting before it tries to
// lead, so a waiter that failed to lead is always found by the scan that
// follows the leader's unlock. An owner waits on one slot at a time, so the
// token reaches the goroutine blocked on it.
func (u *uringIO) handOff() {
	for i := range u.slots {
		s := &u.slots[i]
		if s.state.Load() == slotWaiting {
			select {
			case s.wake <- struct{}{}:
			default:
			}
			return
		}
	}
}

func (u *uringIO) close() error {
	if u.closed.Swap(true) {
		return ErrClosed
	}
	if err := u.failure(); err != nil {
		// Slots may be leaked to operations the kernel still holds; the
		// iovec area stays mapped for them. Closing the ring cancels them.
		return errors.Join(err, u.ring.Close())
	}
	// Take every slot: this waits for all operations in flight.
	u.acquireMu.Lock()
	for range u.slots {
		<-u.free
	}
	u.acquireMu.Unlock()
	return errors.Join(u.ring.Close(), unix.Munmap(u.iovArea))
}

func resultErr(res int32) error {
	if res < 0 {
		return unix.Errno(-res)
	}
	return nil
}

// writeReq builds the write SQE for bufs (already non-empty and capped at
// maxIovecs) and reports whether it is vectored.
func (u *uringIO) writeReq(bufs [][]byte, off int64) (sqeReq, bool) {
	if len(bufs) == 1 {
		b := bufs[0][:min(len(bufs[0]), maxOpBytes)]
		req := sqeReq{op: iouring.OpWrite, off: uint64(off), len: uint32(len(b))}
		req.addr = uint64(uintptr(unsafe.Pointer(&b[0])))
		if idx, ok := u.fixedIndexLocked(b); ok {
			req.op, req.bufIndex = iouring.OpWriteFixed, idx
		}
		return req, false
	}
	return sqeReq{op: iouring.OpWritev, off: uint64(off), len: uint32(len(bufs))}, true
}

// maxOpBytes bounds one single-buffer read or write (the SQE length field is
// 32 bits); the shared loops in osFile submit the rest.
const maxOpBytes = 1 << 30

// capIovecs limits one operation to IOV_MAX buffers; the shared write loop
// submits the rest afterwards.
func capIovecs(bufs [][]byte) [][]byte {
	if len(bufs) > maxIovecs {
		return bufs[:maxIovecs]
	}
	return bufs
}

// nonEmpty drops zero-length buffers so single-buffer writes take the
// cheaper WRITE path; it returns nil when nothing is left to write.
func nonEmpty(bufs [][]byte) [][]byte {
	for _, b := range bufs {
		if len(b) == 0 {
			out := make([][]byte, 0, len(bufs))
			for _, b := range bufs {
				if len(b) > 0 {
					out = append(out, b)
				}
			}
			return out
		}
	}
	return bufs
}

func (u *uringIO) pwritev(f *osFile, bufs [][]byte, off int64) (int, error) {
	bufs = capIovecs(nonEmpty(bufs))
	if len(bufs) == 0 {
		return 0, nil
	}
	u.bufMu.RLock()
	defer u.bufMu.RUnlock()
	req, vectored := u.writeReq(bufs, off)
	var res [1]int32
	if err := u.run(f, []sqeReq{req}, bufs, vectored, res[:]); err != nil {
		return 0, err
	}
	if res[0] < 0 {
		return 0, resultErr(res[0])
	}
	return int(res[0]), nil
}

func (u *uringIO) writeSync(f *osFile, bufs [][]byte, off int64) (int, bool, error) {
	bufs = nonEmpty(bufs)
	if len(bufs) == 0 {
		return 0, true, u.datasync(f)
	}
	if len(bufs) > maxIovecs {
		// Too many buffers for one linked chain: the caller writes them in
		// several operations and then syncs once.
		return 0, false, nil
	}
	all := totalLen(bufs)
	u.bufMu.RLock()
	defer u.bufMu.RUnlock()
	w, vectored := u.writeReq(bufs, off)
	w.flags = iouring.SqeIOLink
	reqs := []sqeReq{w, {op: iouring.OpFsync, opFlags: iouring.FsyncDatasync}}
	var res [2]int32
	if err := u.run(f, reqs, bufs, vectored, res[:]); err != nil {
		return 0, false, err
	}
	if res[0] < 0 {
		return 0, false, resultErr(res[0])
	}
	n := int(res[0])
	if n < all {
		// A short write cancels the linked sync (-ECANCELED); the caller
		// finishes the write and syncs separately. Any other sync error
		// must surface: the kernel reports a writeback error only once.
		if res[1] < 0 && unix.Errno(-res[1]) != unix.ECANCELED {
			return n, false, resultErr(res[1])
		}
		return n, false, nil
	}
	return n, true, resultErr(res[1])
}

func (u *uringIO) pread(f *osFile, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	p = p[:min(len(p), maxOpBytes)] // the SQE length is 32 bits; the caller loops
	u.bufMu.RLock()
	defer u.bufMu.RUnlock()
	req := sqeReq{op: iouring.OpRead, off: uint64(off), len: uint32(len(p)),
		addr: uint64(uintptr(unsafe.Pointer(&p[0])))}
	if idx, ok := u.fixedIndexLocked(p); ok {
		req.op, req.bufIndex = iouring.OpReadFixed, idx
	}
	var res [1]int32
	if err := u.run(f, []sqeReq{req}, [][]byte{p}, false, res[:]); err != nil {
		return 0, err
	}
	if res[0] < 0 {
		return 0, resultErr(res[0])
	}
	return int(res[0]), nil
}

func (u *uringIO) datasync(f *osFile) error {
	var res [1]int32
	if err := u.run(f, []sqeReq{{op: iouring.OpFsync, opFlags: iouring.FsyncDatasync}}, nil, false, res[:]); err != nil {
		return err
	}
	return resultErr(res[0])
}

func (u *uringIO) fallocate(f *osFile, mode uint32, off, length int64) error {
	req := sqeReq{op: iouring.OpFallocate, off: uint64(off), addr: uint64(length), len: mode}
	var res [1]int32
	if err := u.run(f, []sqeReq{req}, nil, false, res[:]); err != nil {
		return err
	}
	return resultErr(res[0])
}
