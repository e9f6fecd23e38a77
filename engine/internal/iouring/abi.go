// Package iouring is Magnetar's own minimal binding to Linux io_uring, built on
// golang.org/x/sys/unix. It covers what the storage engine needs: ring setup,
// the mmap'd submission and completion rings, io_uring_enter, buffer and file
// registration, and opcode probing.
//
// The package is deliberately small and synchronous: it knows nothing about
// goroutines or waiters. The engine package layers a completion dispatcher on
// top (leader/follower reaping: one waiting goroutine reaps for all).
//
// Memory rule: every address written into an SQE (buffers, iovec arrays) must
// stay valid and unmoved until its CQE is reaped. Callers either use memory
// from outside the Go heap (mmap'd slabs) or pin Go memory with runtime.Pinner
// for the lifetime of the operation.
//
// Layouts below follow include/uapi/linux/io_uring.h (kernel ABI, stable).
package iouring

import "unsafe"

// Opcodes (enum io_uring_op). Only the ones Magnetar uses are named.
const (
	OpNop        uint8 = 0
	OpReadv      uint8 = 1
	OpWritev     uint8 = 2
	OpFsync      uint8 = 3
	OpReadFixed  uint8 = 4
	OpWriteFixed uint8 = 5
	OpFallocate  uint8 = 17
	OpRead       uint8 = 22
	OpWrite      uint8 = 23
)

// SQE flags (IOSQE_*).
const (
	SqeFixedFile uint8 = 1 << 0
	SqeIODrain   uint8 = 1 << 1
	SqeIOLink    uint8 = 1 << 2
	SqeHardLink  uint8 = 1 << 3
	SqeAsync     uint8 = 1 << 4
)

// FsyncDatasync makes an OpFsync behave like fdatasync(2).
const FsyncDatasync uint32 = 1

// Setup flags (IORING_SETUP_*).
const (
	SetupCQSize       uint32 = 1 << 3
	SetupClamp        uint32 = 1 << 4
	SetupSubmitAll    uint32 = 1 << 7
	SetupCoopTaskrun  uint32 = 1 << 8
	SetupSingleIssuer uint32 = 1 << 12
)

// Feature bits reported by the kernel (IORING_FEAT_*).
const (
	FeatSingleMmap   uint32 = 1 << 0
	FeatNoDrop       uint32 = 1 << 1
	FeatSubmitStable uint32 = 1 << 2
)

// io_uring_enter flags.
const enterGetEvents uint32 = 1

// mmap offsets.
const (
	offSQRing int64 = 0
	offCQRing int64 = 0x8000000
	offSQEs   int64 = 0x10000000
)

// io_uring_register opcodes.
const (
	registerBuffers     uintptr = 0
	unregisterBuffers   uintptr = 1
	registerFiles       uintptr = 2
	unregisterFiles     uintptr = 3
	registerFilesUpdate uintptr = 6
	registerProbe       uintptr = 8
)

// sqringOffsets mirrors struct io_sqring_offsets (40 bytes).
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets mirrors struct io_cqring_offsets (40 bytes).
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params mirrors struct io_uring_params (120 bytes).
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// SQE mirrors struct io_uring_sqe (64 bytes, without SQE128).
type SQE struct {
	Opcode      uint8
	Flags       uint8
	IOPrio      uint16
	Fd          int32
	Off         uint64 // offset, or addr2
	Addr        uint64 // buffer or iovec array address
	Len         uint32 // byte length or iovec count (mode for fallocate)
	OpFlags     uint32 // rw_flags, fsync_flags, ...
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	FileIndex   uint32
	Addr3       uint64
	pad         uint64
}

// CQE mirrors struct io_uring_cqe (16 bytes, without CQE32).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// probeOp mirrors struct io_uring_probe_op.
type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16
	resv2 uint32
}

// probeHeader mirrors the fixed part of struct io_uring_probe.
type probeHeader struct {
	lastOp uint8
	opsLen uint8
	resv   uint16
	resv2  [3]uint32
}

const probeOpSupported uint16 = 1

// filesUpdate mirrors struct io_uring_files_update.
type filesUpdate struct {
	offset uint32
	resv   uint32
	fds    uint64
}

// Compile-time checks that the mirrored structs have the kernel's sizes.
var (
	_ [120 - unsafe.Sizeof(params{})]byte
	_ [unsafe.Sizeof(params{}) - 120]byte
	_ [64 - unsafe.Sizeof(SQE{})]byte
	_ [unsafe.Sizeof(SQE{}) - 64]byte
	_ [16 - unsafe.Sizeof(CQE{})]byte
	_ [unsafe.Sizeof(CQE{}) - 16]byte
	_ [16 - unsafe.Sizeof(probeHeader{})]byte
	_ [8 - unsafe.Sizeof(probeOp{})]byte
)
