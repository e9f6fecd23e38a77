package engine_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
)

// Benchmarks compare the real backends on the operations a journal and an
// entry log make. `magnetar perf disk` reports the same with percentiles.

func benchBackends(b *testing.B) []struct {
	name string
	fs   engine.FS
} {
	uring, err := engine.NewUring(engine.UringOptions{})
	if err != nil {
		b.Fatalf("io_uring unavailable: %v", err)
	}
	b.Cleanup(func() { uring.Close() })
	return []struct {
		name string
		fs   engine.FS
	}{{"uring", uring}, {"std", engine.NewStd()}}
}

func BenchmarkWriteDatasync(b *testing.B) {
	for _, be := range benchBackends(b) {
		for _, size := range []int{4 << 10, 64 << 10, 256 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", be.name, size>>10), func(b *testing.B) {
				f, err := be.fs.Create(filepath.Join(b.TempDir(), "w"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				buf := make([]byte, size)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := f.WriteAtSync([][]byte{buf}, int64(i)*int64(size)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkSequentialRead(b *testing.B) {
	const fileSize, chunk = 64 << 20, 1 << 20
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			f, err := be.fs.Create(filepath.Join(b.TempDir(), "r"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, chunk)
			for off := int64(0); off < fileSize; off += chunk {
				if _, err := f.WriteAt([][]byte{buf}, off); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Datasync(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(chunk)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := int64(i) * chunk % fileSize
				if off == 0 {
					b.StopTimer()
					_ = f.DropCache()
					b.StartTimer()
				}
				if _, err := f.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
