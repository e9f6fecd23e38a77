package metadata_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/metadatatest"
)

func TestMemoryConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadatatest.Harness {
		srv := metadata.NewMemoryServer()
		return metadatatest.Harness{
			NewSession: func(t *testing.T) metadata.Store {
				s := srv.NewSession()
				t.Cleanup(func() { s.Close() })
				return s
			},
			Expire: func(t *testing.T, s metadata.Store) { srv.ExpireSession(s) },
		}
	})
}

// TestSessionEventsEverySubscriber: each SessionEvents call is its own
// stream, starting with the current state, and every stream sees a loss.
func TestSessionEventsEverySubscriber(t *testing.T) {
	srv := metadata.NewMemoryServer()
	s := srv.NewSession()
	a, b := s.SessionEvents(), s.SessionEvents()
	srv.ExpireSession(s)
	late := s.SessionEvents()
	for name, w := range map[string]*metadata.SessionWatcher{"a": a, "b": b, "late": late} {
		want, n := "[connected lost]", 2
		if name == "late" {
			want, n = "[lost]", 1
		}
		var got []metadata.SessionState
		for len(got) < n {
			select {
			case st := <-w.States():
				got = append(got, st)
			case <-time.After(5 * time.Second):
				t.Fatalf("subscriber %s: only %v", name, got)
			}
		}
		if fmt.Sprint(got) != want {
			t.Errorf("subscriber %s saw %v, want %s", name, got, want)
		}
	}
}

// TestDisconnectSuspendsWithoutExpiring: a disconnected session's
// operations fail and its watches end interrupted, but the server keeps
// its ephemeral nodes; after Reconnect the same session works again.
func TestDisconnectSuspendsWithoutExpiring(t *testing.T) {
	ctx := context.Background()
	srv := metadata.NewMemoryServer()
	s, other := srv.NewSession(), srv.NewSession()
	defer s.Close()
	defer other.Close()
	if _, _, err := s.Create(ctx, "/brokers/b1", []byte("x"), metadata.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	states := s.SessionEvents()
	w, err := s.Watch(ctx, "/brokers")
	if err != nil {
		t.Fatal(err)
	}
	srv.Disconnect(s)
	for range w.Events() {
	}
	if !errors.Is(w.Err(), metadata.ErrWatchInterrupted) {
		t.Fatalf("watch ended with %v, want ErrWatchInterrupted", w.Err())
	}
	if _, _, err := s.Get(ctx, "/brokers/b1"); err == nil {
		t.Fatal("a disconnected session's Get succeeded")
	}
	if _, _, err := other.Get(ctx, "/brokers/b1"); err != nil {
		t.Fatalf("the ephemeral node went with the connection: %v", err)
	}
	srv.Reconnect(s)
	if _, _, err := s.Get(ctx, "/brokers/b1"); err != nil {
		t.Fatalf("after Reconnect: %v", err)
	}
	var got []metadata.SessionState
	for len(got) < 3 {
		select {
		case st := <-states.States():
			got = append(got, st)
		case <-time.After(5 * time.Second):
			t.Fatalf("session states: only %v", got)
		}
	}
	if fmt.Sprint(got) != "[connected suspended reconnected]" {
		t.Errorf("session states %v", got)
	}
}
