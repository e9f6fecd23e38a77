package iouring

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrRingFull is returned by PrepareSQE when every submission slot is taken
// and not yet handed to the kernel.
var ErrRingFull = errors.New("iouring: submission queue full")

// Ring is one io_uring instance: its fd and the three shared mappings.
//
// Lock rules: Ring does no locking. The submission side (PrepareSQE, Submit)
// must be used by one goroutine at a time; the completion side (PeekCQE,
// AdvanceCQ, WaitCQE) by one goroutine at a time. The two sides may run
// concurrently, which is what the kernel ABI is designed for.
type Ring struct {
	fd       int
	features uint32

	sqRing []byte
	cqRing []byte // aliases sqRing when the kernel has FeatSingleMmap
	sqeMem []byte

	sqHead, sqTail, sqMask *uint32
	sqArray                unsafe.Pointer
	sqes                   unsafe.Pointer
	sqEntries              uint32
	sqLocalTail            uint32 // SQEs prepared but not yet published

	cqHead, cqTail, cqMask *uint32
	cqes                   unsafe.Pointer
	cqEntries              uint32
}

// Options configure Setup.
type Options struct {
	// Entries is the submission queue size; the kernel rounds it up to a
	// power of two.
	Entries uint32
	// CQEntries, when non-zero, asks for a larger completion queue.
	CQEntries uint32
}

// Setup creates a ring. The error is ENOSYS on kernels without io_uring and
// EPERM where it is disabled (kernel.io_uring_disabled or a seccomp filter).
func Setup(opts Options) (*Ring, error) {
	if opts.Entries == 0 {
		opts.Entries = 128
	}
	var p params
	p.flags = SetupClamp
	if opts.CQEntries > 0 {
		p.flags |= SetupCQSize
		p.cqEntries = opts.CQEntries
	}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(opts.Entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup(%d entries): %w", opts.Entries, errno)
	}
	r := &Ring{fd: int(fd), features: p.features}
	if err := r.mapRings(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Ring) mapRings(p *params) error {
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(CQE{})))
	single := p.features&FeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	r.sqRing, err = mmapRing(r.fd, offSQRing, sqSize)
	if err != nil {
		return fmt.Errorf("mmap io_uring SQ ring: %w", err)
	}
	if single {
		r.cqRing = r.sqRing
	} else if r.cqRing, err = mmapRing(r.fd, offCQRing, cqSize); err != nil {
		return fmt.Errorf("mmap io_uring CQ ring: %w", err)
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(SQE{}))
	if r.sqeMem, err = mmapRing(r.fd, offSQEs, sqeSize); err != nil {
		return fmt.Errorf("mmap io_uring SQEs: %w", err)
	}
	sq := unsafe.Pointer(&r.sqRing[0])
	r.sqHead = (*uint32)(unsafe.Add(sq, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.sqOff.tail))
	r.sqMask = (*uint32)(unsafe.Add(sq, p.sqOff.ringMask))
	r.sqArray = unsafe.Add(sq, p.sqOff.array)
	r.sqEntries = p.sqEntries
	r.sqes = unsafe.Pointer(&r.sqeMem[0])
	r.sqLocalTail = atomic.LoadUint32(r.sqTail)

	cq := unsafe.Pointer(&r.cqRing[0])
	r.cqHead = (*uint32)(unsafe.Add(cq, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.cqOff.tail))
	r.cqMask = (*uint32)(unsafe.Add(cq, p.cqOff.ringMask))
	r.cqes = unsafe.Add(cq, p.cqOff.cqes)
	r.cqEntries = p.cqEntries
	return nil
}

