package metadata

import (
	"errors"
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
