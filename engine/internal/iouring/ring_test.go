package iouring

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func setupOrFail(t *testing.T) *Ring {
	t.Helper()
	r, err := Setup(Options{Entries: 8})
	if err != nil {
		t.Fatalf("io_uring is required on this machine (the engine's uring backend is tested here): %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestNopRoundTrip(t *testing.T) {
	r := setupOrFail(t)
	for i := 0; i < 3*int(r.SQEntries()); i++ { // wrap the rings several times
		sqe, err := r.PrepareSQE()
		if err != nil {
			t.Fatal(err)
		}
		sqe.Opcode = OpNop
		sqe.UserData = uint64(i) + 100
		if n, err := r.Submit(); err != nil || n != 1 {
			t.Fatalf("submit: n=%d err=%v", n, err)
		}
		if err := r.WaitCQE(); err != nil {
			t.Fatal(err)
		}
		cqe, ok := r.PeekCQE()
		if !ok || cqe.UserData != uint64(i)+100 || cqe.Res != 0 {
			t.Fatalf("cqe %+v ok=%v", cqe, ok)
		}
		r.AdvanceCQ(1)
	}
}

func TestRingFull(t *testing.T) {
	r := setupOrFail(t)
	for i := uint32(0); i < r.SQEntries(); i++ {
		if _, err := r.PrepareSQE(); err != nil {
			t.Fatalf("sqe %d: %v", i, err)
		}
	}
	if _, err := r.PrepareSQE(); !errors.Is(err, ErrRingFull) {
		t.Fatalf("want ErrRingFull, got %v", err)
	}
}

func TestLinkedWriteFsyncAndFixedResources(t *testing.T) {
	r := setupOrFail(t)
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.RegisterFiles([]int32{-1, -1}); err != nil {
		t.Fatal(err)
	}
	if err := r.UpdateFiles(1, []int32{int32(f.Fd())}); err != nil {
		t.Fatal(err)
	}
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	copy(buf, "hello, ring")
	if err := r.RegisterBuffers([][]byte{buf}); err != nil {
		t.Fatal(err)
	}
	w, _ := r.PrepareSQE()
	w.Opcode, w.Flags, w.Fd = OpWriteFixed, SqeIOLink|SqeFixedFile, 1
	w.Addr, w.Len, w.BufIndex, w.UserData = uint64(uintptr(unsafe.Pointer(&buf[0]))), 11, 0, 1
	s, _ := r.PrepareSQE()
	s.Opcode, s.Flags, s.Fd, s.OpFlags, s.UserData = OpFsync, SqeFixedFile, 1, FsyncDatasync, 2
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 2; {
		if err := r.WaitCQE(); err != nil {
			t.Fatal(err)
		}
		cqe, _ := r.PeekCQE()
		r.AdvanceCQ(1)
		got++
		want := int32(0)
		if cqe.UserData == 1 {
			want = 11
		}
		if cqe.Res != want {
			t.Fatalf("op %d res %d, want %d", cqe.UserData, cqe.Res, want)
		}
	}
	runtime.KeepAlive(buf)
	data, _ := os.ReadFile(f.Name())
	if string(data) != "hello, ring" {
		t.Fatalf("file holds %q", data)
	}
	if err := r.UnregisterBuffers(); err != nil {
		t.Fatal(err)
	}
	if err := r.UnregisterFiles(); err != nil {
		t.Fatal(err)
	}
}

func TestProbe(t *testing.T) {
	r := setupOrFail(t)
	ops, err := r.Probe()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []uint8{OpNop, OpWritev, OpReadv, OpFsync, OpFallocate, OpRead, OpWrite} {
		if !ops[op] {
			t.Errorf("kernel reports opcode %d unsupported", op)
		}
	}
}
