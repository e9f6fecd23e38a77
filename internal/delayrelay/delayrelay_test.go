package delayrelay

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"testing"
	"time"
)

// echoServer echoes every connection on loopback until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func startRelay(t *testing.T, target string, delay time.Duration) *Relay {
	t.Helper()
	r, err := Listen("127.0.0.1:0", target, delay, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// roundTrip sends one byte and waits for it to come back.
func roundTrip(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// The round trip through the relay is twice the one-way delay (plus
// loopback time), and SetDelay changes it for what is sent afterwards.
func TestRoundTripIsTwiceTheDelay(t *testing.T) {
	r := startRelay(t, echoServer(t), 10*time.Millisecond)
	c := dial(t, r.Addr())
	measure := func() time.Duration {
		var ds []time.Duration
		for range 9 {
			ds = append(ds, roundTrip(t, c))
		}
		return median(ds)
	}
	if rtt := measure(); rtt < 20*time.Millisecond || rtt > 35*time.Millisecond {
		t.Fatalf("round trip with 10 ms each way: %s, want 20-35 ms", rtt)
	}
	r.SetDelay(0)
	if rtt := measure(); rtt > 10*time.Millisecond {
		t.Fatalf("round trip with no delay: %s, want under 10 ms", rtt)
	}
	r.SetDelay(5 * time.Millisecond)
	if rtt := measure(); rtt < 10*time.Millisecond || rtt > 25*time.Millisecond {
		t.Fatalf("round trip with 5 ms each way: %s, want 10-25 ms", rtt)
	}
	// The emulated 5 ms round trip of the stretched-cluster tests: timer
	// lateness (up to a millisecond per sleep) is corrected for. The delay
	// is a floor no round trip may go under; how close to it the relay gets
	// shows in the fastest one. A loaded machine (make test runs packages
	// side by side, under the race detector) delays many: a CI run once had
	// the fastest of 15 at 7.3 ms. So round trips go on until one is within
	// 2 ms of the floor, up to 300 of them (about 2 s): a relay that adds
	// its own delay to every round trip still fails.
	r.SetDelay(2500 * time.Microsecond)
	measure()
	fastest := time.Hour
	tries := 0
	for tries < 300 && fastest > 7*time.Millisecond {
		rtt := roundTrip(t, c)
		tries++
		if rtt < 5*time.Millisecond {
			t.Fatalf("round trip %d with 2.5 ms each way: %s, under the 5 ms floor", tries, rtt)
		}
		fastest = min(fastest, rtt)
	}
	if fastest > 7*time.Millisecond {
		t.Errorf("fastest of %d round trips with 2.5 ms each way: %s, want 5-7 ms", tries, fastest)
	} else {
		t.Logf("fastest of %d round trips with 2.5 ms each way: %s", tries, fastest)
	}
}

// Bytes arrive intact and in order, in both directions at once, with
// writes of random sizes.
func TestOrderAndIntegrity(t *testing.T) {
	r := startRelay(t, echoServer(t), 2*time.Millisecond)
	c := dial(t, r.Addr())
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	errc := make(chan error, 1)
	go func() {
		rest := data
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(100<<10))
			if _, err := c.Write(rest[:n]); err != nil {
				errc <- err
				return
			}
			rest = rest[n:]
		}
		errc <- c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echoed %d bytes differ from the %d sent", len(got), len(data))
	}
}

// Messages sent 1 ms apart arrive 1 ms apart, one delay later: the delay
// is a latency, not a cost per read (a sleep per read would take
// 100 x 20 ms here).
func TestDelayDoesNotSerialiseThroughput(t *testing.T) {
	r := startRelay(t, echoServer(t), 20*time.Millisecond)
	c := dial(t, r.Addr())
	const msgs = 100
	start := time.Now()
	go func() {
		for range msgs {
			if _, err := c.Write([]byte{7}); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if _, err := io.ReadFull(c, make([]byte, msgs)); err != nil {
		t.Fatal(err)
	}
	// About 100 x 1 ms of sending (sleeps overshoot) plus 40 ms of round trip.
	if took := time.Since(start); took > time.Second {
		t.Fatalf("%d one-byte messages 1 ms apart took %s through a 20 ms relay; want well under 1 s", msgs, took)
	}
}

// A half close reaches the far side after the data before it, and the far
// side can still answer.
func TestHalfClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer s.Close()
		b, _ := io.ReadAll(s) // until the client's half close
		_, _ = s.Write([]byte("reply"))
		got <- b
	}()
	r := startRelay(t, ln.Addr().String(), 5*time.Millisecond)
	c := dial(t, r.Addr())
	if _, err := c.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	reply, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != "request" || string(reply) != "reply" {
		t.Fatalf("server read %q, client read %q", b, reply)
	}
}

// Close ends relayed connections and refuses new ones; a target that is
// gone closes the client's connection.
func TestCloseAndUnreachableTarget(t *testing.T) {
	r := startRelay(t, echoServer(t), 0)
	c := dial(t, r.Addr())
	roundTrip(t, c)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
		t.Fatal("a relayed connection stayed open after Close")
	}
	if c, err := net.DialTimeout("tcp", r.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("the relay accepted a connection after Close")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	r2 := startRelay(t, gone, 0)
	c2 := dial(t, r2.Addr())
	if _, err := io.ReadFull(c2, make([]byte, 1)); err == nil {
		t.Fatal("a read through a relay to a closed port succeeded, want the connection closed")
	}
}

func TestNegativeDelayRefused(t *testing.T) {
	if _, err := Listen("127.0.0.1:0", "127.0.0.1:1", -time.Millisecond, nil); err == nil {
		t.Fatal("a negative delay was accepted")
	}
}
