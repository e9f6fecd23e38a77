package engine

import (
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Direct writes (File.DirectWrites).
//
// Why: a buffered write copies its bytes into page-cache pages. On a host
// where fresh pages are expensive (a VM whose memory the hypervisor backs
// on first touch, as on this project's benchmark machine: 221 MB/s per core
// into new page-cache pages against 7 GB/s into pages already cached), that
// copy was 0.9 of the durable standalone's 0.97 cores at its maximum, all of
// it in io_uring's worker threads. On any host, bytes that the journal and
// the entry logs never read back (the write cache and the broker's cache
// serve recent reads) only evict useful pages and build writeback bursts in
// front of the journal's datasyncs. With O_DIRECT the device reads the bytes
// from our own buffers.
//
// The rules are the kernel's, made uniform: every write's file offset and
// length are multiples of DirectAlign (4096: at least the logical block
// size of any device we run on); buffers may sit anywhere: a write whose
// buffers are not all DirectAlign-aligned is copied into an aligned bounce
// buffer of the file system (reused, outside the Go heap) in chunks of
// bounceSize. ReadAt keeps going through the page cache (the file's own
// descriptor) and needs no alignment; ReadDirect reads past it, into the
// caller's aligned buffer, through a third descriptor opened on first use.
//
// Direct reads, why: on the same VM a cold buffered read of 1 GiB cost 1.8
// CPU seconds in the kernel (allocating and filling new page-cache pages),
// a direct read of it 0.04-0.08. Entry logs are written direct, so their
// pages are never cached and a buffered read always takes that path; the
// bookie's read cache, not the page cache, keeps what readers come back for
// (as BookKeeper's direct-I/O entry logger does).

// DirectAlign is the alignment of a direct write's offset and length.
const DirectAlign = 4096

// ErrUnaligned is returned by a write to a file in direct mode whose offset
// or length is not a multiple of DirectAlign: a caller's bug, never the
// disk's.
var ErrUnaligned = errors.New("direct write not aligned to 4096 bytes")

// ErrDirectUnsupported is returned by DirectWrites where the file system has
// no direct I/O (its callers go on with buffered writes).
var ErrDirectUnsupported = errors.New("direct I/O not supported by this file system")

// bounceSize is the size of one bounce buffer: big enough that a chunk is one
// efficient device write, small enough that a few per file system are cheap.
const bounceSize = 1 << 20

// maxIdleBounces bounds the bounce buffers a file system keeps between writes:
// its writers that need one are few (a journal writes one group at a time,
// an entry-log directory one flush or compaction), and each costs 1 MiB of
// resident memory.
const maxIdleBounces = 2

// bouncePool hands out DirectAlign-aligned buffers from anonymous mmaps (so
// the kernel may DMA from them and the Go heap never moves them). A bounded
// free list keeps the pages warm; a buffer beyond it is unmapped.
type bouncePool struct {
	free chan []byte
}

func newBouncePool() *bouncePool { return &bouncePool{free: make(chan []byte, maxIdleBounces)} }

func (p *bouncePool) get() ([]byte, error) {
	select {
	case b := <-p.free:
		return b, nil
	default:
	}
	b, err := unix.Mmap(-1, 0, bounceSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("map a %d-byte bounce buffer: %w", bounceSize, err)
	}
	return b, nil
}

func (p *bouncePool) put(b []byte) {
	select {
	case p.free <- b:
	default:
		_ = unix.Munmap(b)
	}
}

func (p *bouncePool) close() {
	for {
		select {
		case b := <-p.free:
			_ = unix.Munmap(b)
		default:
			return
		}
	}
}

// aligned reports whether a direct write of bufs can go to the kernel as it
// is: every buffer's address and length DirectAlign-aligned.
func aligned(bufs [][]byte) bool {
	for _, b := range bufs {
		if len(b)%DirectAlign != 0 || (len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%DirectAlign != 0) {
			return false
		}
	}
	return true
}

// AlignedBuffer returns an n-byte buffer from the Go heap whose address is
// DirectAlign-aligned, for ReadDirect. The heap never moves it, and a read
// holds it until the kernel is done with it, so it may receive DMA.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+DirectAlign)
	skip := (DirectAlign - int(uintptr(unsafe.Pointer(&b[0]))%DirectAlign)) % DirectAlign
	return b[skip : skip+n : skip+n]
}

// checkDirectRead fails a direct read whose buffer address, length or
// offset is unaligned.
func checkDirectRead(p []byte, off int64) error {
	if err := checkDirect(off, len(p)); err != nil {
		return err
	}
	if len(p) > 0 && uintptr(unsafe.Pointer(&p[0]))%DirectAlign != 0 {
		return fmt.Errorf("%w: buffer at %p", ErrUnaligned, &p[0])
	}
	return nil
}