func mmapRing(fd int, off int64, size int) ([]byte, error) {
	return unix.Mmap(fd, off, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
}

// Close unmaps the rings and closes the ring fd. In-flight operations are
// cancelled by the kernel; their memory must stay valid until Close returns.
func (r *Ring) Close() error {
	if r.sqeMem != nil {
		_ = unix.Munmap(r.sqeMem)
		r.sqeMem = nil
	}
	if r.cqRing != nil && len(r.sqRing) > 0 && &r.cqRing[0] != &r.sqRing[0] {
		_ = unix.Munmap(r.cqRing)
	}
	r.cqRing = nil
	if r.sqRing != nil {
		_ = unix.Munmap(r.sqRing)
		r.sqRing = nil
	}
	if r.fd >= 0 {
		err := unix.Close(r.fd)
		r.fd = -1
		return err
	}
	return nil
}

// Fd returns the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Features returns the IORING_FEAT_* bits the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// SQEntries returns the submission queue size the kernel granted.
func (r *Ring) SQEntries() uint32 { return r.sqEntries }

// CQEntries returns the completion queue size the kernel granted.
func (r *Ring) CQEntries() uint32 { return r.cqEntries }

// PrepareSQE returns a zeroed SQE to fill. It becomes visible to the kernel
// at the next Submit.
func (r *Ring) PrepareSQE() (*SQE, error) {
	head := atomic.LoadUint32(r.sqHead)
	if r.sqLocalTail-head >= r.sqEntries {
		return nil, ErrRingFull
	}
	idx := r.sqLocalTail & *r.sqMask
	sqe := (*SQE)(unsafe.Add(r.sqes, uintptr(idx)*unsafe.Sizeof(SQE{})))
	*sqe = SQE{}
	*(*uint32)(unsafe.Add(r.sqArray, uintptr(idx)*4)) = idx
	r.sqLocalTail++
	return sqe, nil
}

// Submit publishes the prepared SQEs and tells the kernel about every SQE it
// has not consumed yet. It returns how many the kernel consumed in this call;
// SQPending says whether some remain (for example after EBUSY).
func (r *Ring) Submit() (int, error) {
	// The release store orders the SQE contents before the tail the kernel reads.
	atomic.StoreUint32(r.sqTail, r.sqLocalTail)
	pending := r.SQPending()
	if pending == 0 {
		return 0, nil
	}
	return r.enter(pending, 0, 0)
}

// SQPending returns how many published SQEs the kernel has not consumed.
func (r *Ring) SQPending() uint32 {
	return r.sqLocalTail - atomic.LoadUint32(r.sqHead)
}

// WaitCQE blocks until at least one completion is available.
func (r *Ring) WaitCQE() error {
	for {
		if r.CQReady() > 0 {
			return nil
		}
		_, err := r.enter(0, 1, enterGetEvents)
		if err == nil || errors.Is(err, unix.EINTR) {
			continue
		}
		return err
	}
}

func (r *Ring) enter(toSubmit, minComplete, flags uint32) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit),
			uintptr(minComplete), uintptr(flags), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return int(n), fmt.Errorf("io_uring_enter: %w", errno)
		}
		return int(n), nil
	}
}

// CQReady returns how many completions wait to be reaped.
func (r *Ring) CQReady() uint32 {
	return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead)
}

// PeekCQE returns the oldest unreaped completion, or false when there is none.
// The returned copy stays valid after AdvanceCQ.
func (r *Ring) PeekCQE() (CQE, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return CQE{}, false
	}
	idx := head & *r.cqMask
	return *(*CQE)(unsafe.Add(r.cqes, uintptr(idx)*unsafe.Sizeof(CQE{}))), true
}

// AdvanceCQ marks n completions as reaped, freeing their slots.
func (r *Ring) AdvanceCQ(n uint32) {
	atomic.AddUint32(r.cqHead, n)
}

// RegisterBuffers registers fixed buffers for OpReadFixed/OpWriteFixed. The
// memory must not be Go heap memory that can be freed while registered.
func (r *Ring) RegisterBuffers(bufs [][]byte) error {
	iovs := make([]unix.Iovec, len(bufs))
	for i, b := range bufs {
		iovs[i].Base = &b[0]
		iovs[i].SetLen(len(b))
	}
	return r.register(registerBuffers, unsafe.Pointer(&iovs[0]), uint32(len(iovs)))
}

// UnregisterBuffers drops every registered buffer.
func (r *Ring) UnregisterBuffers() error {
	return r.register(unregisterBuffers, nil, 0)
}

// RegisterFiles registers a fixed-file table; -1 entries are empty slots that
// UpdateFiles can fill later.
func (r *Ring) RegisterFiles(fds []int32) error {
	return r.register(registerFiles, unsafe.Pointer(&fds[0]), uint32(len(fds)))
}

// UpdateFiles replaces fixed-file slots starting at offset; -1 clears a slot.
func (r *Ring) UpdateFiles(offset uint32, fds []int32) error {
	up := filesUpdate{offset: offset, fds: uint64(uintptr(unsafe.Pointer(&fds[0])))}
	err := r.register(registerFilesUpdate, unsafe.Pointer(&up), uint32(len(fds)))
	runtime.KeepAlive(fds) // up.fds hides the pointer from the GC
	return err
}

// UnregisterFiles drops the fixed-file table.
func (r *Ring) UnregisterFiles() error {
	return r.register(unregisterFiles, nil, 0)
}

// Probe reports which opcodes the running kernel supports.
func (r *Ring) Probe() (map[uint8]bool, error) {
	const maxOps = 256
	buf := make([]byte, unsafe.Sizeof(probeHeader{})+maxOps*unsafe.Sizeof(probeOp{}))
	if err := r.register(registerProbe, unsafe.Pointer(&buf[0]), maxOps); err != nil {
		return nil, err
	}
	hdr := (*probeHeader)(unsafe.Pointer(&buf[0]))
	ops := unsafe.Add(unsafe.Pointer(&buf[0]), unsafe.Sizeof(probeHeader{}))
	supported := make(map[uint8]bool, hdr.opsLen)
	for i := 0; i < int(hdr.opsLen); i++ {
		op := (*probeOp)(unsafe.Add(ops, uintptr(i)*unsafe.Sizeof(probeOp{})))
		if op.flags&probeOpSupported != 0 {
			supported[op.op] = true
		}
	}
	return supported, nil
}

func (r *Ring) register(opcode uintptr, arg unsafe.Pointer, nr uint32) error {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), opcode, uintptr(arg), uintptr(nr), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("io_uring_register(op %d): %w", opcode, errno)
		}
		return nil
	}
}
