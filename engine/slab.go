package engine

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/valyala/bytebufferpool"
	"golang.org/x/sys/unix"
)

// Slab is a fixed set of page-aligned I/O buffers carved from one anonymous
// mapping, outside the Go heap: the garbage collector never moves or frees
// them, so they are safe to hand to the kernel (io_uring, O_DIRECT) and can
// be registered with RegisterBuffers. The pool is bounded: Get blocks when
// every buffer is out, which is the back-pressure the caller wants.
type Slab struct {
	mem     []byte
	bufSize int
	free    chan int // indexes of free buffers

	mu     sync.Mutex
	closed bool
}

// PageSize is the alignment of slab buffers.
var pageSize = unix.Getpagesize()

// NewSlab maps count buffers of bufSize bytes (rounded up to whole pages).
func NewSlab(bufSize, count int) (*Slab, error) {
	if bufSize <= 0 || count <= 0 {
		return nil, fmt.Errorf("slab: buffer size %d and count %d must be positive", bufSize, count)
	}
	bufSize = (bufSize + pageSize - 1) / pageSize * pageSize
	mem, err := unix.Mmap(-1, 0, bufSize*count, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("slab: mmap %d x %d bytes: %w", count, bufSize, err)
	}
	s := &Slab{mem: mem, bufSize: bufSize, free: make(chan int, count)}
	for i := 0; i < count; i++ {
		s.free <- i
	}
	return s, nil
}

// BufSize returns the size of each buffer.
func (s *Slab) BufSize() int { return s.bufSize }

// Region returns the whole mapping, for RegisterBuffers.
func (s *Slab) Region() []byte { return s.mem }

// Get returns a free buffer (len = cap = BufSize), blocking until one is.
func (s *Slab) Get() []byte { return s.buf(<-s.free) }

// TryGet returns a free buffer, or nil when all are in use.
func (s *Slab) TryGet() []byte {
	select {
	case i := <-s.free:
		return s.buf(i)
	default:
		return nil
	}
}

func (s *Slab) buf(i int) []byte {
	off := i * s.bufSize
	return s.mem[off : off+s.bufSize : off+s.bufSize]
}

// Put returns a buffer obtained from Get. It panics on a foreign buffer,
// which is a programming error that would corrupt the pool.
func (s *Slab) Put(b []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))
	base := uintptr(unsafe.Pointer(&s.mem[0]))
	off := int(start - base)
	if start < base || off >= len(s.mem) || off%s.bufSize != 0 {
		panic("engine: Slab.Put of a buffer that is not from this slab")
	}
	s.free <- off / s.bufSize
}

// Close unmaps the slab. Every buffer must have been returned and no I/O
// may be in flight on them.
func (s *Slab) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("slab: already closed")
	}
	if len(s.free) != cap(s.free) {
		return fmt.Errorf("slab: %d buffers still in use", cap(s.free)-len(s.free))
	}
	s.closed = true
	return unix.Munmap(s.mem)
}

// GetBuffer returns a pooled, growable byte buffer for general (non-I/O
// pinned) use, such as encoding a record before copying it into a slab.
func GetBuffer() *bytebufferpool.ByteBuffer { return bytebufferpool.Get() }

// PutBuffer returns a buffer from GetBuffer to the pool.
func PutBuffer(b *bytebufferpool.ByteBuffer) { bytebufferpool.Put(b) }
