package metadata_test

import (
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
