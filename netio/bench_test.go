package netio

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/valyala/bytebufferpool"
)

// asyncEcho answers from a goroutine: the path of a broker dispatcher.
type asyncEcho struct {
	*recorder
	work chan echoJob
}

type echoJob struct {
	c  *Conn
	bb *bytebufferpool.ByteBuffer
}

func newAsyncEcho() *asyncEcho {
	a := &asyncEcho{recorder: newRecorder(), work: make(chan echoJob, 1024)}
	a.onFrame = func(c *Conn, frame []byte) error {
		bb := a.pool.Get()
		bb.B = append(bb.B[:0], frame...)
		a.work <- echoJob{c, bb}
		return nil
	}
	go func() {
		for j := range a.work {
			bb := j.bb
			j.c.WriteThen(func(error) { a.pool.Put(bb) }, bb.B)
		}
	}()
	return a
}

// BenchmarkPingPong sends 1 KiB frames over loopback through the server and
// waits for each echo (depth 1), or keeps depth frames in flight. The
// allocations counted include the client's (none per frame) and the
// server's.
func BenchmarkPingPong(b *testing.B) {
	for _, bc := range []struct {
		name  string
		async bool
		depth int
	}{
		{"loop/depth=1", false, 1},
		{"async/depth=1", true, 1},
		{"loop/depth=16", false, 16},
		{"async/depth=16", true, 16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var h Handler = newRecorder()
			if bc.async {
				a := newAsyncEcho()
				defer close(a.work)
				h = a
			}
			s, _ := start(b, h, Options{})
			client := dial(b, s)
			pingPong(b, client, bc.depth)
		})
	}
}

func pingPong(b *testing.B, client io.ReadWriter, depth int) {
	frame := mkFrame(bytes.Repeat([]byte{7}, 1020)) // 1 KiB with the prefix
	batch := bytes.Repeat(frame, depth)
	in := make([]byte, len(batch))
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	begin := time.Now()
	for i := 0; i < b.N; i += depth {
		if _, err := client.Write(batch); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(client, in); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(begin)
	b.StopTimer()
	if !bytes.Equal(in, batch) {
		b.Fatal("echo differs")
	}
	rounds := (b.N + depth - 1) / depth
	b.ReportMetric(float64(rounds*depth)/elapsed.Seconds(), "frames/s")
}
