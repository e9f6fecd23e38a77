package netio

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"
)

// seqRecorder records the sequence numbers of the frames delivered.
type seqRecorder struct {
	*recorder
	mu   sync.Mutex
	seqs []uint32
}

func newSeqRecorder() *seqRecorder {
	r := &seqRecorder{recorder: newRecorder()}
	r.onFrame = func(c *Conn, frame []byte) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.seqs = append(r.seqs, binary.BigEndian.Uint32(frame[4:]))
		return nil
	}
	return r
}

func (r *seqRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seqs)
}

func (r *seqRecorder) inOrder(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.seqs {
		if s != uint32(i) {
			t.Fatalf("frame %d has seq %d", i, s)
		}
	}
}

func seqFrames(from, to int) []byte {
	var b []byte
	for i := from; i < to; i++ {
		p := make([]byte, 4+i%50)
		binary.BigEndian.PutUint32(p, uint32(i))
		b = append(b, mkFrame(p)...)
	}
	return b
}

func TestPauseResume(t *testing.T) {
	rec := newSeqRecorder()
	rec.onOpen = func(c *Conn) { c.PauseReading() }
	s, _ := start(t, rec, Options{})
	client := dial(t, s)
	c := rec.nextOpen(t)
	if _, err := client.Write(seqFrames(0, 20)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := rec.count(); n != 0 || !c.Paused() {
		t.Fatalf("%d frames delivered while paused", n)
	}
	c.ResumeReading()
	waitFor(t, "20 frames", func() bool { return rec.count() == 20 })
	rec.inOrder(t)
}

// TestPauseFromOnFrame: a pause inside OnFrame stops delivery after that
// frame, even with more frames in the same read.
func TestPauseFromOnFrame(t *testing.T) {
	rec := newSeqRecorder()
	record := rec.onFrame
	rec.onFrame = func(c *Conn, frame []byte) error {
		if err := record(c, frame); err != nil {
			return err
		}
		if binary.BigEndian.Uint32(frame[4:]) == 4 {
			c.PauseReading()
		}
		return nil
	}
	s, _ := start(t, rec, Options{})
	client := dial(t, s)
	c := rec.nextOpen(t)
	client.Write(seqFrames(0, 30))
	waitFor(t, "5 frames", func() bool { return rec.count() == 5 })
	time.Sleep(100 * time.Millisecond)
	if n := rec.count(); n != 5 {
		t.Fatalf("%d frames delivered, want 5", n)
	}
	c.ResumeReading()
	waitFor(t, "30 frames", func() bool { return rec.count() == 30 })
	rec.inOrder(t)
}

// TestPausedClientIgnoringBackPressure: a client that keeps sending while
// reading is paused is disconnected once the inbound buffer passes the cap.
func TestPausedClientIgnoringBackPressure(t *testing.T) {
	rec := newSeqRecorder()
	rec.onOpen = func(c *Conn) { c.PauseReading() }
	s, logs := start(t, rec, Options{MaxFrameSize: 1024, MaxInboundBuffered: 64 << 10})
	client := dial(t, s)
	rec.nextOpen(t)
	chunk := seqFrames(0, 100)
	client.SetWriteDeadline(time.Now().Add(20 * time.Second))
	sent := 0
	for sent < 64<<20 {
		n, err := client.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	ev := rec.nextClose(t)
	if !errors.Is(ev.err, ErrBackPressureIgnored) {
		t.Fatalf("OnClose err %v after %d bytes", ev.err, sent)
	}
	if rec.count() != 0 {
		t.Fatalf("%d frames delivered while paused", rec.count())
	}
	if n := len(logs.lines("connection closed", "ignored back-pressure", "limit 65536")); n != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", n, logs)
	}
}
