package metadata

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// A server that accepts a connection and does not answer the connect
// request must not hold the client for go-zookeeper's ten receive
// timeouts: until the first bytes come, a read deadline is clamped to
// the handshake limit; after them, deadlines pass through.
func TestHandshakeConnClampsTheFirstReadDeadline(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	c := &handshakeConn{Conn: client, limit: 100 * time.Millisecond}
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.Read(make([]byte, 4))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from a silent server: %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the silent server held the read %v, want about the 100 ms limit", took)
	}
	// Once the server answered, go-zookeeper's own deadlines apply.
	go func() { _, _ = server.Write([]byte{1}) }()
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("after the first answer a one-hour deadline was cut short: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestZKHostsPaceRounds: within quickFor of an outage's first failed
// round, a failed round pauses briefly and go-zookeeper is not told (it
// would pause a second); past it go-zookeeper is told, and a session
// starts the count again.
func TestZKHostsPaceRounds(t *testing.T) {
	var pauses []time.Duration
	h := &zkHosts{quickFor: time.Hour, pause: func(d time.Duration) bool { pauses = append(pauses, d); return true }}
	if err := h.Init([]string{"a:1", "b:1", "c:1"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 9 {
		server, retryStart := h.Next()
		if retryStart {
			t.Fatalf("retryStart within quickFor (after %v)", got)
		}
		got = append(got, server)
	}
	if fmt.Sprint(got) != "[a:1 b:1 c:1 a:1 b:1 c:1 a:1 b:1 c:1]" {
		t.Fatalf("servers %v", got)
	}
	if len(pauses) != 2 || pauses[0] < 25*time.Millisecond || pauses[0] > 32*time.Millisecond ||
		pauses[1] < 50*time.Millisecond || pauses[1] > 63*time.Millisecond {
		t.Fatalf("pauses %v, want about 25 and 50 ms", pauses)
	}
	for n := 1; n <= 8; n++ {
		if d := zkRoundPause(n); d < 25*time.Millisecond || d > 250*time.Millisecond {
			t.Fatalf("pause after round %d: %v, want 25-250 ms", n, d)
		}
	}

	h.quickFor = 0 // the outage outlasted it: go-zookeeper pauses and fails queued calls
	h.Connected()
	for i := range 3 {
		if _, retryStart := h.Next(); retryStart {
			t.Fatalf("retryStart on attempt %d of the first round", i+1)
		}
	}
	if _, retryStart := h.Next(); !retryStart {
		t.Fatal("no retryStart after a failed round past quickFor")
	}
	if len(pauses) != 2 {
		t.Fatalf("paused past quickFor: %v", pauses)
	}

	// The store closing cuts a pause short: go-zookeeper is told the round
	// ended, so that it sees its own quit signal instead of dialling on.
	h.quickFor = time.Hour
	h.pause = func(time.Duration) bool { return false }
	h.Connected()
	for range 3 {
		h.Next()
	}
	if _, retryStart := h.Next(); !retryStart {
		t.Fatal("no retryStart after a pause cut short by the store closing")
	}
}