// checkDirect fails a direct write whose offset or length is unaligned.
func checkDirect(off int64, total int) error {
	if off%DirectAlign != 0 || total%DirectAlign != 0 {
		return fmt.Errorf("%w: %d bytes at offset %d", ErrUnaligned, total, off)
	}
	return nil
}

// DirectWrites implements File: it opens the file a second time with
// O_DIRECT (through /proc/self/fd, so a rename since the first open does not
// matter) and sends every later write through that descriptor.
func (f *osFile) DirectWrites() error {
	f.ops.Lock() // exclusive: writes read f.direct under ops.RLock
	defer f.ops.Unlock()
	if f.closed {
		return f.err("open direct", ErrClosed)
	}
	if f.direct != nil {
		return nil
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(f.fd), unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return f.err("open direct", fmt.Errorf("%w: %w", ErrDirectUnsupported, err))
	}
	if err != nil {
		return f.err("open direct", err)
	}
	d := &osFile{fs: f.fs, fd: fd, path: f.path, fixed: -1}
	f.fs.io.attach(d)
	f.direct = d
	return nil
}

// ReadDirect implements File: it reads through a descriptor opened with
// O_DIRECT on first use (through /proc/self/fd, as DirectWrites), kept
// until Close.
func (f *osFile) ReadDirect(p []byte, off int64) (int, error) {
	if err := f.begin("read direct"); err != nil {
		return 0, err
	}
	defer f.end()
	if err := checkDirectRead(p, off); err != nil {
		return 0, f.err("read direct", err)
	}
	d, err := f.directReader()
	if err != nil {
		return 0, f.err("open direct", err)
	}
	return f.readFull(d, p, off, "read direct")
}

// directReader returns the O_DIRECT read descriptor, opening it the first
// time. Caller holds ops.RLock (so Close, which takes ops.Lock, waits);
// readMu makes concurrent first reads open it once.
func (f *osFile) directReader() (*osFile, error) {
	if d := f.directRead.Load(); d != nil {
		return d, nil
	}
	f.readMu.Lock()
	defer f.readMu.Unlock()
	if d := f.directRead.Load(); d != nil {
		return d, nil
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(f.fd), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return nil, fmt.Errorf("%w: %w", ErrDirectUnsupported, err)
	}
	if err != nil {
		return nil, err
	}
	d := &osFile{fs: f.fs, fd: fd, path: f.path, fixed: -1}
	f.fs.io.attach(d)
	f.directRead.Store(d)
	return d, nil
}

// closeDirect closes the direct descriptors, if any. Caller holds ops.Lock.
func (f *osFile) closeDirect() error {
	var errs []error
	if d := f.direct; d != nil {
		f.direct = nil
		f.fs.io.detach(d)
		errs = append(errs, unix.Close(d.fd))
	}
	if d := f.directRead.Swap(nil); d != nil {
		f.fs.io.detach(d)
		errs = append(errs, unix.Close(d.fd))
	}
	return errors.Join(errs...)
}

// writeDirect writes bufs at off through the direct descriptor, datasyncing
// after the last byte when sync is set. It returns the bytes written.
func (f *osFile) writeDirect(bufs [][]byte, off int64, sync bool) (int, error) {
	total := totalLen(bufs)
	if err := checkDirect(off, total); err != nil {
		return 0, err
	}
	if aligned(bufs) {
		return f.direct.writeChunk(bufs, off, sync)
	}
	bounce, err := f.fs.bounces.get()
	if err != nil {
		return 0, err
	}
	defer f.fs.bounces.put(bounce)
	done := 0
	for done < total {
		n := min(total-done, bounceSize)
		copyOut(bounce[:n], bufs)
		bufs = advanceBufs(bufs, n)
		w, err := f.direct.writeChunk([][]byte{bounce[:n]}, off+int64(done), sync && done+n == total)
		done += w
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// writeChunk writes bufs fully at off, with a datasync after them when sync
// is set (linked with the write where the backend can).
func (d *osFile) writeChunk(bufs [][]byte, off int64, sync bool) (int, error) {
	if !sync {
		return d.writeFully(bufs, off)
	}
	n, synced, err := d.fs.io.writeSync(d, bufs, off)
	if err != nil || synced {
		return n, err
	}
	rest, err := d.writeFully(advanceBufs(bufs, n), off+int64(n))
	if err != nil {
		return n + rest, err
	}
	return n + rest, d.fs.io.datasync(d)
}

// copyOut fills dst from the front of bufs.
func copyOut(dst []byte, bufs [][]byte) {
	for _, b := range bufs {
		if len(dst) == 0 {
			return
		}
		n := copy(dst, b)
		dst = dst[n:]
	}
}
